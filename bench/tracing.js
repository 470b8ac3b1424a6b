// Figure 14: what tracing costs. The request path (figure 1's page behind the guard) and figure
// 11's delivery (SQLite and PostgreSQL outboxes, 8 pushes at a time) in three settings, measured
// side by side in one run: `tracing: false` (the API never loaded: the code path of the releases
// before tracing), the default with no SDK registered ("off": the API's no-op tracer), and the
// default with an OpenTelemetry SDK registered whose exporter drops every span ("on": spans are
// made, attributes set, contexts stored and links read, nothing is sent anywhere).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { context, propagation, trace } from '@opentelemetry/api';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { createMotherClient } from 'panel-license-guard';
import { postgresOutboxStore } from 'panel-license-guard/postgres';
import pg from 'pg';
import { PANELS } from './app.js';
import { closeAll } from './child.js';
import { ourOutbox } from './delivery.js';
import { row, startServers } from './http-overhead.js';
import { compareVariants } from './load.js';
import { fmt, median, round } from './stats.js';

/** An exporter that drops every span at once: what tracing costs this process, not a collector. */
const dropping = { export: (_spans, done) => done({ code: 0 }), shutdown: async () => {}, forceFlush: async () => {} };

/** Registers an SDK as an app does (global provider, AsyncLocalStorage context, W3C propagator); resolves to its undoing. */
export async function registerNoopSdk() {
  const provider = new NodeTracerProvider({ spanProcessors: [new BatchSpanProcessor(dropping)] });
  provider.register();
  return async () => {
    await provider.shutdown();
    trace.disable();
    context.disable();
    propagation.disable();
  };
}

/** The request path: the guard with `tracing: false`, left out (no SDK), and with an SDK registered. */
async function requestPath({ baseUrl, rounds, seconds, warmupSeconds, connections, log }) {
  const servers = await startServers(['guard-untraced', 'guard', 'guard-traced'], { baseUrl });
  try {
    log(`  request path: ${rounds} rounds x ${seconds} s per variant, ${connections} connections`);
    const run = await compareVariants(servers, { rounds, seconds, warmupSeconds, connections, log });
    return [
      row(
        'tracing-request-off',
        '14. Request path: tracing off (no SDK) vs `tracing: false`',
        run,
        'guard',
        'guard-untraced',
        'tracing: false',
        '≈ 1 (0.97–1.03)',
        (r) => r >= 0.97 && r <= 1.03,
      ),
      row('tracing-request-on', '14. Request path: tracing on (SDK, no-op exporter) vs off', run, 'guard-traced', 'guard', 'off', '≥ 0.95', (r) => r >= 0.95),
    ];
  } finally {
    await closeAll(Object.values(servers));
  }
}

const SETTINGS = ['untraced', 'off', 'on'];

/** One delivery run of `store` (a fresh table or file) in one setting, releases per second. */
async function deliveryRun(client, where, setting, config) {
  const undo = setting === 'on' ? await registerNoopSdk() : undefined;
  try {
    return await ourOutbox(client, where, { ...config, ...(setting === 'untraced' && { tracing: false }) });
  } finally {
    await undo?.();
  }
}

/** Figure 11's delivery (c=8, backlog and overlap) in the three settings, in rotated order each round. */
async function delivery({ emulator, databaseUrl, rounds, count, log }) {
  const { apiKey, apiSecret } = PANELS.active;
  const client = createMotherClient({ baseUrl: emulator.info.url, apiKey, apiSecret });
  const dir = mkdtempSync(join(tmpdir(), 'plg-bench-tracing-'));
  const pool = databaseUrl ? new pg.Pool({ connectionString: databaseUrl, max: 10 }) : undefined;
  const schema = `bench_tracing_${process.pid}`;
  let runs = 0;
  const stores = {
    SQLite: () => ({ file: join(dir, `t-${++runs}.db`) }),
    ...(pool && { PostgreSQL: () => ({ store: postgresOutboxStore({ pool, schema, table: `t_${++runs}` }) }) }),
  };
  const figures = [];
  try {
    log(`  delivery: ${Object.keys(stores).join(', ')}, ${rounds} rounds x ${count} releases per setting, c=8`);
    for (const [name, where] of Object.entries(stores)) {
      for (const mode of ['backlog', 'overlap']) {
        const perRound = Object.fromEntries(SETTINGS.map((s) => [s, []]));
        for (let r = 0; r < rounds; r++) {
          for (let i = 0; i < SETTINGS.length; i++) {
            const setting = SETTINGS[(i + r) % SETTINGS.length];
            await emulator.request('reset');
            const settings = { mode, concurrency: 8, count, label: `trace-${++runs}` };
            perRound[setting].push(Math.round(await deliveryRun(client, where(), setting, settings)));
          }
        }
        const ratio = (a, b) => round(median(perRound[a].map((v, i) => v / perRound[b][i])), 3);
        const [off, on] = [ratio('off', 'untraced'), ratio('on', 'off')];
        log(`    ${name} ${mode}: ${SETTINGS.map((s) => `${s} ${fmt(median(perRound[s]))}/s`).join(', ')}`);
        const label = `${name}, c=8, ${mode}`;
        figures.push(
          {
            id: `tracing-delivery-off-${name.toLowerCase()}-${mode}`,
            figure: `14. Delivery: tracing off (no SDK) vs \`tracing: false\` (${label})`,
            measured: `${fmt(median(perRound.off))} releases/s`,
            baseline: `${fmt(median(perRound.untraced))} releases/s tracing: false`,
            ratio: off,
            target: '≈ 1 (0.95–1.05)',
            met: off >= 0.95 && off <= 1.05,
            raw: { perRound },
          },
          {
            id: `tracing-delivery-on-${name.toLowerCase()}-${mode}`,
            figure: `14. Delivery: tracing on (SDK, no-op exporter) vs off (${label})`,
            measured: `${fmt(median(perRound.on))} releases/s`,
            baseline: `${fmt(median(perRound.off))} releases/s off`,
            ratio: on,
            target: '≥ 0.95',
            met: on >= 0.95,
            raw: { perRound },
          },
        );
      }
    }
    return figures;
  } finally {
    rmSync(dir, { recursive: true, force: true });
    if (pool) {
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
      await pool.end();
    }
  }
}

/**
 * Figure 14b: what tracing adds to the package's own work per release, with the I/O taken away:
 * the memory store and a sender that answers at once, so every microsecond is the outbox's
 * (enqueue, claim, push, record) and the tracing's. Rotated rounds of `count` releases.
 */
export async function measureTracingCpu({ rounds, count, log }) {
  const sender = { panelId: 'bench-cpu', pushSerializedRelease: async () => ({ ok: true, release_id: 1 }) };
  const perRound = Object.fromEntries(SETTINGS.map((s) => [s, []]));
  const once = async (setting) => {
    const undo = setting === 'on' ? await registerNoopSdk() : undefined;
    try {
      const where = { file: ':memory:' };
      return await ourOutbox(sender, where, { mode: 'overlap', concurrency: 8, count, label: 'cpu', ...(setting === 'untraced' && { tracing: false }) });
    } finally {
      await undo?.();
    }
  };
  for (const setting of SETTINGS) await once(setting); // warm-up
  for (let r = 0; r < rounds; r++)
    for (let i = 0; i < SETTINGS.length; i++) {
      const setting = SETTINGS[(i + r) % SETTINGS.length];
      perRound[setting].push(Math.round(await once(setting)));
    }
  const ratio = (a, b) => round(median(perRound[a].map((v, i) => v / perRound[b][i])), 3);
  log(`  memory store, instant mother: ${SETTINGS.map((s) => `${s} ${fmt(median(perRound[s]))}/s`).join(', ')}`);
  const microseconds = (setting) => round(1e6 / median(perRound[setting]), 1);
  const [off, on] = [ratio('off', 'untraced'), ratio('on', 'off')];
  return [
    {
      id: 'tracing-cpu-off',
      figure: '14b. Outbox CPU per release (memory store, instant mother): tracing off (no SDK) vs `tracing: false`',
      measured: `${fmt(median(perRound.off))} releases/s (${microseconds('off')} µs each)`,
      baseline: `${fmt(median(perRound.untraced))} releases/s (${microseconds('untraced')} µs each) tracing: false`,
      ratio: off,
      target: '≈ 1 (0.95–1.05)',
      met: off >= 0.95 && off <= 1.05,
      raw: { perRound },
    },
    {
      id: 'tracing-cpu-on',
      figure: '14b. Outbox CPU per release (memory store, instant mother): tracing on (SDK, no-op exporter) vs off',
      measured: `${fmt(median(perRound.on))} releases/s (${microseconds('on')} µs each)`,
      baseline: `${fmt(median(perRound.off))} releases/s off`,
      ratio: on,
      target: 'reference',
      met: null,
      raw: { perRound },
    },
  ];
}

/** Figure 14: the request path and delivery with tracing on, off, and `false`. */
export async function measureTracing({ baseUrl, emulator, databaseUrl, http, rounds, count, log }) {
  return [...(await requestPath({ baseUrl, ...http, log })), ...(await delivery({ emulator, databaseUrl, rounds, count, log }))];
}

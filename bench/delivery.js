// Figure 11: release delivery side by side — our outbox (PostgreSQL, SQLite) against the job
// queues a Node developer would pick instead (bench/peers.js) and a plain loop with no durability.
// Every system sends the same signed POST through the same client to the same mother (the
// emulator, in its own process), at the same concurrency; releases are enqueued first and then
// drained ("backlog"), or enqueued by 8 callers while delivery runs ("overlap").
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { createMotherClient, createReleaseOutbox } from 'panel-license-guard';
import { postgresOutboxStore } from 'panel-license-guard/postgres';
import pg from 'pg';
import { PANELS } from './app.js';
import { makeRelease } from './outbox.js';
import { fmt, median, round } from './stats.js';

/** Callers that enqueue while delivery runs ("overlap"), whatever the delivery concurrency. */
export const PRODUCERS = 8;
const silent = { warn: () => {}, error: () => {} };

/** Runs `produce(i)` for i in 0…count-1 from `callers` async callers, each yielding after a call. */
export async function produce(count, callers, enqueue) {
  let next = 0;
  const caller = async () => {
    while (next < count) {
      await enqueue(next++);
      await nextTurn();
    }
  };
  await Promise.all(Array.from({ length: callers }, caller));
}

/**
 * Times one system: `backlog` enqueues every release before starting delivery and times the drain
 * alone; `overlap` times from the first enqueue to the last delivery.
 */
export async function timed(mode, count, { enqueue, start, drained }) {
  if (mode === 'backlog') {
    await produce(count, PRODUCERS, enqueue);
    const began = performance.now();
    start();
    await drained();
    return count / ((performance.now() - began) / 1000);
  }
  const began = performance.now();
  start();
  await produce(count, PRODUCERS, enqueue);
  await drained();
  return count / ((performance.now() - began) / 1000);
}

/** Our outbox on a store: `where` is `{ store }` or `{ file }`; `tracing` as the option (figure 14). */
export async function ourOutbox(client, where, { mode, concurrency, count, label, tracing }) {
  const outbox = createReleaseOutbox({ client, ...where, concurrency, autoStart: false, logger: silent, ...(tracing !== undefined && { tracing }) });
  const problems = [];
  outbox.on('dead', (event) => problems.push(event.message));
  outbox.on('error', (event) => problems.push(event.error.message));
  try {
    const rate = await timed(mode, count, {
      enqueue: (i) => outbox.enqueue(makeRelease(label, i)),
      start: () => outbox.start(),
      drained: async () => {
        const stats = await outbox.drain({ signal: AbortSignal.timeout(300_000) });
        if (problems.length > 0 || stats.delivered !== count) throw new Error(`bench: outbox delivered ${stats.delivered}/${count}: ${problems[0] ?? ''}`);
      },
    });
    return rate;
  } finally {
    await outbox.close();
  }
}

/** The reference: `concurrency` loops calling pushRelease() back to back, nothing stored. */
async function plainLoop(client, { mode, concurrency, count, label }) {
  let next = 0;
  const began = performance.now();
  const loop = async () => {
    while (next < count) await client.pushRelease(makeRelease(label, next++));
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  void mode;
  return count / ((performance.now() - began) / 1000);
}

/** Our systems and the plain loop, as `name → run(settings)`. */
export async function ourSystems({ emulator, databaseUrl }) {
  const { apiKey, apiSecret } = PANELS.active;
  const client = createMotherClient({ baseUrl: emulator.info.url, apiKey, apiSecret });
  const dir = mkdtempSync(join(tmpdir(), 'plg-bench-delivery-'));
  const pool = databaseUrl ? new pg.Pool({ connectionString: databaseUrl, max: 10 }) : undefined;
  const schema = `bench_delivery_${process.pid}`;
  let tables = 0;
  const systems = {
    plain: (settings) => plainLoop(client, settings),
    'ours-sqlite': (settings) => ourOutbox(client, { file: join(dir, `${settings.label}.db`) }, settings),
    ...(pool ? { 'ours-postgres': (settings) => ourOutbox(client, { store: postgresOutboxStore({ pool, schema, table: `q_${++tables}` }) }, settings) } : {}),
  };
  const close = async () => {
    rmSync(dir, { recursive: true, force: true });
    if (pool) {
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
      await pool.end();
    }
  };
  return { systems, close };
}

const CONFIGS = [
  { concurrency: 8, mode: 'backlog' },
  { concurrency: 8, mode: 'overlap' },
  { concurrency: 1, mode: 'backlog' },
  { concurrency: 1, mode: 'overlap' },
];
/** The targets of the issue: a share of the plain loop's rate, by concurrency. */
const PLAIN_SHARE = { 8: 0.85, 1: 0.8 };

/**
 * Every system in every configuration, in rotated order each round (so none always runs first or
 * after the same neighbour); medians of the rounds, and ratios taken within a round.
 */
export async function measureDeliveryComparison({ emulator, databaseUrl, redisUrl, rounds, count, log }) {
  const { peerSystems } = await import('./peers.js');
  const ours = await ourSystems({ emulator, databaseUrl });
  const peers = await peerSystems({ emulator, databaseUrl, redisUrl });
  const systems = { ...ours.systems };
  for (const [name, run] of Object.entries(peers)) systems[name] = (settings) => run(settings, (hooks) => timed(settings.mode, settings.count, hooks));
  const names = Object.keys(systems);
  log(`  ${names.join(', ')}: ${rounds} rounds x ${count} releases per configuration, ${PRODUCERS} producers when overlapping`);
  if (!peers['pg-boss']) log('  (bench/peers is not installed: run `npm install --prefix bench/peers` for the job queues)');
  let runs = 0;
  const run = (name, settings) => systems[name]({ ...settings, label: `cmp-${++runs}-${name}` });
  try {
    for (const name of names) await run(name, { mode: 'backlog', concurrency: 8, count: Math.min(count, 1000) });
    const table = [];
    for (const config of CONFIGS) {
      const perRound = Object.fromEntries(names.map((name) => [name, []]));
      for (let r = 0; r < rounds; r++) {
        for (let i = 0; i < names.length; i++) {
          const name = names[(i + r) % names.length];
          await emulator.request('reset');
          perRound[name].push(Math.round(await run(name, { ...config, count })));
        }
      }
      const medians = Object.fromEntries(names.map((name) => [name, median(perRound[name])]));
      log(`    c=${config.concurrency} ${config.mode}: ${names.map((name) => `${name} ${fmt(medians[name])}/s`).join(', ')}`);
      table.push({ ...config, perRound, medians });
    }
    return deliveryFigures(table, names);
  } finally {
    await ours.close();
  }
}

/** Ratio of `a` to `b` in each round, then the median. */
const roundRatio = (row, a, b) => round(median(row.perRound[a].map((value, i) => value / row.perRound[b][i])), 3);

function deliveryFigures(table, names) {
  const figures = [];
  for (const row of table) {
    const label = `c=${row.concurrency}, ${row.mode}`;
    const target = PLAIN_SHARE[row.concurrency];
    for (const store of ['ours-postgres', 'ours-sqlite'].filter((name) => names.includes(name))) {
      const ratio = roundRatio(row, store, 'plain');
      figures.push({
        id: `delivery-${store}-c${row.concurrency}-${row.mode}`,
        figure: `11. Delivery, ${store === 'ours-postgres' ? 'PostgreSQL' : 'SQLite'} outbox vs plain loop (${label})`,
        measured: `${fmt(row.medians[store])} releases/s`,
        baseline: `${fmt(row.medians.plain)} releases/s plain loop`,
        ratio,
        target: `≥ ${target}`,
        met: ratio >= target,
        raw: { perRound: row.perRound },
      });
    }
    const rivals = ['pg-boss', 'graphile-worker'].filter((name) => names.includes(name));
    if (names.includes('ours-postgres') && rivals.length > 0) {
      const best = rivals.reduce((a, b) => (row.medians[a] >= row.medians[b] ? a : b));
      const ratio = roundRatio(row, 'ours-postgres', best);
      figures.push({
        id: `delivery-vs-peers-c${row.concurrency}-${row.mode}`,
        figure: `11. Delivery, PostgreSQL outbox vs the faster of pg-boss and graphile-worker (${label})`,
        measured: `${fmt(row.medians['ours-postgres'])} releases/s`,
        baseline: `${fmt(row.medians[best])} releases/s ${best}`,
        ratio,
        target: '> 1',
        met: ratio > 1,
        raw: { medians: row.medians },
      });
    }
  }
  return figures;
}

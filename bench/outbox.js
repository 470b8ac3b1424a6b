// Figure 4: releases per second through the durable (SQLite) outbox vs a plain pushRelease() loop, and vs 4 loops.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { createMotherClient } from 'panel-license-guard';
import { PANELS } from './app.js';
import { fmt, median, percentile, rotations, round } from './stats.js';

/** The outbox may not be re-exported from the package root yet; fall back to its module in dist/. */
export async function loadCreateReleaseOutbox() {
  const root = await import('panel-license-guard');
  if (typeof root.createReleaseOutbox === 'function') return root.createReleaseOutbox;
  return (await import('../dist/outbox/outbox.js')).createReleaseOutbox;
}

const WARMUP_PLAIN_RUNS = 4;

export function makeRelease(run, i) {
  return {
    title: `Bench Track ${i}`,
    primary_artist: 'Bench Artist',
    album: 'Bench Album',
    genre: 'Electronic',
    language: 'en',
    label: 'Bench Records',
    isrc: `USRC1${String(76 + (i % 20)).padStart(2, '0')}${String(i % 100000).padStart(5, '0')}`,
    release_date: '2026-01-15',
    remote_track_id: `bench-${run}-${i}`,
    audio_url: `https://cdn.bench.example/audio/${run}/${i}.mp3`,
  };
}

/**
 * `concurrency` callers enqueue `count` releases between them (each yielding to the event loop after
 * an enqueue, as request handlers would), then drain() waits for the last delivery. The rate runs
 * from the first enqueue to the drain; enqueue latency is what each caller waited.
 */
export async function outboxRun(createReleaseOutbox, client, { where, run, count, concurrency }) {
  const problems = [];
  const outbox = createReleaseOutbox({ client, ...where, concurrency, logger: console });
  outbox.on('dead', (event) => problems.push(event.message));
  outbox.on('error', (event) => problems.push(event.error.message));
  const latencies = [];
  let next = 0;
  const producer = async () => {
    while (next < count) {
      const release = makeRelease(run, next++);
      const before = performance.now();
      await outbox.enqueue(release);
      latencies.push(performance.now() - before);
      await nextTurn();
    }
  };
  const start = performance.now();
  try {
    await Promise.all(Array.from({ length: concurrency }, producer));
    const stats = await outbox.drain({ signal: AbortSignal.timeout(120_000) });
    const seconds = (performance.now() - start) / 1000;
    if (problems.length > 0 || stats.delivered !== count) throw new Error(`bench: outbox delivered ${stats.delivered}/${count}: ${problems[0] ?? ''}`);
    return { rate: count / seconds, latencies };
  } finally {
    await outbox.close();
  }
}

/** The baseline: `concurrency` loops calling pushRelease() one release after another over keep-alive. */
export async function plainRun(client, { run, count, concurrency }) {
  let next = 0;
  const start = performance.now();
  const loop = async () => {
    while (next < count) await client.pushRelease(makeRelease(run, next++));
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  return { rate: count / ((performance.now() - start) / 1000) };
}

export async function measureOutbox({ emulator, rounds, count, concurrency, log }) {
  const createReleaseOutbox = await loadCreateReleaseOutbox();
  const { apiKey, apiSecret } = PANELS.active;
  const client = createMotherClient({ baseUrl: emulator.info.url, apiKey, apiSecret });
  const dir = mkdtempSync(join(tmpdir(), 'plg-bench-outbox-'));
  log(`  outbox: ${rounds} rounds x ${count} releases per variant, ${concurrency} callers and ${concurrency} pushes at once, SQLite file in ${dir}`);
  // The baseline is "a plain loop of pushRelease": one loop, one push at a time. The
  // outbox runs `concurrency` pushes at once, so the same number of parallel loops is reported
  // too, as the stricter reference: it shows what durability costs at equal parallelism.
  const variants = {
    outbox: (run) => outboxRun(createReleaseOutbox, client, { where: { file: join(dir, `${run}.db`) }, run, count, concurrency }),
    plain: (run) => plainRun(client, { run, count, concurrency: 1 }),
    parallel: (run) => plainRun(client, { run, count, concurrency }),
  };
  try {
    // Warm-up: the client and the emulator take a few thousand pushes to reach full speed (JIT, sockets).
    for (let i = 0; i < WARMUP_PLAIN_RUNS; i++) await variants.plain(`warmup-plain-${i}`);
    await variants.outbox('warmup-outbox');
    const perRound = { outbox: [], plain: [], parallel: [] };
    const latencies = [];
    for (const [index, order] of rotations(Object.keys(variants), rounds).entries()) {
      for (const name of order) {
        await emulator.request('reset');
        const result = await variants[name](`r${index}-${name}`);
        const { count: received } = await emulator.request('releases');
        if (received !== count) throw new Error(`bench: the emulator received ${received}/${count} releases from ${name}`);
        perRound[name].push(Math.round(result.rate));
        if (result.latencies) latencies.push(...result.latencies);
      }
      log(
        `    round ${index + 1}/${rounds}: outbox ${perRound.outbox.at(-1)}/s, plain loop ${perRound.plain.at(-1)}/s, ${concurrency} loops ${perRound.parallel.at(-1)}/s`,
      );
    }
    const medians = { outbox: median(perRound.outbox), plain: median(perRound.plain), parallel: median(perRound.parallel) };
    const perRoundRatios = perRound.outbox.map((value, i) => round(value / perRound.plain[i], 3));
    const ratio = round(median(perRoundRatios), 3);
    const parallelRatios = perRound.outbox.map((value, i) => round(value / perRound.parallel[i], 3));
    const p50 = percentile(latencies, 50);
    const p99 = percentile(latencies, 99);
    const raw = { count, concurrency, perRound, medians, perRoundRatios, enqueueMs: { p50, p99, max: Math.max(...latencies), samples: latencies.length } };
    return [
      {
        id: 'outbox',
        figure: '4. Release delivery: SQLite outbox vs a plain pushRelease() loop',
        measured: `${fmt(medians.outbox)} releases/s`,
        baseline: `${fmt(medians.plain)} releases/s plain loop`,
        ratio,
        target: '≥ 0.5',
        met: ratio >= 0.5,
        raw,
      },
      {
        id: 'outbox-vs-parallel',
        figure: `4. Reference: outbox vs ${concurrency} parallel pushRelease() loops`,
        measured: `${fmt(medians.outbox)} releases/s`,
        baseline: `${fmt(medians.parallel)} releases/s, ${concurrency} loops`,
        ratio: round(median(parallelRatios), 3),
        target: 'reference',
        met: null,
        raw: { perRoundRatios: parallelRatios },
      },
      {
        id: 'outbox-enqueue',
        figure: '4. Release delivery: `await outbox.enqueue()` latency',
        measured: `p50 ${fmt(p50, 2)} ms, p99 ${fmt(p99, 2)} ms`,
        baseline: '—',
        ratio: null,
        target: 'report',
        met: null,
        raw: raw.enqueueMs,
      },
    ];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

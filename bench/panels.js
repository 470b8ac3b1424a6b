// Figure 8: many panels by host. The guard's work per call with 10,000 panels cached vs the
// single-panel guard (called directly, as in figure 1b), and heap per cached panel (the mother
// emulator runs in its own process, so only the guard's memory is counted).

import v8 from 'node:v8';
import vm from 'node:vm';
import { licenseGuard } from 'panel-license-guard';
import { registerMetrics } from 'panel-license-guard/metrics';
import { Registry } from 'prom-client';
import { createCheckSpreader } from '../dist/guard/panels/check-spreader.js';
import { hostedPanels, hostOf, PANELS } from './app.js';
import { startChild } from './child.js';
import { fmt, median, round } from './stats.js';

const CALLS = 1_000_000;

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc');

/** Heap in use once garbage is collected, finalizers included (fetch's signals go by them). */
async function heapAfterGc() {
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  gc();
  return process.memoryUsage().heapUsed;
}

/** Nanoseconds per call, cycling through `reqs` (one per host), each on a fresh `res.locals`. */
function nsPerCall(middleware, reqs) {
  let calls = 0;
  const next = () => {
    calls++;
  };
  const start = process.hrtime.bigint();
  for (let i = 0; i < CALLS; i++) middleware(reqs[i % reqs.length], { locals: Object.create(null) }, next);
  const ns = Number(process.hrtime.bigint() - start) / CALLS;
  if (calls !== CALLS) throw new Error('a middleware did not call next() synchronously: a panel was not cached');
  return ns;
}

/**
 * The busiest second of one check interval: 10,000 panels scheduled at once, their due times
 * read back (no timers run), against the even spread (count / interval seconds).
 */
function busiestSecond(count, intervalMs) {
  const spreader = createCheckSpreader({ intervalMs, now: Date.now, count: () => count, run: () => {} });
  const perSecond = new Map();
  for (let i = 0; i < count; i++) {
    const key = `bench-panel-${i}`;
    spreader.scheduleRegular(key);
    const second = spreader.nextAt(key);
    perSecond.set(second, (perSecond.get(second) ?? 0) + 1);
  }
  spreader.close();
  return { busiest: Math.max(...perSecond.values()), even: count / (intervalMs / 1000) };
}

/**
 * Times `registry.metrics()` for the guard: every collect runs in one turn (nothing in it waits
 * on I/O), so its duration is how long the event loop is held.
 */
async function scrapeTimes(guard, rounds) {
  const registry = new Registry();
  const { unregister } = registerMetrics({ registry, guard });
  const ms = [];
  let bytes = 0;
  try {
    // One scrape first, as every figure warms up: the first compiles prom-client's paths.
    await registry.metrics();
    for (let r = 0; r < Math.max(5, rounds); r++) {
      const start = performance.now();
      bytes = (await registry.metrics()).length;
      ms.push(performance.now() - start);
    }
  } finally {
    unregister();
  }
  return { ms, bytes };
}

const requestFor = (host) => ({ url: '/', originalUrl: '/', method: 'GET', headers: { host }, hostname: host });

export async function measurePanels({ count, rounds, log }) {
  const emulator = await startChild({ role: 'emulator', hosted: count });
  const baseUrl = emulator.info.url;
  // As the README shows it: each panel's credentials and your id of it (res.locals.panel).
  const byHost = new Map(hostedPanels(count).map(({ apiKey, apiSecret }, i) => [hostOf(i), { apiKey, apiSecret, panel: `tenant-${i}` }]));
  const { apiKey, apiSecret } = PANELS.active;
  const single = licenseGuard({ baseUrl, apiKey, apiSecret, schedule: '0 0 1 1 *', jitterMs: 0 });
  // The bench's own request objects exist before the count starts: they are not the guard's heap.
  const reqs = [...byHost.keys()].map(requestFor);
  if (reqs.length !== count) throw new Error('bench: hosts missing');
  if ((await single.start()) !== 'active') throw new Error('the single-panel bench guard is not active');
  const before = await heapAfterGc();
  // 10,000 new hosts at once (more than a restart sees): above the default bound on first resolver calls.
  const many = licenseGuard({ baseUrl, panels: { resolve: (host) => byHost.get(host) ?? null, max: count, resolveBurst: count, resolveConcurrency: count } });
  try {
    log(`  panels: ${count} panels; first requests (one license check each)…`);
    for (let i = 0; i < reqs.length; i += 100)
      await Promise.all(
        reqs.slice(i, i + 100).map((req) => new Promise((resolve) => many(req, { locals: {}, setHeader() {}, status() {}, end: resolve }, resolve))),
      );
    const perPanelBytes = ((await heapAfterGc()) - before) / count;
    const singleReqs = [requestFor(hostOf(0))];
    const manyNs = [];
    const singleNs = [];
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? ['many', 'single'] : ['single', 'many'];
      for (const name of order) (name === 'many' ? manyNs : singleNs).push(name === 'many' ? nsPerCall(many, reqs) : nsPerCall(single, singleReqs));
      log(`    round ${r + 1}/${rounds}: ${count} panels ${fmt(manyNs.at(-1), 1)} ns, single panel ${fmt(singleNs.at(-1), 1)} ns per call`);
    }
    const ratio = median(manyNs.map((ns, i) => ns / singleNs[i]));
    const scrape = await scrapeTimes(many, rounds);
    log(
      `    one scrape of the ${count}-panel guard: median ${fmt(median(scrape.ms), 1)} ms, longest ${fmt(Math.max(...scrape.ms), 1)} ms, ${fmt(scrape.bytes)} bytes`,
    );
    const spread = busiestSecond(count, 300_000);
    return [
      {
        id: 'panels-handler',
        figure: `8. Many panels: the guard's work per call with ${fmt(count)} panels cached vs the single-panel guard`,
        measured: `${fmt(median(manyNs), 1)} ns`,
        baseline: `${fmt(median(singleNs), 1)} ns single panel`,
        ratio: round(ratio, 3),
        target: 'report',
        met: null,
        raw: { calls: CALLS, manyNs, singleNs },
      },
      {
        id: 'panels-checks',
        figure: `8. Many panels: mother checks in the busiest second, ${fmt(count)} panels on a 5-minute interval`,
        measured: `${spread.busiest} checks`,
        baseline: `${fmt(spread.even, 1)} even spread`,
        ratio: round(spread.busiest / spread.even, 3),
        target: '≤ 2 (the cap)',
        met: spread.busiest / spread.even <= 2,
        raw: spread,
      },
      {
        id: 'panels-scrape',
        figure: `8. Many panels: one metrics scrape of a guard with ${fmt(count)} panels (panelSeries 100), time the event loop is held`,
        measured: `${fmt(Math.max(...scrape.ms), 1)} ms longest`,
        baseline: `${fmt(median(scrape.ms), 1)} ms median of ${scrape.ms.length}`,
        ratio: null,
        target: '≤ 20 ms',
        met: Math.max(...scrape.ms) <= 20,
        raw: scrape,
      },
      {
        id: 'panels-heap',
        figure: '8. Many panels: heap per cached panel',
        measured: `${fmt(perPanelBytes / 1024, 2)} KiB per panel`,
        baseline: `${fmt(count)} panels`,
        ratio: null,
        target: '≤ 2 KiB',
        met: perPanelBytes <= 2048,
        raw: { perPanelBytes, count },
      },
    ];
  } finally {
    await many.close();
    await single.close();
    await emulator.close();
  }
}

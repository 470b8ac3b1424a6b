// Figure 1b: the guard's own work per request, called directly (no HTTP), against a no-op middleware.
import { licenseGuard } from 'panel-license-guard';
import { redisLicenseStore } from 'panel-license-guard/redis';
import { createClient } from 'redis';
import { PANELS } from './app.js';
import { fmt, median, round } from './stats.js';

const CALLS = 1_000_000;

/** Nanoseconds per call of `middleware` on a fresh `res.locals`, as Express would give it. */
function nsPerCall(middleware) {
  let calls = 0;
  const next = () => {
    calls++;
  };
  const req = { url: '/', originalUrl: '/', method: 'GET', headers: {} };
  const start = process.hrtime.bigint();
  for (let i = 0; i < CALLS; i++) middleware(req, { locals: Object.create(null) }, next);
  const ns = Number(process.hrtime.bigint() - start) / CALLS;
  if (calls !== CALLS) throw new Error('a middleware did not call next()');
  return ns;
}

/**
 * HTTP throughput ratios swing by a few per cent between identical servers on this machine; the
 * guard's own work is far below that, and this figure shows how far: its cost per call beyond a
 * no-op middleware, as a share of the server CPU time one bare request takes (figure 1).
 */
export async function measureHandlerCost({ baseUrl, redisUrl, bareCpuMicros, rounds, log }) {
  const { apiKey, apiSecret } = PANELS.active;
  const guard = licenseGuard({ baseUrl, apiKey, apiSecret, schedule: '0 0 1 1 *', jitterMs: 0 });
  try {
    if ((await guard.start()) !== 'active') throw new Error('the bench guard is not active');
    const clusterRow = redisUrl ? await measureClusterHandler({ baseUrl, redisUrl, guard, rounds, log }) : [];
    const noop = (_req, _res, next) => next();
    const guardNs = [];
    const noopNs = [];
    for (let r = 0; r < rounds; r++) {
      // Alternate who goes first, so drift hits both.
      if (r % 2 === 0) {
        guardNs.push(nsPerCall(guard));
        noopNs.push(nsPerCall(noop));
      } else {
        noopNs.push(nsPerCall(noop));
        guardNs.push(nsPerCall(guard));
      }
      log(`    round ${r + 1}/${rounds}: guard ${fmt(guardNs.at(-1), 1)} ns, no-op ${fmt(noopNs.at(-1), 1)} ns`);
    }
    const ownNs = median(guardNs) - median(noopNs);
    const share = ownNs / (bareCpuMicros * 1000);
    return [
      {
        id: 'handler-cost',
        figure: "1. Handler cost: the guard's own work per request vs a bare request's server CPU",
        measured: `${fmt(ownNs, 1)} ns (${fmt(median(guardNs), 1)} ns guard − ${fmt(median(noopNs), 1)} ns no-op)`,
        baseline: `${fmt(bareCpuMicros, 1)} µs bare request`,
        ratio: round(share, 5),
        target: '≤ 0.01',
        met: share <= 0.01,
        raw: { calls: CALLS, guardNs, noopNs },
      },
      ...clusterRow,
    ];
  } finally {
    await guard.close();
  }
}

/** The same call, in cluster mode on a Redis store vs the single-process guard: the request path must not change. */
async function measureClusterHandler({ baseUrl, redisUrl, guard, rounds, log }) {
  const { apiKey, apiSecret } = PANELS.active;
  const client = createClient({ url: redisUrl });
  client.on('error', () => {});
  await client.connect();
  const store = redisLicenseStore({ client, prefix: `bench-handler-${process.pid}:` });
  const clustered = licenseGuard({ baseUrl, apiKey, apiSecret, schedule: '0 0 1 1 *', jitterMs: 0, store });
  try {
    if ((await clustered.start()) !== 'active') throw new Error('the cluster-mode bench guard is not active');
    const clusterNs = [];
    const singleNs = [];
    for (let r = 0; r < rounds; r++) {
      const pair = r % 2 === 0 ? [clustered, guard] : [guard, clustered];
      for (const middleware of pair) (middleware === guard ? singleNs : clusterNs).push(nsPerCall(middleware));
      log(`    round ${r + 1}/${rounds}: cluster mode ${fmt(clusterNs.at(-1), 1)} ns, single-process ${fmt(singleNs.at(-1), 1)} ns`);
    }
    const ratio = median(clusterNs.map((ns, i) => ns / singleNs[i]));
    return [
      {
        id: 'handler-cost-redis',
        figure: '1. Handler cost: cluster mode (Redis store) vs single-process guard, per call',
        measured: `${fmt(median(clusterNs), 1)} ns`,
        baseline: `${fmt(median(singleNs), 1)} ns single-process`,
        ratio: round(ratio, 3),
        target: '≤ 1.05',
        met: ratio <= 1.05,
        raw: { calls: CALLS, clusterNs, singleNs },
      },
    ];
  } finally {
    await clustered.close();
    await client.close();
  }
}

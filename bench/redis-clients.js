// Figure 6b: cluster mode on ioredis vs on node-redis. Two parts: the cost of one store call (the
// check-slot and verdict reads a refresh makes: wall time and this process's CPU per call, the
// two clients back to back in every round), and the request path under load (req/s and the
// server's CPU per request), where neither client is touched: a request reads the in-process cache.
import { Redis as IORedis } from 'ioredis';
import { redisLicenseStore } from 'panel-license-guard/redis';
import { createClient } from 'redis';
import { closeAll, startChild } from './child.js';
import { compareVariants } from './load.js';
import { fmt, median, rotations, round } from './stats.js';

const CLIENTS = {
  'node-redis': async (url) => {
    const client = createClient({ url });
    client.on('error', () => {});
    await client.connect();
    return { client, close: () => client.close() };
  },
  ioredis: async (url) => {
    const client = new IORedis(url, { lazyConnect: true });
    client.on('error', () => {});
    await client.connect();
    return { client, close: () => client.quit() };
  },
};

/** `calls` store calls one after another (a read of the verdict, then a check-slot claim): µs of wall time and of CPU per call. */
async function storeCalls(store, key, calls) {
  const cpuBefore = process.cpuUsage();
  const before = performance.now();
  for (let i = 0; i < calls / 2; i++) {
    await store.get(`${key}:verdict`, 64 * 1024);
    await store.acquire(`${key}:slot`, 'bench-instance', 60_000, 1024);
  }
  const cpu = process.cpuUsage(cpuBefore);
  return { wallMicros: ((performance.now() - before) * 1000) / calls, cpuMicros: (cpu.user + cpu.system) / calls };
}

async function measureStoreCalls({ redisUrl, rounds, calls, log }) {
  const opened = {};
  try {
    for (const [name, open] of Object.entries(CLIENTS)) {
      const { client, close } = await open(redisUrl);
      opened[name] = { store: redisLicenseStore({ client, prefix: `bench-clients-${process.pid}-${name}:` }), close };
      await opened[name].store.publish('warm:verdict', JSON.stringify({ warm: true }), 60_000);
      await storeCalls(opened[name].store, 'warm', calls); // JIT and the connection at full speed first
    }
    const perRound = { 'node-redis': [], ioredis: [] };
    for (const [index, order] of rotations(Object.keys(CLIENTS), rounds).entries()) {
      for (const name of order) perRound[name].push(await storeCalls(opened[name].store, 'warm', calls));
      log(`    store calls, round ${index + 1}/${rounds}: ${order.map((name) => `${name} ${fmt(perRound[name].at(-1).wallMicros, 1)} µs`).join(', ')}`);
    }
    const ratio = (field) => round(median(perRound.ioredis.map((value, i) => value[field] / perRound['node-redis'][i][field])), 3);
    const med = (name, field) => median(perRound[name].map((value) => value[field]));
    return {
      id: 'redis-clients-store-call',
      figure: '6b. Cluster mode, one store call (verdict read or check-slot claim): ioredis vs node-redis',
      measured: `${fmt(med('ioredis', 'wallMicros'), 1)} µs per call (${fmt(med('ioredis', 'cpuMicros'), 1)} µs CPU) on ioredis`,
      baseline: `${fmt(med('node-redis', 'wallMicros'), 1)} µs per call (${fmt(med('node-redis', 'cpuMicros'), 1)} µs CPU) on node-redis`,
      ratio: ratio('wallMicros'),
      target: 'report',
      met: null,
      raw: { calls, perRound, cpuRatio: ratio('cpuMicros') },
    };
  } finally {
    for (const { close } of Object.values(opened)) await close();
  }
}

export async function measureRedisClients({ baseUrl, redisUrl, rounds, seconds, warmupSeconds, connections, calls, log }) {
  log(`  store calls: ${rounds} rounds x ${calls} calls per client, one after another`);
  const storeRow = await measureStoreCalls({ redisUrl, rounds, calls, log });
  const servers = {};
  try {
    for (const variant of ['guard-redis', 'guard-ioredis']) servers[variant] = await startChild({ role: 'server', variant, baseUrl, redisUrl });
    log(`  request path: ${rounds} rounds x ${seconds} s per client, ${connections} connections`);
    const run = await compareVariants(servers, { rounds, seconds, warmupSeconds, connections, log });
    const perRound = run.perRound['guard-ioredis'].map((value, i) => value / run.perRound['guard-redis'][i]);
    const cpuShare = run.cpuPerRound['guard-ioredis'].map((value, i) => value / run.cpuPerRound['guard-redis'][i]);
    const ratio = round(median(perRound), 3);
    const pathRow = {
      id: 'redis-clients-request-path',
      figure: '6b. Cluster mode, request path under load: ioredis vs node-redis',
      measured: `${fmt(run.medians['guard-ioredis'])} req/s (${fmt(run.cpuMedians['guard-ioredis'], 1)} µs CPU/req) on ioredis`,
      baseline: `${fmt(run.medians['guard-redis'])} req/s (${fmt(run.cpuMedians['guard-redis'], 1)} µs CPU/req) on node-redis`,
      ratio,
      target: '≈ 1 (0.97–1.03)',
      met: ratio >= 0.97 && ratio <= 1.03,
      raw: { perRound: run.perRound, cpuPerRound: run.cpuPerRound, cpuRatio: round(median(cpuShare), 3) },
    };
    return [storeRow, pathRow];
  } finally {
    await closeAll(Object.values(servers));
  }
}

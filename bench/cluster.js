// Cluster mode across real processes: license checks per schedule slot, and lock propagation p50/p99.
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { median, percentile, round } from './stats.js';

const INSTANCE = fileURLToPath(new URL('./cluster-instance.js', import.meta.url));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Forks `count` panel instances sharing one Redis prefix; resolves once each serves HTTP.
 * Each handle records the license calls its process made (`checks`, local ms) and can be asked
 * to refresh or for its status.
 */
export async function startInstances({ count, baseUrl, apiKey, apiSecret, redisUrl, store, schedule, prefix = `cluster-${randomBytes(4).toString('hex')}:` }) {
  const config = { baseUrl, apiKey, apiSecret, redisUrl, store, schedule, prefix };
  const instances = [];
  for (let i = 0; i < count; i++) instances.push(startInstance(config, i));
  return Promise.all(instances);
}

function startInstance(config, index) {
  const child = fork(INSTANCE, [], { env: { ...process.env, CLUSTER_INSTANCE: JSON.stringify(config) }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const handle = { index, child, checks: [], port: 0, waiting: new Map() };
  child.on('message', (message) => {
    if (message.type === 'check') handle.checks.push(message.at);
    handle.waiting.get(message.type)?.(message);
    handle.waiting.delete(message.type);
  });
  const reply = (type) => new Promise((resolve) => handle.waiting.set(type, resolve));
  handle.refresh = () => {
    const answer = reply('refreshed');
    child.send({ type: 'refresh' });
    return answer.then((message) => message.state);
  };
  handle.status = () => {
    const answer = reply('status');
    child.send({ type: 'status' });
    return answer.then((message) => message.status);
  };
  handle.page = async () => (await fetch(`http://127.0.0.1:${handle.port}/`)).status;
  handle.kill = () => child.kill('SIGKILL');
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`cluster instance ${index} exited (${code}) before it was ready`)));
    reply('ready').then((message) => {
      handle.port = message.port;
      child.removeAllListeners('exit');
      resolve(handle);
    });
  });
}

export function stopInstances(instances) {
  for (const instance of instances) if (instance.child.exitCode === null && instance.child.signalCode === null) instance.child.kill('SIGKILL');
}

/** Waits until every instance serves `status` on `/`, polling every 5 ms; resolves with the time it took. */
export async function timeUntilAll(instances, status, timeoutMs = 5000) {
  const started = performance.now();
  for (;;) {
    const statuses = await Promise.all(instances.map((instance) => instance.page()));
    if (statuses.every((s) => s === status)) return performance.now() - started;
    if (performance.now() - started > timeoutMs) throw new Error(`instances still answer ${statuses.join(', ')} after ${timeoutMs} ms`);
    await sleep(5);
  }
}

/**
 * Flips the mother's answer `flips` times; after each flip one instance (in turn) refreshes, and
 * the time until all instances serve the new state on HTTP is one propagation sample.
 */
export async function measurePropagation({ emulator, instances, apiKey, flips }) {
  const samples = [];
  for (let i = 0; i < flips; i++) {
    const lock = i % 2 === 0;
    emulator.setPanel(apiKey, { active: !lock, reason: lock ? 'Suspended for the benchmark' : null });
    const state = await instances[i % instances.length].refresh();
    if (state !== (lock ? 'locked' : 'active')) throw new Error(`bench: the refreshing instance is ${state}`);
    samples.push(await timeUntilAll(instances, lock ? 503 : 200));
  }
  return {
    p50: round(median(samples), 1),
    p99: round(percentile(samples, 99), 1),
    max: round(Math.max(...samples), 1),
    samples: samples.map((s) => round(s, 1)),
  };
}

/** License calls per schedule slot over `seconds` of an every-second schedule, all instances together. */
export async function measureChecksPerSlot({ instances, seconds }) {
  const before = instances.reduce((sum, instance) => sum + instance.checks.length, 0);
  const started = Date.now();
  await sleep(seconds * 1000);
  const slots = Math.floor((Date.now() - started) / 1000);
  const calls = instances.reduce((sum, instance) => sum + instance.checks.length, 0) - before;
  return { calls, slots, perSlot: round(calls / slots, 2) };
}

const CLUSTER_PANEL = { apiKey: 'bench-cluster', apiSecret: 'bench-cluster-secret', active: true, panel: { name: 'Cluster Records' } };

/** Figure 6: four processes in cluster mode on one Redis: checks per slot, lock propagation p50/p99. */
export async function measureCluster({ redisUrl, flips, slotSeconds, log }) {
  const { createMotherEmulator } = await import('panel-license-guard/testing');
  const emulator = await createMotherEmulator({ panels: [CLUSTER_PANEL] });
  const common = { count: 4, baseUrl: emulator.url, apiKey: CLUSTER_PANEL.apiKey, apiSecret: CLUSTER_PANEL.apiSecret, redisUrl };
  let instances = [];
  try {
    instances = await startInstances({ ...common, schedule: '* * * * * *' });
    const slots = await measureChecksPerSlot({ instances, seconds: slotSeconds });
    log(`  checks: ${slots.calls} license calls in ${slots.slots} one-second slots from 4 processes`);
    stopInstances(instances);
    instances = await startInstances({ ...common, schedule: '0 0 1 1 *' });
    const propagation = await measurePropagation({ emulator, instances, apiKey: CLUSTER_PANEL.apiKey, flips });
    log(`  propagation over ${flips} flips: p50 ${propagation.p50} ms, p99 ${propagation.p99} ms, max ${propagation.max} ms`);
    return [
      {
        id: 'cluster-checks-per-slot',
        figure: '6. Cluster mode: license checks per schedule slot, 4 processes',
        measured: `${slots.calls} checks in ${slots.slots} slots`,
        baseline: '4 per slot without a store',
        ratio: slots.perSlot,
        target: '1 (±1 slot at the window edges)',
        met: Math.abs(slots.calls - slots.slots) <= 1,
        raw: slots,
      },
      {
        id: 'cluster-propagation',
        figure: '6. Cluster mode: lock propagation to all 4 processes (HTTP, after one refresh)',
        measured: `p50 ${propagation.p50} ms, p99 ${propagation.p99} ms`,
        baseline: '1 s target',
        ratio: round(propagation.p99 / 1000, 3),
        target: 'p99 < 1 s (ratio to 1 s < 1)',
        met: propagation.p99 < 1000,
        raw: propagation,
      },
    ];
  } finally {
    stopInstances(instances);
    await emulator.close();
  }
}

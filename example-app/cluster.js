// Cluster mode of the example: several node:cluster workers share one license verdict on Redis.
import cluster from 'node:cluster';
import { createServer } from 'node:http';
import { availableParallelism } from 'node:os';
import { redisLicenseStore } from 'panel-license-guard/redis';
import { sqliteOutboxStore } from 'panel-license-guard/sqlite';
import { createClient } from 'redis';
import { createPanelApp } from './app.js';

/** `REDIS_URL` set, or `npm start -- --cluster` (then Redis on 127.0.0.1:6379). */
export const clusterRequested = () => Boolean(process.env.REDIS_URL) || process.argv.includes('--cluster');
const redisUrl = () => process.env.REDIS_URL || 'redis://127.0.0.1:6379';

/**
 * Primary: forks `WORKERS` workers (default: one per CPU, at least 2) that all listen on `port`,
 * and resolves once each has its first verdict. Workers that die are replaced.
 */
export async function startClusterPrimary({ config, port, outboxFile }) {
  const count = Math.max(2, Number(process.env.WORKERS ?? availableParallelism()));
  cluster.setupPrimary({ args: process.argv.slice(2) });
  // The outbox file is created (schema, WAL mode) once here: workers opening a new file at the
  // same moment could otherwise race on creating it ("database is locked").
  if (outboxFile && outboxFile !== ':memory:') sqliteOutboxStore({ file: outboxFile }).close();
  const env = { PANEL_WORKER_CONFIG: JSON.stringify({ ...config, port, outboxFile, redisUrl: redisUrl() }) };
  const states = [];
  const ready = Array.from({ length: count }, () => {
    const worker = cluster.fork(env);
    return new Promise((resolve, reject) => {
      worker.once('message', (message) => resolve(states.push(`${worker.process.pid}: ${message.state}`)));
      worker.once('exit', (code) => reject(new Error(`worker ${worker.process.pid} exited (${code}) before it was ready; is Redis running at ${redisUrl()}?`)));
    });
  });
  await Promise.all(ready);
  cluster.on('exit', (worker, code, signal) => {
    if (signal === 'SIGINT' || signal === 'SIGTERM' || code === 0) return;
    console.log(`[cluster] worker ${worker.process.pid} died (${signal ?? code}); starting another`);
    cluster.fork(env);
  });
  return { count, states, redisUrl: redisUrl(), stop: () => Promise.all(Object.values(cluster.workers ?? {}).map(stopWorker)) };
}

function stopWorker(worker) {
  return new Promise((resolve) => {
    if (!worker || worker.isDead()) return resolve();
    worker.once('exit', resolve);
    worker.kill('SIGTERM');
  });
}

/** Worker: the same panel app, its guard on the shared Redis store, serving the shared port. */
export async function runClusterWorker() {
  const { port, redisUrl: url, outboxFile, ...config } = JSON.parse(process.env.PANEL_WORKER_CONFIG);
  const redis = createClient({ url });
  redis.on('error', () => {});
  // Not awaited: with Redis down, connect() retries for ever; the guard works meanwhile.
  redis.connect().catch(() => {});
  const panel = createPanelApp({ ...config, outboxFile, store: redisLicenseStore({ client: redis }) });
  const tag = `[worker ${process.pid}]`;
  panel.guard.on('lock', ({ reason }) => console.log(`${tag} locked: ${reason}`));
  panel.guard.on('unlock', () => console.log(`${tag} unlocked`));
  panel.guard.on('error', (error) => console.log(`${tag} ${error.code ?? 'error'}: ${error.message}`));
  const server = createServer(panel.app);
  await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve));
  const stop = async () => {
    server.close();
    await panel.close();
    await redis.close().catch(() => {});
    process.exit(0);
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  process.send?.({ state: await panel.start() });
}

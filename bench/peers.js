// The job queues of figure 11, each set up as its documentation suggests for "deliver this POST,
// never lose it", each sending with the same client call to the same mother. They are installed
// in bench/peers/ (`npm run bench` does it), never dependencies of the package.
import { createRequire } from 'node:module';
import { createMotherClient } from 'panel-license-guard';
import { PANELS } from './app.js';
import { makeRelease } from './outbox.js';

const fromPeers = createRequire(new URL('./peers/package.json', import.meta.url));
/** The peer's module, or undefined when bench/peers is not installed. */
async function load(name) {
  try {
    return await import(fromPeers.resolve(name));
  } catch {
    return undefined;
  }
}

/** A promise that resolves once `done()` has been called `count` times. */
function countdown(count) {
  let left = count;
  let resolve;
  const finished = new Promise((r) => {
    resolve = r;
  });
  return {
    done() {
      if (--left === 0) resolve();
    },
    finished,
  };
}

/** Runs `work(item)` over `items`, at most `limit` at once. */
async function pooled(items, limit, work) {
  let next = 0;
  const lane = async () => {
    while (next < items.length) await work(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
}

/**
 * pg-boss: a queue with NOTIFY, a worker fetching 8 jobs per statement (its batch; completing
 * them in one), at most `concurrency` of them pushed at once, fetching again at once while
 * batches come back full.
 */
async function pgBossSystem(client, databaseUrl, schemaBase) {
  const mod = await load('pg-boss');
  if (!mod) return undefined;
  const PgBoss = mod.PgBoss ?? mod.default;
  let runs = 0;
  return async ({ concurrency, count, label }, timed) => {
    const boss = new PgBoss({ connectionString: databaseUrl, schema: `${schemaBase}_boss_${++runs}`, max: 10 });
    boss.on('error', () => {});
    await boss.start();
    const queue = 'releases';
    await boss.createQueue(queue, { notify: true });
    const all = countdown(count);
    try {
      return await timed({
        enqueue: (i) => boss.send(queue, makeRelease(label, i)),
        start: () =>
          boss.work(queue, { batchSize: 8, burstWhenBatchFull: true, pollingIntervalSeconds: 0.5 }, (jobs) =>
            pooled(jobs, concurrency, async (job) => {
              await client.pushRelease(job.data);
              all.done();
            }),
          ),
        drained: () => all.finished,
      });
    } finally {
      await boss.stop({ graceful: false, wait: true, close: true }).catch(() => {});
      await dropSchema(databaseUrl, `${schemaBase}_boss_${runs}`);
    }
  };
}

/** graphile-worker: a task list of one task, `concurrency` jobs at once, LISTEN/NOTIFY for new jobs. */
async function graphileSystem(client, databaseUrl, schemaBase) {
  const gw = await load('graphile-worker');
  if (!gw) return undefined;
  let runs = 0;
  return async ({ concurrency, count, label }, timed) => {
    const schema = `${schemaBase}_gw_${++runs}`;
    const all = countdown(count);
    const utils = await gw.makeWorkerUtils({ connectionString: databaseUrl, schema });
    await utils.migrate();
    let runner;
    const silent = new gw.Logger(() => () => {});
    try {
      return await timed({
        enqueue: (i) => utils.addJob('push', makeRelease(label, i)),
        start: () => {
          runner = gw.run({
            connectionString: databaseUrl,
            schema,
            concurrency,
            noHandleSignals: true,
            logger: silent,
            taskList: {
              push: async (payload) => {
                await client.pushRelease(payload);
                all.done();
              },
            },
          });
        },
        drained: () => all.finished,
      });
    } finally {
      await (await runner)?.stop().catch(() => {});
      await utils.release();
      await dropSchema(databaseUrl, schema);
    }
  };
}

/** BullMQ: a Queue and a Worker of `concurrency` on Redis (no persistence configured here). */
async function bullmqSystem(client, redisUrl, prefixBase) {
  const bull = await load('bullmq');
  if (!bull || !redisUrl) return undefined;
  const { hostname, port } = new URL(redisUrl);
  const connection = { host: hostname, port: Number(port || 6379), maxRetriesPerRequest: null };
  let runs = 0;
  return async ({ concurrency, count, label }, timed) => {
    const prefix = `${prefixBase}-${++runs}`;
    const queue = new bull.Queue('releases', { connection, prefix });
    const all = countdown(count);
    let worker;
    try {
      return await timed({
        enqueue: (i) => queue.add('push', makeRelease(label, i)),
        start: () => {
          worker = new bull.Worker('releases', async (job) => client.pushRelease(job.data), { connection, prefix, concurrency });
          worker.on('completed', () => all.done());
        },
        drained: () => all.finished,
      });
    } finally {
      await worker?.close();
      await queue.obliterate({ force: true }).catch(() => {});
      await queue.close();
    }
  };
}

async function dropSchema(databaseUrl, schema) {
  const { default: pg } = await import('pg');
  const admin = new pg.Client({ connectionString: databaseUrl });
  await admin.connect();
  try {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await admin.end();
  }
}

/** The peers that are installed and whose service answers, as `name → run(settings, timed)`. */
export async function peerSystems({ emulator, databaseUrl, redisUrl }) {
  const { apiKey, apiSecret } = PANELS.active;
  const client = createMotherClient({ baseUrl: emulator.info.url, apiKey, apiSecret });
  const base = `bench_peer_${process.pid}`;
  const systems = {
    ...(databaseUrl ? { 'pg-boss': await pgBossSystem(client, databaseUrl, base) } : {}),
    ...(databaseUrl ? { 'graphile-worker': await graphileSystem(client, databaseUrl, base) } : {}),
    bullmq: await bullmqSystem(client, redisUrl, base),
  };
  return Object.fromEntries(Object.entries(systems).filter(([, run]) => run !== undefined));
}

import { createMotherClient, createReleaseOutbox } from 'panel-license-guard';
import { postgresOutboxStore } from 'panel-license-guard/postgres';
import pg from 'pg';
import { PANELS } from './app.js';
import { startChild } from './child.js';
import { makeRelease } from './outbox.js';

const emulator = await startChild({ role: 'emulator' });
const pool = new pg.Pool({ connectionString: 'postgres://postgres@127.0.0.1:5432/test', max: 8 });
const { apiKey, apiSecret } = PANELS.active;
const client = createMotherClient({ baseUrl: emulator.info.url, apiKey, apiSecret });
for (const round of [1, 2]) {
  const store = postgresOutboxStore({ pool, schema: 'prof', table: `t_${Date.now()}` });
  await store.migrate();
  const calls = { claimDue: [0, 0], settle: [0, 0] };
  const wrap = (name) => {
    const f = store[name].bind(store);
    store[name] = async (...a) => {
      const t = performance.now();
      try {
        return await f(...a);
      } finally {
        calls[name][0]++;
        calls[name][1] += performance.now() - t;
      }
    };
  };
  wrap('claimDue');
  wrap('settle');
  const outbox = createReleaseOutbox({ client, store, concurrency: 4 });
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: 4 }, async (_, k) => {
      for (let i = k; i < 500; i += 4) await outbox.enqueue(makeRelease(`p${round}`, i));
    }),
  );
  const t1 = performance.now();
  await outbox.drain();
  const t2 = performance.now();
  console.log({
    enqueueMs: t1 - t0,
    totalMs: t2 - t0,
    calls: Object.fromEntries(Object.entries(calls).map(([k, [n, ms]]) => [k, { n, avgMs: (ms / n).toFixed(2) }])),
  });
  await outbox.close();
}
await pool.query('DROP SCHEMA prof CASCADE');
await pool.end();
await emulator.close();

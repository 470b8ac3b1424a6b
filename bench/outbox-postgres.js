// Figure 7: the PostgreSQL outbox — delivery rate vs a plain pushRelease() loop, enqueue latency
// with and without the caller's transaction, and retention over a 100,000-row history.
import { createMotherClient } from 'panel-license-guard';
import { postgresOutboxStore } from 'panel-license-guard/postgres';
import pg from 'pg';
import { PANELS } from './app.js';
import { loadCreateReleaseOutbox, makeRelease, outboxRun, plainRun } from './outbox.js';
import { fmt, median, percentile, rotations, round } from './stats.js';

const DAY = 24 * 60 * 60_000;
const silent = { warn: () => {}, error: () => {} };

/** One enqueue after another, each timed; `inTransaction` wraps each in BEGIN, a row of the panel's own, COMMIT. */
async function enqueueLatencies(createReleaseOutbox, client, pool, { schema, table, count, inTransaction }) {
  const store = postgresOutboxStore({ pool, schema, table });
  await store.migrate();
  await pool.query(`CREATE TABLE IF NOT EXISTS "${schema}".tracks (id TEXT PRIMARY KEY)`);
  const outbox = createReleaseOutbox({ client, store, autoStart: false, logger: silent });
  const latencies = [];
  const db = inTransaction ? await pool.connect() : undefined;
  try {
    for (let i = 0; i < count; i++) {
      const release = makeRelease(table, i);
      if (!db) {
        const before = performance.now();
        await outbox.enqueue(release);
        latencies.push(performance.now() - before);
        continue;
      }
      await db.query('BEGIN');
      await db.query(`INSERT INTO "${schema}".tracks (id) VALUES ($1)`, [release.remote_track_id]);
      const before = performance.now();
      await outbox.enqueue(release, { transaction: db });
      latencies.push(performance.now() - before);
      await db.query('COMMIT');
    }
  } finally {
    db?.release();
    await outbox.close();
  }
  return latencies;
}

/** 20,000 tracks delivered five times each, 40 days ago: a pass may delete 80,000 rows. */
async function seedHistory(pool, schema, table) {
  await postgresOutboxStore({ pool, schema, table }).migrate();
  const at = Date.now() - 40 * DAY;
  await pool.query(
    `INSERT INTO "${schema}"."${table}" (remote_track_id, body, content_hash, state, attempts, next_attempt_at, release_id, delivered_seq, delivered_at, created_at, updated_at)
     SELECT 'old-' || (i % 20000), '{"release":{"title":"Old"}}', md5(i::text), 'delivered', 1, $1, i + 1, i / 20000 + 1, $1, $1, $1
     FROM generate_series(0, 99999) AS i`,
    [at],
  );
}

/** Enqueue latencies while `busy` is pending (or for `count` enqueues when it is not given). */
async function enqueuesDuring(outbox, label, { busy, count }) {
  const latencies = [];
  let done = false;
  busy?.finally(() => {
    done = true;
  });
  for (let i = 0; busy ? !done : i < count; i++) {
    const before = performance.now();
    await outbox.enqueue(makeRelease(label, i));
    latencies.push(performance.now() - before);
  }
  return latencies;
}

async function retentionFigures(createReleaseOutbox, client, pool, schema, rounds) {
  const perRound = [];
  for (let r = 0; r < rounds; r++) {
    const table = `history_${r}`;
    await seedHistory(pool, schema, table);
    const outbox = createReleaseOutbox({ client, store: postgresOutboxStore({ pool, schema, table }), autoStart: false, logger: silent });
    try {
      const idle = await enqueuesDuring(outbox, `idle-${r}`, { count: 300 });
      const started = performance.now();
      const pass = outbox.prune();
      const during = await enqueuesDuring(outbox, `busy-${r}`, { busy: pass });
      const deleted = await pass;
      if (deleted !== 80_000) throw new Error(`bench: the retention pass deleted ${deleted}, expected 80000`);
      perRound.push({ seconds: (performance.now() - started) / 1000, idleP99: percentile(idle, 99), duringP99: percentile(during, 99), during: during.length });
    } finally {
      await outbox.close();
    }
  }
  return perRound;
}

export async function measurePostgresOutbox({ emulator, databaseUrl, rounds, count, concurrency, log }) {
  const createReleaseOutbox = await loadCreateReleaseOutbox();
  const { apiKey, apiSecret } = PANELS.active;
  const client = createMotherClient({ baseUrl: emulator.info.url, apiKey, apiSecret });
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 8 });
  const schema = `bench_outbox_${process.pid}`;
  log(`  PostgreSQL outbox: ${rounds} rounds x ${count} releases, ${concurrency} pushes at once, schema ${schema}`);
  const perRound = { outbox: [], plain: [] };
  try {
    let tables = 0;
    const variants = {
      outbox: (run) =>
        outboxRun(createReleaseOutbox, client, { where: { store: postgresOutboxStore({ pool, schema, table: `q_${++tables}` }) }, run, count, concurrency }),
      plain: (run) => plainRun(client, { run, count, concurrency: 1 }),
    };
    // Warm-up: both paths reach full speed (JIT, sockets, prepared statements) before the rounds.
    for (let i = 0; i < 2; i++) {
      await variants.outbox(`pg-warmup-outbox-${i}`);
      await variants.plain(`pg-warmup-plain-${i}`);
    }
    for (const [index, order] of rotations(Object.keys(variants), rounds).entries()) {
      for (const name of order) {
        await emulator.request('reset');
        perRound[name].push(Math.round((await variants[name](`pg-r${index}-${name}`)).rate));
      }
      log(`    round ${index + 1}/${rounds}: PostgreSQL outbox ${perRound.outbox.at(-1)}/s, plain loop ${perRound.plain.at(-1)}/s`);
    }
    const ratios = perRound.outbox.map((value, i) => round(value / perRound.plain[i], 3));
    const plainEnqueue = await enqueueLatencies(createReleaseOutbox, client, pool, { schema, table: 'latency_plain', count: 500, inTransaction: false });
    const txEnqueue = await enqueueLatencies(createReleaseOutbox, client, pool, { schema, table: 'latency_tx', count: 500, inTransaction: true });
    log('    retention: 3 passes over a 100,000-row history');
    const retention = await retentionFigures(createReleaseOutbox, client, pool, schema, 3);
    const latency = (values) => ({ p50: round(percentile(values, 50), 2), p99: round(percentile(values, 99), 2) });
    const [plainMs, txMs] = [latency(plainEnqueue), latency(txEnqueue)];
    const pruneRatio = round(median(retention.map((r) => r.duringP99 / r.idleP99)), 3);
    return [
      {
        id: 'outbox-postgres',
        figure: '7. Release delivery: PostgreSQL outbox vs a plain pushRelease() loop',
        measured: `${fmt(median(perRound.outbox))} releases/s`,
        baseline: `${fmt(median(perRound.plain))} releases/s plain loop`,
        ratio: round(median(ratios), 3),
        target: '≥ 0.5',
        met: median(ratios) >= 0.5,
        raw: { count, concurrency, perRound, perRoundRatios: ratios },
      },
      {
        id: 'outbox-postgres-enqueue',
        figure: '7. PostgreSQL `enqueue()` latency: in the caller’s transaction vs on its own',
        measured: `p50 ${fmt(txMs.p50, 2)} ms, p99 ${fmt(txMs.p99, 2)} ms in a transaction`,
        baseline: `p50 ${fmt(plainMs.p50, 2)} ms, p99 ${fmt(plainMs.p99, 2)} ms alone`,
        ratio: round(percentile(txEnqueue, 50) / percentile(plainEnqueue, 50), 3),
        target: 'report',
        met: null,
        raw: { alone: plainMs, inTransaction: txMs, samples: plainEnqueue.length },
      },
      {
        id: 'outbox-postgres-retention',
        figure: '7. Retention: enqueue p99 while pruning 100,000 delivered rows vs idle',
        measured: `p99 ${fmt(median(retention.map((r) => r.duringP99)), 2)} ms during a ${fmt(median(retention.map((r) => r.seconds)), 2)} s pass`,
        baseline: `p99 ${fmt(median(retention.map((r) => r.idleP99)), 2)} ms idle`,
        ratio: pruneRatio,
        target: 'report',
        met: null,
        raw: { passes: retention },
      },
    ];
  } finally {
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
    await pool.end();
  }
}

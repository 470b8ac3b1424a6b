// Figure 12: the three durable stores in one run — MySQL/MariaDB next to PostgreSQL and SQLite:
// delivery rate as a ratio to the plain pushRelease() loop (same method as figures 4 and 7), and
// enqueue p50/p99 on its own and inside the caller's transaction.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import { createMotherClient } from 'panel-license-guard';
import { mysqlOutboxStore } from 'panel-license-guard/mysql';
import { postgresOutboxStore } from 'panel-license-guard/postgres';
import pg from 'pg';
import { PANELS } from './app.js';
import { loadCreateReleaseOutbox, makeRelease, outboxRun, plainRun } from './outbox.js';
import { fmt, median, percentile, rotations, round } from './stats.js';

const silent = { warn: () => {}, error: () => {} };
const LATENCY_SAMPLES = 500;
const NAMES = { sqlite: 'SQLite', postgres: 'PostgreSQL', mysql: 'MySQL/MariaDB' };

/** Each database store's way to open the caller's transaction, write its own row, and end it. */
const CALLER = {
  postgres: {
    open: (pool) => pool.connect(),
    begin: (db) => db.query('BEGIN'),
    own: (db, table, id) => db.query(`INSERT INTO ${table} (id) VALUES ($1)`, [id]),
    commit: (db) => db.query('COMMIT'),
    close: (db) => db.release(),
  },
  mysql: {
    open: (pool) => pool.getConnection(),
    begin: (db) => db.beginTransaction(),
    own: (db, table, id) => db.query(`INSERT INTO ${table} (id) VALUES (?)`, [id]),
    commit: (db) => db.commit(),
    close: (db) => db.release(),
  },
};

/** `LATENCY_SAMPLES` enqueues one after another, each timed; with `caller`, each inside BEGIN, a row of the panel's own, COMMIT. */
async function enqueueLatencies(createReleaseOutbox, client, { where, label, caller, pool, ownTable }) {
  await where.store?.migrate();
  const outbox = createReleaseOutbox({ client, ...where, autoStart: false, logger: silent });
  const db = caller ? await caller.open(pool) : undefined;
  const latencies = [];
  try {
    for (let i = 0; i < LATENCY_SAMPLES; i++) {
      const release = makeRelease(label, i);
      if (db) await caller.begin(db);
      if (db) await caller.own(db, ownTable, release.remote_track_id);
      const before = performance.now();
      await outbox.enqueue(release, db ? { transaction: db } : undefined);
      latencies.push(performance.now() - before);
      if (db) await caller.commit(db);
    }
  } finally {
    if (db) caller.close(db);
    await outbox.close();
  }
  return { p50: round(percentile(latencies, 50), 2), p99: round(percentile(latencies, 99), 2) };
}

export async function measureOutboxStores({ emulator, databaseUrl, mysqlUrl, rounds, count, concurrency, log }) {
  const createReleaseOutbox = await loadCreateReleaseOutbox();
  const { apiKey, apiSecret } = PANELS.active;
  const client = createMotherClient({ baseUrl: emulator.info.url, apiKey, apiSecret });
  const dir = mkdtempSync(join(tmpdir(), 'plg-bench-stores-'));
  const tag = `bench_stores_${process.pid}`;
  const pgPool = databaseUrl && new pg.Pool({ connectionString: databaseUrl, max: 8 });
  const mysqlPool = mysqlUrl && mysql.createPool({ uri: mysqlUrl, connectionLimit: 8 });
  let tables = 0;
  // Where each outbox keeps its rows: a fresh SQLite file or table per run.
  const places = {
    sqlite: () => ({ file: join(dir, `q_${++tables}.db`) }),
    ...(pgPool && { postgres: () => ({ store: postgresOutboxStore({ pool: pgPool, schema: tag, table: `q_${++tables}` }) }) }),
    ...(mysqlPool && { mysql: () => ({ store: mysqlOutboxStore({ pool: mysqlPool, table: `${tag}_${++tables}` }) }) }),
  };
  log(`  the stores side by side: ${Object.keys(places).join(', ')}; ${rounds} rounds x ${count} releases, ${concurrency} pushes at once`);
  try {
    const variants = {
      ...Object.fromEntries(
        Object.entries(places).map(([name, where]) => [name, (run) => outboxRun(createReleaseOutbox, client, { where: where(), run, count, concurrency })]),
      ),
      plain: (run) => plainRun(client, { run, count, concurrency: 1 }),
    };
    for (const [name, variant] of Object.entries(variants)) await variant(`stores-warmup-${name}`);
    const perRound = Object.fromEntries(Object.keys(variants).map((name) => [name, []]));
    for (const [index, order] of rotations(Object.keys(variants), rounds).entries()) {
      for (const name of order) {
        await emulator.request('reset');
        perRound[name].push(Math.round((await variants[name](`stores-r${index}-${name}`)).rate));
      }
      log(
        `    round ${index + 1}/${rounds}: ${Object.keys(variants)
          .map((name) => `${name} ${perRound[name].at(-1)}/s`)
          .join(', ')}`,
      );
    }
    const ratioOf = (name) => round(median(perRound[name].map((value, i) => value / perRound.plain[i])), 3);
    const latency = {};
    for (const name of Object.keys(places)) {
      latency[name] = { alone: await enqueueLatencies(createReleaseOutbox, client, { where: places[name](), label: `alone-${name}` }) };
      if (name === 'sqlite') continue;
      const pool = name === 'postgres' ? pgPool : mysqlPool;
      const ownTable = name === 'postgres' ? `"${tag}".own` : `${tag}_own`;
      await pool.query(`CREATE TABLE IF NOT EXISTS ${ownTable} (id VARCHAR(100) PRIMARY KEY)`);
      latency[name].inTransaction = await enqueueLatencies(createReleaseOutbox, client, {
        where: places[name](),
        label: `tx-${name}`,
        caller: CALLER[name],
        pool,
        ownTable,
      });
    }
    return rows(perRound, ratioOf, latency, { count, concurrency });
  } finally {
    rmSync(dir, { recursive: true, force: true });
    if (pgPool) await pgPool.query(`DROP SCHEMA IF EXISTS "${tag}" CASCADE`).catch(() => {});
    if (mysqlPool) await dropMysqlTables(mysqlPool, tag);
    await pgPool?.end();
    await mysqlPool?.end();
  }
}

function rows(perRound, ratioOf, latency, settings) {
  const delivery = Object.keys(latency).map((name) => ({
    id: `outbox-stores-${name}`,
    figure: `12. Delivery on ${NAMES[name]} vs a plain pushRelease() loop (the stores in one run)`,
    measured: `${fmt(median(perRound[name]))} releases/s`,
    baseline: `${fmt(median(perRound.plain))} releases/s plain loop`,
    ratio: ratioOf(name),
    target: '≥ 0.5',
    met: ratioOf(name) >= 0.5,
    raw: { ...settings, perRound: perRound[name], plain: perRound.plain },
  }));
  const shown = ({ p50, p99 }) => `p50 ${fmt(p50, 2)} ms, p99 ${fmt(p99, 2)} ms`;
  const enqueue = Object.entries(latency).map(([name, { alone, inTransaction }]) => ({
    id: `outbox-stores-enqueue-${name}`,
    figure: `12. \`enqueue()\` on ${NAMES[name]}${inTransaction ? ': in the caller’s transaction vs on its own' : ''}`,
    measured: inTransaction ? `${shown(inTransaction)} in a transaction` : shown(alone),
    baseline: inTransaction ? `${shown(alone)} alone` : '—',
    ratio: inTransaction ? round(inTransaction.p50 / alone.p50, 3) : null,
    target: 'report',
    met: null,
    raw: { alone, inTransaction, samples: LATENCY_SAMPLES },
  }));
  return [...delivery, ...enqueue];
}

async function dropMysqlTables(pool, tag) {
  const [found] = await pool.query('SELECT table_name AS name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE ?', [
    `${tag}%`,
  ]);
  for (const { name } of found) await pool.query(`DROP TABLE IF EXISTS \`${name}\``).catch(() => {});
}

// An enqueue in the caller's transaction, left running when that transaction ends, stores nothing
// and neither writes to, locks in nor aborts the next request's transaction on the reused pooled
// connection — also when the app's sessions run with autocommit off, or the next transaction is
// READ ONLY.
import { drizzle } from 'drizzle-orm/mysql2';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../../../../src/emulator/emulator.js';
import { createReleaseOutbox } from '../../../../src/outbox/outbox.js';
import { mysqlOutboxStore } from '../../../../src/outbox/stores/mysql/mysql-store.js';
import { postgresOutboxStore } from '../../../../src/outbox/stores/postgres/postgres-store.js';
import { clientFor, sleep, startEmulator } from '../../../support/helpers.js';
import { DATABASE_URL, MYSQL_URL, mysqlAnswers, postgresAnswers, serviceAvailable } from '../../../support/services.js';

const haveMysql = serviceAvailable('MySQL/MariaDB', MYSQL_URL, await mysqlAnswers());
const havePostgres = serviceAvailable('PostgreSQL', DATABASE_URL, await postgresAnswers());
let emulator: MotherEmulator;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(() => emulator.close());

describe.skipIf(!haveMysql)('a MySQL caller connection with autocommit = 0', () => {
  it('stores nothing of a rolled-back transaction when the app pool runs with autocommit = 0', async () => {
    const table = `test_sessions_ac0_${process.pid}`;
    const storePool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 4 });
    // The app's own pool: autocommit off on every session (a common setting of apps that manage
    // their transactions by hand), one connection so the next request reuses it.
    const appPool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 1 });
    appPool.pool.on('connection', (connection) => {
      connection.query('SET autocommit = 0');
    });
    const store = mysqlOutboxStore({ pool: storePool, table });
    await store.migrate();
    const outbox = createReleaseOutbox({ client: clientFor(emulator), store, pollIntervalMs: 50 });
    const outcomes: string[] = [];
    try {
      await appPool.query(`CREATE TABLE IF NOT EXISTS ${table}_own (id INT AUTO_INCREMENT PRIMARY KEY, title TEXT)`);
      await appPool.query('COMMIT');
      for (let run = 0; run < 4; run++) {
        const connection = await appPool.getConnection();
        await connection.beginTransaction();
        await connection.query(`INSERT INTO ${table}_own (title) VALUES ('rolled back ${run}')`);
        // Not awaited; the upload fails and the app rolls back.
        void outbox.enqueue({ title: `AC0 rolled back ${run}`, remote_track_id: `ac0-${run}` }, { transaction: connection }).then(
          (r) => outcomes.push(`resolved ${r.id}`),
          (e: Error) => outcomes.push(`rejected ${e.message.slice(0, 60)}`),
        );
        await connection.rollback();
        connection.release();
        await sleep(20);
        // The next request on the same connection: a transaction of its own, committed.
        const other = await appPool.getConnection();
        await other.beginTransaction();
        await other.query('SELECT 1');
        await other.commit();
        other.release();
      }
      await sleep(800);
      const stored = (await outbox.list()).map((row) => row.release.title);
      const own = (await appPool.query(`SELECT title FROM ${table}_own`))[0] as { title: string }[];
      const sent = emulator.releases.filter((r) => String(r.release.title).startsWith('AC0 rolled back')).map((r) => r.release.title);
      expect(own).toEqual([]);
      expect({ stored, sent }).toEqual({ stored: [], sent: [] });
    } finally {
      await outbox.close();
      await appPool.query(`DROP TABLE IF EXISTS ${table}_own`).catch(() => {});
      await storePool.query(`DROP TABLE IF EXISTS ${table}, ${table}_tracks, ${table}_migrations, ${table}_controls`);
      await Promise.all([storePool.end(), appPool.end()]);
    }
  });
});

describe.skipIf(!haveMysql)('Drizzle on a MySQL pool with autocommit = 0', () => {
  it('stores nothing of a rolled-back Drizzle transaction when the pool runs with autocommit = 0', async () => {
    const table = `test_sessions_ac0d_${process.pid}`;
    const storePool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 4 });
    const appPool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 1 });
    appPool.pool.on('connection', (connection) => {
      connection.query('SET autocommit = 0');
    });
    const db = drizzle(appPool);
    const store = mysqlOutboxStore({ pool: storePool, table });
    await store.migrate();
    const outbox = createReleaseOutbox({ client: clientFor(emulator), store, pollIntervalMs: 50 });
    const outcomes: string[] = [];
    try {
      for (let run = 0; run < 4; run++) {
        await db
          .transaction(async (tx) => {
            void outbox.enqueue({ title: `AC0D rolled back ${run}`, remote_track_id: `ac0d-${run}` }, { transaction: tx }).then(
              (r) => outcomes.push(`resolved ${r.id}`),
              (e: Error) => outcomes.push(`rejected ${e.message.slice(0, 60)}`),
            );
            throw new Error('the upload failed');
          })
          .catch(() => {});
        await sleep(20);
        // The next request: a Drizzle transaction of its own, committed.
        await db.transaction(async (tx) => {
          await tx.execute('SELECT 1' as never);
        });
      }
      await sleep(800);
      const stored = (await outbox.list()).map((row) => row.release.title);
      const sent = emulator.releases.filter((r) => String(r.release.title).startsWith('AC0D rolled back')).map((r) => r.release.title);
      expect({ stored, sent }).toEqual({ stored: [], sent: [] });
    } finally {
      await outbox.close();
      await storePool.query(`DROP TABLE IF EXISTS ${table}, ${table}_tracks, ${table}_migrations, ${table}_controls`);
      await Promise.all([storePool.end(), appPool.end()]);
    }
  });
});

describe.skipIf(!havePostgres)('a late write on PostgreSQL, the next request READ ONLY', () => {
  it('leaves a READ ONLY next transaction on the reused client whole (timing, as the abandoned-enqueue test)', async () => {
    const schema = `test_sessions_rot_${process.pid}`;
    const storePool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
    const appPool = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
    const store = postgresOutboxStore({ pool: storePool, schema });
    await store.migrate();
    const outbox = createReleaseOutbox({ client: clientFor(emulator), store, pollIntervalMs: 10_000 });
    const pause = (run: number) => [Promise.resolve(), new Promise(setImmediate), sleep(1), sleep(2)][run % 4];
    const failedRequests: string[] = [];
    const RUNS = 24;
    try {
      for (let run = 0; run < RUNS; run++) {
        // Each track has a pending row already (another upload): the enqueue reads, then replaces it.
        for (const n of [1, 2, 3]) await outbox.enqueue({ title: `RO first ${run}.${n}`, remote_track_id: `rot-${run}-${n}` });
        const client = await appPool.connect();
        await client.query('BEGIN');
        for (const n of [1, 2, 3])
          void outbox.enqueue({ title: `RO ${run}.${n}`, remote_track_id: `rot-${run}-${n}` }, { transaction: client }).catch(() => {});
        await pause(run);
        await client.query('ROLLBACK');
        client.release();
        // The next request: a read-only transaction (a report page) on the same client.
        const other = await appPool.connect();
        try {
          await other.query('BEGIN READ ONLY');
          await other.query('SELECT 1');
          await sleep(5);
          await other.query('SELECT 2');
          await other.query('COMMIT');
        } catch (error) {
          failedRequests.push(`run ${run}: ${(error as Error).message}`);
          await other.query('ROLLBACK');
        } finally {
          other.release();
        }
      }
      await sleep(300);
      expect((await outbox.list()).filter((row) => !String(row.release.title).startsWith('RO first'))).toEqual([]);
      expect(failedRequests).toEqual([]);
    } finally {
      await outbox.close();
      await storePool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await Promise.all([storePool.end(), appPool.end()]);
    }
  });
});

describe.skipIf(!haveMysql)('late statements of a rolled-back enqueue on MySQL', () => {
  it("takes no lock and writes nothing in the next request's transaction on the reused connection", async () => {
    const table = `test_sessions_lock_${process.pid}`;
    const storePool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 4 });
    const appPool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 1 });
    // The app's sessions at READ COMMITTED, as the store asks of a transaction it enqueues in.
    appPool.pool.on('connection', (connection) => {
      connection.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
    });
    const store = mysqlOutboxStore({ pool: storePool, table });
    await store.migrate();
    const outbox = createReleaseOutbox({ client: clientFor(emulator), store, pollIntervalMs: 10_000 });
    try {
      const connection = await appPool.getConnection();
      await connection.beginTransaction();
      // The app's ROLLBACK and its next request's START TRANSACTION reach the connection right
      // after the enqueue's marker was written (the race the docs describe, pinned to one ordering).
      let raced = false;
      const late = async (sent: Promise<unknown>, sql: unknown) => {
        const answer = await sent;
        if (!raced && typeof sql === 'string' && /^INSERT INTO \S+_tracks`? \(panel, remote_track_id\) VALUES \(\?, \?\)$/.test(sql)) {
          raced = true;
          await connection.query('ROLLBACK');
          await connection.query('START TRANSACTION');
        }
        return answer;
      };
      const racing = {
        query: (sql: string, values?: unknown[]) => late(connection.query(sql, values), sql),
        execute: (sql: string, values?: unknown[]) => late(connection.execute(sql, values as never), sql),
      };
      const answer = await outbox.enqueue({ title: 'Late lock', remote_track_id: 'late-lock' }, { transaction: racing }).then(
        () => 'resolved',
        (e: Error) => `rejected: ${e.message}`,
      );
      expect({ answer, raced }).toEqual({ answer: expect.stringMatching(/^rejected: /), raced: true });
      // The next request's transaction is open (it has not touched the outbox at all). Another
      // host enqueues the same track now: it must not wait for that unrelated transaction.
      const started = Date.now();
      const other = outbox.enqueue({ title: 'Other host', remote_track_id: 'late-lock' }).then(() => Date.now() - started);
      await sleep(1500);
      await connection.query('COMMIT');
      connection.release();
      const waited = await other;
      const [tracks] = await storePool.query(`SELECT panel, remote_track_id FROM ${table}_tracks`);
      expect((tracks as { panel: string }[]).filter((row) => row.panel === 'panel-license-guard:enqueue-marker')).toEqual([]);
      expect(waited).toBeLessThan(500);
    } finally {
      await outbox.close();
      await storePool.query(`DROP TABLE IF EXISTS ${table}, ${table}_tracks, ${table}_migrations, ${table}_controls`);
      await Promise.all([storePool.end(), appPool.end()]);
    }
  });
});

describe.skipIf(!haveMysql)('Kysely on MySQL, an enqueue not awaited, the callback throwing', () => {
  it('leaves no marker row behind in <table>_tracks (docs: only a Knex COMMIT can)', async () => {
    const { Kysely, MysqlDialect } = await import('kysely');
    const mysqlCallback = (await import('mysql2')).default;
    const table = `test_sessions_kym_${process.pid}`;
    const storePool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 4 });
    // biome-ignore lint/suspicious/noExplicitAny: untyped test tables
    const db = new Kysely<any>({ dialect: new MysqlDialect({ pool: mysqlCallback.createPool({ uri: MYSQL_URL, connectionLimit: 1 }) }) });
    const store = mysqlOutboxStore({ pool: storePool, table });
    await store.migrate();
    const outbox = createReleaseOutbox({ client: clientFor(emulator), store, pollIntervalMs: 50 });
    const outcomes: string[] = [];
    try {
      for (let run = 0; run < 24; run++) {
        await db
          .transaction()
          .setIsolationLevel('read committed')
          .execute(async (trx) => {
            void outbox.enqueue({ title: `KYM ${run}`, remote_track_id: `kym-${run}` }, { transaction: trx }).then(
              () => outcomes.push('resolved'),
              (e: Error) => outcomes.push(`rejected ${e.constructor.name}`),
            );
            await [undefined, new Promise(setImmediate), sleep(1), sleep(2)][run % 4];
            throw new Error('the upload failed');
          })
          .catch(() => {});
      }
      await sleep(500);
      const [markers] = await storePool.query(`SELECT COUNT(*) AS n FROM ${table}_tracks WHERE panel = 'panel-license-guard:enqueue-marker'`);
      const left = Number((markers as { n: number }[])[0]?.n);
      expect(await outbox.list()).toEqual([]);
      expect(left).toBe(0);
    } finally {
      await outbox.close();
      await db.destroy();
      await storePool.query(`DROP TABLE IF EXISTS ${table}, ${table}_tracks, ${table}_migrations, ${table}_controls`);
      await storePool.end();
    }
  });
});

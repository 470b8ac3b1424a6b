import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../../../../src/emulator/emulator.js';
import { mysqlOutboxStore } from '../../../../src/mysql.js';
import { createReleaseOutbox } from '../../../../src/outbox/outbox.js';
import type { ClaimedRow } from '../../../../src/outbox/store.js';
import { checkServerVersion } from '../../../../src/outbox/stores/mysql/mysql-schema.js';
import { clientFor, sleep, startEmulator, waitFor } from '../../../support/helpers.js';
import { MYSQL_URL, mysqlAnswers, serviceAvailable } from '../../../support/services.js';

// The MySQL/MariaDB store against a real server: the transactional outbox, several "hosts"
// (pools) on one table, the database's clock, migrations, privileges and connection trouble.
// The row rules are in the shared contract suite (outbox-store.test.ts).
const haveMysql = serviceAvailable('MySQL/MariaDB', MYSQL_URL, await mysqlAnswers());
const pools: mysql.Pool[] = [];
const newPool = (options: { uri?: string; charset?: string } = {}) => {
  const pool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 6, ...options });
  pools.push(pool);
  return pool;
};
const PREFIX = `test_outbox_my_${process.pid}`;
/** A user without privileges, named for this run (dropped at the end). */
const NOPRIVS = `noprivs_${process.pid}`;
let emulator: MotherEmulator;
let admin: mysql.Pool;
let tables = 0;
const freshTable = () => `${PREFIX}_${++tables}`;

beforeAll(async () => {
  emulator = await startEmulator();
  if (haveMysql) admin = newPool();
});
afterAll(async () => {
  await emulator.close();
  if (!haveMysql) return;
  for (let i = 1; i <= tables; i++) {
    const table = `${PREFIX}_${i}`;
    await admin.query(`DROP TABLE IF EXISTS ${table}, ${table}_tracks, ${table}_migrations, ${table}_controls, own_${table}`);
  }
  await admin.query(`DROP USER IF EXISTS '${NOPRIVS}'@'%', '${NOPRIVS}'@'localhost', '${NOPRIVS}'@'127.0.0.1'`);
  await Promise.all(pools.map((pool) => pool.end()));
});

const release = (title: string, remote_track_id?: string) => ({ title, primary_artist: 'Ada', ...(remote_track_id === undefined ? {} : { remote_track_id }) });
const delivered = (title: string) => emulator.releases.filter((r) => r.release.title === title);
const newRow = (body: string, remoteTrackId?: string) => ({ panel: 'panel-a', remoteTrackId, body, contentHash: `h:${body}` });

describe.skipIf(!haveMysql)('mysqlOutboxStore()', () => {
  describe('with the caller’s transaction', () => {
    it('delivers what was committed, and never sends or shows what was rolled back', async () => {
      const pool = newPool();
      const table = freshTable();
      const store = mysqlOutboxStore({ pool, table });
      await store.migrate();
      const outbox = createReleaseOutbox({ client: clientFor(emulator), store, pollIntervalMs: 50 });
      // The panel's own table, in the same database.
      await pool.query(`CREATE TABLE own_${table} (title VARCHAR(100) PRIMARY KEY) ENGINE=InnoDB`);
      const db = await pool.getConnection();
      try {
        await db.beginTransaction();
        await db.query(`INSERT INTO own_${table} VALUES ('Kept')`);
        await outbox.enqueue(release('Kept', 'kept'), { transaction: db });
        // Not visible to anyone before the commit.
        expect((await outbox.stats()).pending).toBe(0);
        await db.commit();

        await db.beginTransaction();
        await db.query(`INSERT INTO own_${table} VALUES ('Dropped')`);
        await outbox.enqueue(release('Dropped', 'dropped'), { transaction: db });
        await db.rollback();

        // The caller's own constraint fails after the enqueue: the caller rolls the whole transaction back.
        await db.beginTransaction();
        await outbox.enqueue(release('Duplicate title'), { transaction: db });
        await expect(db.query(`INSERT INTO own_${table} VALUES ('Kept')`)).rejects.toThrow(/Duplicate entry/);
        await db.rollback();
      } finally {
        db.release();
      }
      await waitFor(() => delivered('Kept').length === 1, 'the committed release delivered', 5000);
      await sleep(300);
      expect(delivered('Dropped')).toEqual([]);
      expect(delivered('Duplicate title')).toEqual([]);
      expect((await outbox.list()).map((row) => row.release.title)).toEqual(['Kept']);
      await outbox.close();
    });

    it('refuses a connection outside a transaction or before migrate(), leaving the transaction usable, and takes turns on one connection', async () => {
      const pool = newPool();
      const store = mysqlOutboxStore({ pool, table: freshTable() });
      const outbox = createReleaseOutbox({ client: clientFor(emulator), store, autoStart: false });
      const db = await pool.getConnection();
      try {
        await db.beginTransaction();
        await expect(outbox.enqueue(release('Early'), { transaction: db })).rejects.toThrow(/call `await store.migrate\(\)` at start-up/);
        expect(await db.query('SELECT 1 AS one').then(([rows]) => rows)).toEqual([{ one: 1 }]);
        await db.rollback();
        await store.migrate();
        await expect(outbox.enqueue(release('Loose'), { transaction: db })).rejects.toThrow(
          /no open transaction: call `await connection.beginTransaction\(\)`/,
        );
        expect(await outbox.list()).toEqual([]);
        // REPEATABLE READ (MySQL's default) is accepted: the store reads the track under its lock with locking reads.
        await db.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
        await db.beginTransaction();
        await Promise.all([1, 2, 3].map((v) => outbox.enqueue(release(`v${v}`, 'one-track'), { transaction: db })));
        await db.commit();
        expect((await outbox.list({ state: 'pending' })).map((entry) => entry.release.title)).toEqual(['v3']);
      } finally {
        db.release();
      }
      await outbox.close();
    });

    it('says so when a deadlock rolled back the caller’s whole transaction, rather than letting it go on', async () => {
      const table = freshTable();
      const store = mysqlOutboxStore({ pool: newPool(), table });
      await store.migrate();
      const callers = newPool();
      const [one, two] = [await callers.getConnection(), await callers.getConnection()];
      try {
        for (const db of [one, two]) {
          await db.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
          await db.beginTransaction();
        }
        // Two transactions take two tracks' locks in opposite orders: InnoDB picks a victim and
        // rolls back all of its transaction, not just the store's savepoint.
        await store.enqueue(newRow('{"x":1}', 'x'), 1000, { transaction: one });
        await store.enqueue(newRow('{"y":1}', 'y'), 1000, { transaction: two });
        const outcome = (promise: unknown) =>
          Promise.resolve(promise).then(
            () => 'ok',
            (error: Error) => error.message,
          );
        const first = outcome(store.enqueue(newRow('{"y":2}', 'y'), 1001, { transaction: one }));
        await sleep(200);
        const second = outcome(store.enqueue(newRow('{"x":2}', 'x'), 1001, { transaction: two }));
        const outcomes = await Promise.all([first, second]);
        expect(outcomes.filter((text) => text === 'ok')).toHaveLength(1);
        expect(outcomes.find((text) => text !== 'ok')).toMatch(
          /could not be stored in your transaction \(.*Deadlock.*rolled all of your transaction back.*run the whole transaction again/,
        );
      } finally {
        for (const db of [one, two]) {
          await db.rollback().catch(() => {});
          db.release();
        }
      }
    });

    it("sees a release another host committed after the caller's REPEATABLE READ snapshot began", async () => {
      const table = freshTable();
      const [mine, theirs] = [mysqlOutboxStore({ pool: newPool(), table }), mysqlOutboxStore({ pool: newPool(), table })];
      await mine.migrate();
      const db = await (pools.at(-2) as mysql.Pool).getConnection();
      try {
        await db.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
        await db.beginTransaction();
        await db.query(`SELECT COUNT(*) FROM ${table}`); // the snapshot starts here
        await theirs.enqueue(newRow('{"v":1}', 't'), 1000);
        // Same content as what the other host queued: folded into its row, not a second one.
        expect(await mine.enqueue(newRow('{"v":1}', 't'), 1001, { transaction: db })).toMatchObject({ deduplicated: 'replaced-pending' });
        await db.commit();
      } finally {
        db.release();
      }
      expect(await mine.list({ state: 'pending', limit: 10 })).toHaveLength(1);
    });
  });

  describe('shared by several hosts', () => {
    it('never leases one row to two hosts', async () => {
      const table = freshTable();
      const [one, two] = [mysqlOutboxStore({ pool: newPool(), table }), mysqlOutboxStore({ pool: newPool(), table })];
      for (let i = 0; i < 200; i++) await one.enqueue(newRow(`{"n":${i}}`), 1000);
      const claimed = await Promise.all(
        [one, two, one, two].map(async (store, i) => {
          const ids: number[] = [];
          for (;;) {
            const batch = await store.claimDue({ panel: 'panel-a', owner: `host-${i}`, limit: 7, nowMs: 2000, leaseMs: 60_000 });
            if (batch.length === 0) return ids;
            ids.push(...batch.map((row) => row.id));
          }
        }),
      );
      expect(claimed.flat().length).toBe(200);
      expect(new Set(claimed.flat()).size).toBe(200);
    });

    it('keeps one pending row per track when two hosts enqueue it at once', async () => {
      const table = freshTable();
      const hosts = [mysqlOutboxStore({ pool: newPool(), table }), mysqlOutboxStore({ pool: newPool(), table })];
      await hosts[0]?.migrate();
      await Promise.all(Array.from({ length: 40 }, (_, i) => (hosts[i % 2] as (typeof hosts)[number]).enqueue(newRow(`{"v":${i}}`, 'track-1'), 1000 + i)));
      expect(await hosts[0]?.list({ state: 'pending', limit: 100 })).toHaveLength(1);
    });
  });

  describe("with hosts whose clocks disagree, on the database's clock", () => {
    it('never lets a host running 10 minutes ahead take a lease over early, and takes due times from the database', async () => {
      const table = freshTable();
      const [slow, fast] = [mysqlOutboxStore({ pool: newPool(), table }), mysqlOutboxStore({ pool: newPool(), table })];
      const tenMinutes = 10 * 60_000;
      await fast.enqueue(newRow('{}', 'ahead'), Date.now() + tenMinutes);
      // Queued by the host ahead: due at once for the host whose clock is right.
      const [claimed] = await slow.claimDue({ panel: 'panel-a', owner: 'slow', limit: 1, nowMs: Date.now(), leaseMs: 400 });
      expect(claimed?.remoteTrackId).toBe('ahead');
      expect(await fast.claimDue({ panel: 'panel-a', owner: 'fast', limit: 1, nowMs: Date.now() + tenMinutes, leaseMs: 400 })).toEqual([]);
      await sleep(500);
      const [again] = await fast.claimDue({ panel: 'panel-a', owner: 'fast', limit: 1, nowMs: Date.now() + tenMinutes, leaseMs: 60_000 });
      expect(again?.id).toBe(claimed?.id);
      // Retried in 300 ms: not earlier for the host ahead, not 10 minutes later for one behind.
      const now = Date.now() + tenMinutes;
      await fast.settle(again as ClaimedRow, 'fast', { kind: 'retry', nextAttemptAt: now + 300, error: 'HTTP 503' }, now);
      expect(await fast.claimDue({ panel: 'panel-a', owner: 'fast', limit: 5, nowMs: Date.now() + tenMinutes, leaseMs: 60_000 })).toEqual([]);
      await sleep(400);
      expect(await slow.claimDue({ panel: 'panel-a', owner: 'behind', limit: 5, nowMs: Date.now() - tenMinutes, leaseMs: 60_000 })).toHaveLength(1);
    });
  });

  describe('migrations', () => {
    it('run once however many stores start together, and refuse a table of a newer version', async () => {
      const table = freshTable();
      await Promise.all(Array.from({ length: 4 }, () => mysqlOutboxStore({ pool: newPool(), table }).migrate()));
      const [versions] = await admin.query(`SELECT version FROM ${table}_migrations ORDER BY version`);
      expect(versions).toEqual([{ version: 1 }, { version: 2 }, { version: 3 }]);
      await admin.query(`INSERT INTO ${table}_migrations VALUES (99, 0)`);
      await expect(mysqlOutboxStore({ pool: newPool(), table }).migrate()).rejects.toThrow(/holds outbox schema v99, written by a newer version/);
    });

    it('refuse servers without SKIP LOCKED, by name', () => {
      expect(() => checkServerVersion('5.7.44-log')).toThrow(/needs MySQL 8\.0\.17 or later, or MariaDB 10\.6 or later .*this server is 5\.7\.44/);
      expect(() => checkServerVersion('10.5.23-MariaDB-1')).toThrow(/MariaDB 10\.6 or later/);
      expect(() => checkServerVersion('8.0.16')).toThrow(/MySQL 8\.0\.17 or later/);
      for (const fine of ['8.0.17', '8.0.36', '8.4.0', '10.6.16-MariaDB', '10.11.19-MariaDB-0+deb12u1', '11.4.2-MariaDB'])
        expect(() => checkServerVersion(fine)).not.toThrow();
    });
  });

  describe('when something is wrong', () => {
    it('refuses a pool whose sessions run with autocommit off (its single statements would never commit)', async () => {
      const pool = newPool();
      pool.pool.on('connection', (connection) => connection.query('SET autocommit = 0'));
      await expect(mysqlOutboxStore({ pool, table: freshTable() }).migrate()).rejects.toThrow(/runs with autocommit off/);
    });

    it('refuses a pool that does not talk utf8mb4 (an emoji would become `?`: two ids could become one)', async () => {
      const pool = newPool({ charset: 'UTF8_GENERAL_CI' });
      await expect(mysqlOutboxStore({ pool, table: freshTable() }).migrate()).rejects.toThrow(/talks to the server in utf8mb3.*Use utf8mb4/);
    });

    it('says which privilege is missing, and what to grant', async () => {
      await admin.query(`DROP USER IF EXISTS '${NOPRIVS}'@'%'`);
      await admin.query(`CREATE USER '${NOPRIVS}'@'%'`);
      const url = new URL(MYSQL_URL);
      url.username = NOPRIVS;
      url.password = '';
      const weak = newPool({ uri: url.toString() });
      const table = freshTable();
      await admin.query(`GRANT SELECT ON ${url.pathname.slice(1)}.* TO '${NOPRIVS}'@'%'`);
      await expect(mysqlOutboxStore({ pool: weak, table }).enqueue(newRow('{}'), 1)).rejects.toThrow(/lacks a privilege .*GRANT CREATE, ALTER, INDEX ON/);
      // Created by the owner, granted what the docs say but DELETE: retention says so.
      await mysqlOutboxStore({ pool: admin, table }).migrate();
      for (const name of [table, `${table}_tracks`, `${table}_controls`]) await admin.query(`GRANT SELECT, INSERT, UPDATE ON ${name} TO '${NOPRIVS}'@'%'`);
      const granted = mysqlOutboxStore({ pool: weak, table });
      await granted.enqueue(newRow('{}', 't'), 1);
      await expect(granted.prune?.({ deliveredBefore: 2, deadBefore: 2, afterId: 0, limit: 10 })).resolves.toMatchObject({ deleted: 0 });
      const [[dead]] = (await admin.query(`SELECT id FROM ${table} LIMIT 1`)) as unknown as [[{ id: number }]];
      await admin.query(`UPDATE ${table} SET state = 'dead', updated_at = 1 WHERE id = ?`, [dead.id]);
      await expect(granted.prune?.({ deliveredBefore: 2, deadBefore: 2, afterId: 0, limit: 10 })).rejects.toThrow(
        /lacks a privilege .*DELETE ON each of the four tables \(DELETE for retention, and for an enqueue in your transaction/,
      );
    });

    it('rejects an enqueue it cannot make durable, and says where, what it means and what to check, never the password', async () => {
      const dead = mysql.createPool({ uri: 'mysql://root:db-sekret@127.0.0.1:1/test', connectTimeout: 500 });
      pools.push(dead);
      const store = mysqlOutboxStore({ pool: dead, table: freshTable() });
      const error = (await Promise.resolve(store.enqueue(newRow('{}'), 1)).catch((e: unknown) => e)) as { code?: string; message: string };
      expect(error.code).toBe('OUTBOX_DATABASE_UNREACHABLE');
      expect(error.message).toMatch(
        /could not reach MySQL at 127\.0\.0\.1:1\/test: .*ECONNREFUSED.*enqueue was rejected and the release is not stored.*Check that MySQL/,
      );
      expect(error.message).not.toContain('db-sekret');
      const nowhere = newPool({ uri: MYSQL_URL.replace(/\/[^/?]*(\?|$)/, '/no_such_database_xyz$1') });
      await expect(mysqlOutboxStore({ pool: nowhere, table: freshTable() }).migrate()).rejects.toMatchObject({ code: 'OUTBOX_DATABASE_MISSING' });
    });

    it('names bad options', () => {
      expect(() => mysqlOutboxStore({ pool: {} as never })).toThrow(/`pool` is not a mysql2\/promise pool/);
      expect(() => mysqlOutboxStore({ pool: admin, table: 'x; DROP TABLE y' })).toThrow(/`table` must be a lower-case SQL name/);
      expect(() => mysqlOutboxStore({ pool: admin, table: 'q_tracks' })).toThrow(/not ending in "_migrations", "_tracks" or "_controls"/);
      expect(() => mysqlOutboxStore({ pool: admin, table: 'q_controls' })).toThrow(/not ending in "_migrations", "_tracks" or "_controls"/);
      expect(() => mysqlOutboxStore({ pool: admin, database: 'Bad-Name' })).toThrow(/`database` must be a lower-case SQL name/);
      expect(() => mysqlOutboxStore({ pool: admin, leaseClock: 'host' as never })).toThrow(/`leaseClock` must be 'database' or 'outbox'/);
    });
  });
});

// An enqueue left running (not awaited) when the caller rolls back, on a pooled connection the
// app's next request then takes for a transaction of its own: nothing of it may be stored there.
import { sql as drizzleSql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/mysql2';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../../../../src/emulator/emulator.js';
import { createReleaseOutbox } from '../../../../src/outbox/outbox.js';
import { MARKER_PANEL } from '../../../../src/outbox/stores/mysql/mysql-caller-guards.js';
import { mysqlOutboxStore } from '../../../../src/outbox/stores/mysql/mysql-store.js';
import { postgresOutboxStore } from '../../../../src/outbox/stores/postgres/postgres-store.js';
import { clientFor, sleep, startEmulator } from '../../../support/helpers.js';
import { DATABASE_URL, MYSQL_URL, mysqlAnswers, postgresAnswers, serviceAvailable } from '../../../support/services.js';

const haveMysql = serviceAvailable('MySQL/MariaDB', MYSQL_URL, await mysqlAnswers());
let emulator: MotherEmulator;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(() => emulator.close());

/** How long the caller waits before it rolls back: at once, a turn, 1 ms, 2 ms. */
const pause = (run: number) => [Promise.resolve(), new Promise(setImmediate), sleep(1), sleep(2)][run % 4];

describe.skipIf(!haveMysql)('enqueue({ transaction }) on MySQL/MariaDB, not awaited, then rolled back', () => {
  it.each(['a mysql2 connection', 'Drizzle'] as const)(
    'stores nothing in the next transaction on that connection (%s), however many enqueues wait their turn on it',
    async (kind) => {
      const table = `test_abandoned_${process.pid}_${kind === 'Drizzle' ? 'drizzle' : 'raw'}`;
      const storePool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 4 });
      // The app's pool: one connection, so its next request surely reuses the one rolled back.
      const appPool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 1 });
      const store = mysqlOutboxStore({ pool: storePool, table });
      await store.migrate();
      const outbox = createReleaseOutbox({ client: clientFor(emulator), store, pollIntervalMs: 50 });
      const db = drizzle(appPool);
      const resolved: number[] = [];
      const nextRequest = async () => {
        const other = await appPool.getConnection();
        await other.beginTransaction();
        await other.query('SELECT 1');
        await sleep(5);
        await other.commit();
        other.release();
      };
      try {
        await appPool.query(`CREATE TABLE IF NOT EXISTS ${table}_own (id INT AUTO_INCREMENT PRIMARY KEY)`);
        for (let run = 0; run < 12; run++) {
          // Three enqueues on the one transaction: the second and third wait for the first's turn.
          const releases = [1, 2, 3].map((n) => ({ title: `Rolled back ${kind} ${run}.${n}`, remote_track_id: `t-${run}-${n}` }));
          const noted = (enqueue: Promise<{ id: number }>) =>
            void enqueue.then(
              ({ id }) => resolved.push(id),
              () => {},
            );
          if (kind === 'Drizzle') {
            await db
              .transaction(async (tx) => {
                for (const release of releases) noted(outbox.enqueue(release, { transaction: tx }));
                await pause(run);
                throw new Error('the upload failed');
              })
              .catch(() => {});
            await db.transaction(async (tx) => {
              await tx.execute(drizzleSql.raw(`INSERT INTO ${table}_own () VALUES ()`));
              await sleep(5);
            });
          } else {
            const connection = await appPool.getConnection();
            await connection.beginTransaction();
            for (const release of releases) noted(outbox.enqueue(release, { transaction: connection }));
            await pause(run);
            await connection.rollback();
            connection.release();
            await nextRequest();
          }
        }
        await sleep(500);
        expect(await outbox.list()).toEqual([]);
        expect(emulator.releases.filter((r) => String(r.release.title).startsWith(`Rolled back ${kind}`))).toEqual([]);
        // An enqueue whose last statement was answered before the ROLLBACK may have resolved
        // with the id of a row the ROLLBACK then took (docs/guarantees.md): on a loaded machine
        // the caller's pause can outlast a whole enqueue. None of those ids is stored.
        const stored = new Set((await outbox.list({ limit: 1000 })).map((entry) => entry.id));
        expect(resolved.filter((id) => stored.has(id))).toEqual([]);
        // No marker row is left behind either.
        const [markers] = await storePool.query(`SELECT COUNT(*) AS n FROM ${table}_tracks WHERE panel = ?`, [MARKER_PANEL]);
        expect(Number((markers as { n: number }[])[0]?.n)).toBe(0);
      } finally {
        await outbox.close();
        await appPool.query(`DROP TABLE IF EXISTS ${table}_own`);
        await storePool.query(`DROP TABLE IF EXISTS ${table}, ${table}_tracks, ${table}_migrations, ${table}_controls`);
        await Promise.all([storePool.end(), appPool.end()]);
      }
    },
  );
});

/** Rounds of three abandoned enqueues, each followed by the next request's transaction. */
const RUNS = 24;
const havePostgres = serviceAvailable('PostgreSQL', DATABASE_URL, await postgresAnswers());

describe.skipIf(!havePostgres)('enqueue({ transaction }) on PostgreSQL, not awaited, then rolled back', () => {
  it('stores nothing in the next transaction on that client, and leaves that transaction whole, however many enqueues wait their turn on it', async () => {
    const schema = `test_abandoned_${process.pid}`;
    const storePool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
    // The app's pool: one client, so its next request surely reuses the one rolled back.
    const appPool = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
    const store = postgresOutboxStore({ pool: storePool, schema });
    await store.migrate();
    const outbox = createReleaseOutbox({ client: clientFor(emulator), store, pollIntervalMs: 50 });
    const own = `"${schema}".own_rows`;
    const failedRequests: string[] = [];
    try {
      await storePool.query(`CREATE TABLE ${own} (id serial PRIMARY KEY)`);
      for (let run = 0; run < RUNS; run++) {
        const client = await appPool.connect();
        await client.query('BEGIN');
        // Not awaited. A raw client tells nothing of its transaction's end: one whose last
        // statement was on its way may still resolve with the id of a row the ROLLBACK then took
        // (docs/outbox.md); what matters here is that nothing is stored.
        for (const n of [1, 2, 3])
          void outbox.enqueue({ title: `Rolled back pg ${run}.${n}`, remote_track_id: `t-${run}-${n}` }, { transaction: client }).catch(() => {});
        await pause(run);
        await client.query('ROLLBACK');
        client.release();
        // The next request: its own transaction on the same client, writing a row of its own.
        // A late enqueue's statements that land in it must neither store anything there nor
        // abort it.
        const other = await appPool.connect();
        try {
          await other.query('BEGIN');
          await other.query(`INSERT INTO ${own} DEFAULT VALUES`);
          await sleep(5);
          await other.query(`INSERT INTO ${own} DEFAULT VALUES`);
          await other.query('COMMIT');
        } catch (error) {
          failedRequests.push(String((error as Error).message));
          await other.query('ROLLBACK');
        } finally {
          other.release();
        }
      }
      await sleep(500);
      expect(await outbox.list()).toEqual([]);
      expect(emulator.releases.filter((r) => String(r.release.title).startsWith('Rolled back pg'))).toEqual([]);
      expect(failedRequests).toEqual([]);
      expect(Number((await storePool.query(`SELECT count(*) AS n FROM ${own}`)).rows[0].n)).toBe(2 * RUNS);
    } finally {
      await outbox.close();
      await storePool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await Promise.all([storePool.end(), appPool.end()]);
    }
  });
});

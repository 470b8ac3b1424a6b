// A deadlock that InnoDB reports as 1467 (or any whole-transaction rollback) in a Kysely
// transaction: Kysely's answers carry no server status, so the store asks `@@in_transaction`
// instead, and every caller whose whole transaction was rolled back is told so.
import { Kysely, MysqlDialect, sql } from 'kysely';
import mysqlCallback from 'mysql2';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../../../../src/emulator/emulator.js';
import { createReleaseOutbox } from '../../../../src/outbox/outbox.js';
import { mysqlOutboxStore } from '../../../../src/outbox/stores/mysql/mysql-store.js';
import { clientFor, startEmulator } from '../../../support/helpers.js';
import { MYSQL_URL, mysqlAnswers, serviceAvailable } from '../../../support/services.js';

const haveMysql = serviceAvailable('MySQL/MariaDB', MYSQL_URL, await mysqlAnswers());
let emulator: MotherEmulator;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(() => emulator.close());

const CALLERS = 12;
const ROUNDS = 10;

describe.skipIf(!haveMysql)('a Kysely REPEATABLE READ transaction rolled back whole by InnoDB', () => {
  it('tells every Kysely caller whose whole transaction was rolled back so (no half transactions)', async () => {
    const table = `test_kysely_rollback_${process.pid}`;
    const storePool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 4 });
    // biome-ignore lint/suspicious/noExplicitAny: untyped test tables
    const db = new Kysely<any>({ dialect: new MysqlDialect({ pool: mysqlCallback.createPool({ uri: MYSQL_URL, connectionLimit: CALLERS }) }) });
    const store = mysqlOutboxStore({ pool: storePool, table });
    await store.migrate();
    const outbox = createReleaseOutbox({ client: clientFor(emulator), store, pollIntervalMs: 60_000 });
    const told: Record<string, number> = {};
    const misled: string[] = [];
    try {
      await storePool.query(`CREATE TABLE IF NOT EXISTS ${table}_own (id INT AUTO_INCREMENT PRIMARY KEY, title VARCHAR(100))`);
      for (let round = 0; round < ROUNDS; round++) {
        await Promise.all(
          Array.from({ length: CALLERS }, async (_, caller) => {
            const name = `r${round} c${caller}`;
            await db
              .transaction()
              .setIsolationLevel('repeatable read')
              .execute(async (trx) => {
                await trx
                  .insertInto(`${table}_own`)
                  .values({ title: `${name} before` })
                  .execute();
                try {
                  await outbox.enqueue({ title: name, remote_track_id: `t${caller}` }, { transaction: trx });
                } catch (error) {
                  const message = (error as Error).message;
                  const errno = (error as { errno?: number }).errno ?? (error as { cause?: { errno?: number } }).cause?.errno;
                  told[`${errno} ${message.slice(0, 60)}`] = (told[`${errno} ${message.slice(0, 60)}`] ?? 0) + 1;
                  if (/rolled all of your transaction back/.test(message)) throw error;
                  const { rows } = await sql<{ open: number }>`SELECT @@in_transaction AS open`.execute(trx);
                  if (Number(rows[0]?.open) === 0) misled.push(`${name}: errno ${errno}: ${message.slice(0, 80)}`);
                }
                await trx
                  .insertInto(`${table}_own`)
                  .values({ title: `${name} after` })
                  .execute();
              })
              .catch(() => {});
          }),
        );
      }
      const [torn] = await storePool.query(
        `SELECT a.title FROM ${table}_own a WHERE a.title LIKE '% after' AND NOT EXISTS (SELECT 1 FROM ${table}_own b WHERE b.title = REPLACE(a.title, ' after', ' before'))`,
      );
      expect({ misled: misled.length, halves: (torn as unknown[]).length }).toEqual({ misled: 0, halves: 0 });
    } finally {
      await outbox.close();
      await storePool.query(`DROP TABLE IF EXISTS ${table}, ${table}_tracks, ${table}_migrations, ${table}_controls, ${table}_own`);
      await Promise.all([storePool.end(), db.destroy()]);
    }
  }, 180_000);
});

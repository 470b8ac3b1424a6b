// Twelve callers enqueueing in REPEATABLE READ transactions on MariaDB deadlock now and then, and
// InnoDB reports some of those as 1467 ("Failed to read auto-increment value") rather than 1213:
// every caller whose whole transaction was rolled back is told so, so none goes on to commit half
// of it.
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

describe.skipIf(!haveMysql)('an enqueue failing in a REPEATABLE READ caller transaction on MariaDB', () => {
  it('never leaves the caller believing its transaction goes on when InnoDB rolled it back', async () => {
    const table = `test_caller_ai_${process.pid}`;
    const storePool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 4 });
    const appPool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: CALLERS });
    const store = mysqlOutboxStore({ pool: storePool, table });
    await store.migrate();
    const outbox = createReleaseOutbox({ client: clientFor(emulator), store, pollIntervalMs: 60_000 });
    const told: Record<string, number> = {};
    // Callers told of an ordinary failed statement (not "rolled all of your transaction back")
    // whose transaction was in fact gone.
    const misled: string[] = [];
    try {
      await storePool.query(`CREATE TABLE IF NOT EXISTS ${table}_own (id INT AUTO_INCREMENT PRIMARY KEY, title VARCHAR(100))`);
      for (let round = 0; round < ROUNDS; round++) {
        await Promise.all(
          Array.from({ length: CALLERS }, async (_, caller) => {
            const connection = await appPool.getConnection();
            const name = `r${round} c${caller}`;
            try {
              await connection.beginTransaction(); // the session's level: REPEATABLE READ, MariaDB's default
              await connection.query(`INSERT INTO ${table}_own (title) VALUES (?)`, [`${name} before`]);
              let rolledBack = false;
              try {
                await outbox.enqueue({ title: name, remote_track_id: `t${caller}` }, { transaction: connection });
              } catch (error) {
                rolledBack = /rolled all of your transaction back/.test((error as Error).message);
                const message = (error as Error).message;
                const errno = (error as { errno?: number; cause?: { errno?: number } }).errno ?? (error as { cause?: { errno?: number } }).cause?.errno;
                const sql = String((error as { sql?: string }).sql ?? '')
                  .replace(/\s+/g, ' ')
                  .slice(0, 60);
                const key = `${errno} ${message.slice(0, 70)} [${sql}]`;
                told[key] = (told[key] ?? 0) + 1;
                // The docs: a failed statement of ours is undone alone and the transaction goes on,
                // but after a deadlock, which the rejection names. This one names none.
                if (!/rolled all of your transaction back/.test(message)) {
                  const [[state]] = (await connection.query('SELECT @@in_transaction AS open')) as unknown as [[{ open: number }]];
                  if (Number(state?.open) === 0) misled.push(`${name}: ${message.slice(0, 80)}`);
                }
              }
              // The app goes on with its transaction, as the docs say it may after such a failure,
              // unless it was told the whole transaction is gone.
              if (rolledBack) throw new Error('run the whole transaction again');
              await connection.query(`INSERT INTO ${table}_own (title) VALUES (?)`, [`${name} after`]);
              await connection.commit();
            } catch {
              await connection.rollback().catch(() => {});
            } finally {
              connection.release();
            }
          }),
        );
      }
      // Half transactions: the app's row after the enqueue committed, the one before it is gone.
      const [torn] = await storePool.query(
        `SELECT a.title FROM ${table}_own a WHERE a.title LIKE '% after' AND NOT EXISTS (SELECT 1 FROM ${table}_own b WHERE b.title = REPLACE(a.title, ' after', ' before'))`,
      );
      const halves = (torn as { title: string }[]).length;
      expect({ misled: misled.length, halves }).toEqual({ misled: 0, halves: 0 });
    } finally {
      await outbox.close();
      await storePool.query(`DROP TABLE IF EXISTS ${table}, ${table}_tracks, ${table}_migrations, ${table}_controls, ${table}_own`);
      await Promise.all([storePool.end(), appPool.end()]);
    }
  }, 120_000);
});

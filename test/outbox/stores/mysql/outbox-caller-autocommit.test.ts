// MySQL/MariaDB sessions with autocommit off: a transaction begins with its first statement that
// touches a table. An enqueue after the app's own write joins it; one as its first statement is
// refused, saying why.
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

async function withAc0<T>(
  name: string,
  work: (ctx: { table: string; appPool: mysql.Pool; outbox: ReturnType<typeof createReleaseOutbox>; storePool: mysql.Pool }) => Promise<T>,
) {
  const table = `test_caller_ac0${name}_${process.pid}`;
  const storePool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 4 });
  const appPool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 1 });
  appPool.pool.on('connection', (connection) => {
    connection.query('SET autocommit = 0');
    connection.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
  });
  const store = mysqlOutboxStore({ pool: storePool, table });
  await store.migrate();
  const outbox = createReleaseOutbox({ client: clientFor(emulator), store, pollIntervalMs: 60_000 });
  try {
    await storePool.query(`CREATE TABLE IF NOT EXISTS ${table}_own (id INT AUTO_INCREMENT PRIMARY KEY, title TEXT)`);
    return await work({ table, appPool, outbox, storePool });
  } finally {
    await outbox.close();
    await storePool.query(`DROP TABLE IF EXISTS ${table}, ${table}_tracks, ${table}_migrations, ${table}_controls, ${table}_own`);
    await Promise.all([storePool.end(), appPool.end()]);
  }
}

describe.skipIf(!haveMysql)('autocommit = 0, the implicit transaction', () => {
  it('stores a release enqueued after the app’s own write, with its COMMIT', async () => {
    await withAc0('a', async ({ table, appPool, outbox }) => {
      const connection = await appPool.getConnection();
      await connection.query(`INSERT INTO ${table}_own (title) VALUES ('mine')`);
      const answer = await outbox.enqueue({ title: 'AC0 after write', remote_track_id: 'ac0-a' }, { transaction: connection }).then(
        () => 'resolved',
        (e: Error) => `rejected: ${e.message}`,
      );
      await connection.commit();
      connection.release();
      expect({ answer, stored: (await outbox.list()).map((r) => r.release.title) }).toEqual({ answer: 'resolved', stored: ['AC0 after write'] });
    });
  });

  it('refuses an enqueue as the implicit transaction’s first statement, saying why', async () => {
    await withAc0('b', async ({ table, appPool, outbox }) => {
      const connection = await appPool.getConnection();
      const answer = await outbox.enqueue({ title: 'AC0 first', remote_track_id: 'ac0-b' }, { transaction: connection }).then(
        () => 'resolved',
        (e: Error) => `rejected: ${e.message}`,
      );
      await connection.query(`INSERT INTO ${table}_own (title) VALUES ('mine')`);
      await connection.commit();
      connection.release();
      const stored = (await outbox.list()).map((r) => r.release.title);
      // Refused, naming autocommit: the transaction had not begun (nothing touched a table yet).
      expect(answer).toMatch(/^rejected: .*With autocommit off, a transaction only begins with its first statement/);
      expect(stored).toEqual([]);
    });
  });
});

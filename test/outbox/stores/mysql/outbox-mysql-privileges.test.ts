// A MySQL user granted less than the outbox needs is told what to grant: here one without DELETE
// on the tracks table, which an enqueue in the caller's transaction needs for its marker row.
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../../../../src/emulator/emulator.js';
import { mysqlOutboxStore } from '../../../../src/mysql.js';
import { createReleaseOutbox } from '../../../../src/outbox/outbox.js';
import { clientFor, startEmulator } from '../../../support/helpers.js';
import { MYSQL_URL, mysqlAnswers, serviceAvailable } from '../../../support/services.js';

const haveMysql = serviceAvailable('MySQL/MariaDB', MYSQL_URL, await mysqlAnswers());
const table = `test_privileges_${process.pid}`;
const user = `plg_priv_${process.pid}`;
let emulator: MotherEmulator;
let admin: mysql.Pool;
beforeAll(async () => {
  emulator = await startEmulator();
  if (haveMysql) admin = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 1 });
});
afterAll(async () => {
  await emulator.close();
  if (!haveMysql) return;
  for (const host of ['%', 'localhost']) await admin.query(`DROP USER IF EXISTS '${user}'@'${host}'`);
  await admin.query(`DROP TABLE IF EXISTS ${table}, ${table}_tracks, ${table}_migrations, ${table}_controls`);
  await admin.end();
});

describe.skipIf(!haveMysql)('the MySQL store with a user lacking DELETE', () => {
  it('enqueues on its own, and names the grant when an enqueue in a transaction needs it', async () => {
    await mysqlOutboxStore({ pool: admin, table }).migrate();
    const [[{ db }]] = (await admin.query('SELECT DATABASE() AS db')) as unknown as [[{ db: string }]];
    for (const host of ['%', 'localhost']) {
      await admin.query(`CREATE USER IF NOT EXISTS '${user}'@'${host}' IDENTIFIED BY 'pw'`);
      for (const name of [table, `${table}_tracks`, `${table}_controls`, `${table}_migrations`])
        await admin.query(`GRANT SELECT, INSERT, UPDATE ON \`${db}\`.\`${name}\` TO '${user}'@'${host}'`);
    }
    const url = new URL(MYSQL_URL);
    url.username = user;
    url.password = 'pw';
    const pool = mysql.createPool({ uri: url.toString(), connectionLimit: 2 });
    const outbox = createReleaseOutbox({ client: clientFor(emulator), store: mysqlOutboxStore({ pool, table }), retention: false, autoStart: false });
    try {
      await outbox.enqueue({ title: 'Alone', remote_track_id: 'alone' });
      const connection = await pool.getConnection();
      try {
        await connection.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
        await connection.beginTransaction();
        await expect(outbox.enqueue({ title: 'In my transaction', remote_track_id: 'mine' }, { transaction: connection })).rejects.toThrow(
          /lacks a privilege .* GRANT SELECT, INSERT, UPDATE, DELETE ON each of the four tables \(DELETE for retention, and for an enqueue in your transaction/,
        );
        await connection.rollback();
      } finally {
        connection.release();
      }
      expect((await outbox.list()).map((entry) => entry.release.title)).toEqual(['Alone']);
    } finally {
      await outbox.close();
      await pool.end();
    }
  });
});

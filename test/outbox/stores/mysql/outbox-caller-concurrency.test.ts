// Twelve callers × ten rounds enqueueing in their own transactions on MariaDB, one track for all
// or a track each: every transaction commits, one pending row per track, one tracks row, no
// marker left behind.
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

async function hammer(level: 'READ COMMITTED' | 'REPEATABLE READ', tracks: (caller: number) => string) {
  const table = `test_caller_c_${level === 'READ COMMITTED' ? 'rc' : 'rr'}_${process.pid}`;
  const storePool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 4 });
  const appPool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: CALLERS });
  const store = mysqlOutboxStore({ pool: storePool, table });
  await store.migrate();
  // Not started: a worker woken by an enqueue would deliver committed rows while the rounds run,
  // and the pending rows counted below would then depend on how loaded the machine is.
  const outbox = createReleaseOutbox({ client: clientFor(emulator), store, pollIntervalMs: 60_000, autoStart: false });
  const errors: string[] = [];
  const roundMs: number[] = [];
  try {
    await storePool.query(`CREATE TABLE IF NOT EXISTS ${table}_own (id INT AUTO_INCREMENT PRIMARY KEY, title TEXT)`);
    for (let round = 0; round < ROUNDS; round++) {
      const started = Date.now();
      await Promise.all(
        Array.from({ length: CALLERS }, async (_, caller) => {
          const connection = await appPool.getConnection();
          try {
            await connection.query(`SET TRANSACTION ISOLATION LEVEL ${level}`);
            await connection.beginTransaction();
            await connection.query(`INSERT INTO ${table}_own (title) VALUES (?)`, [`r${round} c${caller}`]);
            await outbox.enqueue({ title: `r${round} c${caller}`, remote_track_id: tracks(caller) }, { transaction: connection });
            await connection.commit();
          } catch (error) {
            errors.push(`round ${round} caller ${caller}: ${(error as Error).message.slice(0, 160)}`);
            await connection.rollback().catch(() => {});
          } finally {
            connection.release();
          }
        }),
      );
      roundMs.push(Date.now() - started);
    }
    const [own] = await storePool.query(`SELECT COUNT(*) AS n FROM ${table}_own`);
    const [pending] = await storePool.query(
      `SELECT remote_track_id AS track, COUNT(*) AS n FROM ${table} WHERE state = 'pending' GROUP BY remote_track_id ORDER BY remote_track_id`,
    );
    const [trackRows] = await storePool.query(`SELECT panel, remote_track_id AS track FROM ${table}_tracks ORDER BY panel, remote_track_id`);
    return {
      errors,
      roundMs,
      own: Number((own as { n: number }[])[0]?.n),
      pending: (pending as { track: string; n: number }[]).map((row) => `${row.track}:${row.n}`),
      trackRows: (trackRows as { panel: string; track: string }[]).map((row) => `${row.panel}/${row.track}`),
    };
  } finally {
    await outbox.close();
    await storePool.query(`DROP TABLE IF EXISTS ${table}, ${table}_tracks, ${table}_migrations, ${table}_controls, ${table}_own`);
    await Promise.all([storePool.end(), appPool.end()]);
  }
}

describe.skipIf(!haveMysql)('12 callers × 10 rounds enqueueing in their transactions', () => {
  it('one track, READ COMMITTED: every transaction commits, one pending row, one tracks row', async () => {
    const result = await hammer('READ COMMITTED', () => 'same');
    expect(result).toMatchObject({ errors: [], own: CALLERS * ROUNDS, pending: ['same:1'], trackRows: [expect.stringMatching(/\/same$/)] });
  }, 120_000);

  it('one track, REPEATABLE READ (MariaDB and MySQL default): every transaction commits', async () => {
    const result = await hammer('REPEATABLE READ', () => 'same');
    expect(result).toMatchObject({ errors: [], own: CALLERS * ROUNDS, pending: ['same:1'], trackRows: [expect.stringMatching(/\/same$/)] });
  }, 120_000);

  it('a track each, READ COMMITTED: every transaction commits', async () => {
    const result = await hammer('READ COMMITTED', (caller) => `t${String(caller).padStart(2, '0')}`);
    expect(result).toMatchObject({ errors: [], own: CALLERS * ROUNDS });
    expect(result.pending).toHaveLength(CALLERS);
  }, 120_000);
});

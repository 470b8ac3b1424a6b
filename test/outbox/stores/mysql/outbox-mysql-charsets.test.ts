// A pooled session of the outbox's pool changes one character-set variable after start-up: the
// same character set in another collation is fine; character_set_connection or _results alone
// (which mysql2 does not follow: it tracks character_set_client) is refused, never stored changed.
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../../../../src/emulator/emulator.js';
import { mysqlOutboxStore } from '../../../../src/mysql.js';
import { createReleaseOutbox } from '../../../../src/outbox/outbox.js';
import { clientFor, startEmulator, waitFor } from '../../../support/helpers.js';
import { onEverySession } from '../../../support/mysql-sessions.js';
import { MYSQL_URL, mysqlAnswers, serviceAvailable } from '../../../support/services.js';

const haveMysql = serviceAvailable('MySQL/MariaDB', MYSQL_URL, await mysqlAnswers());
const SESSIONS = 2;
const PREFIX = `test_charsets_${process.pid}`;
let tables = 0;
const pools: mysql.Pool[] = [];
let emulator: MotherEmulator;
let admin: mysql.Pool;
beforeAll(async () => {
  emulator = await startEmulator();
  if (haveMysql) admin = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 1 });
});
afterAll(async () => {
  await emulator.close();
  if (!haveMysql) return;
  for (let i = 1; i <= tables; i++)
    await admin.query(`DROP TABLE IF EXISTS ${PREFIX}_${i}, ${PREFIX}_${i}_tracks, ${PREFIX}_${i}_migrations, ${PREFIX}_${i}_controls`);
  await Promise.all([...pools, admin].map((pool) => pool.end()));
});

async function setup(switchTo: string) {
  const pool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: SESSIONS });
  pools.push(pool);
  const table = `${PREFIX}_${++tables}`;
  const store = mysqlOutboxStore({ pool, table });
  await store.migrate();
  // An app sharing the pool changes one character-set variable of each session.
  await onEverySession(pool, SESSIONS, switchTo);
  return { pool, table, store };
}

describe.skipIf(!haveMysql)('MySQL store after a session changed one character-set variable', () => {
  it.each(['SET NAMES utf8mb4', 'SET NAMES utf8mb4 COLLATE utf8mb4_general_ci'])(
    'an app’s %s on the shared pool (the same character set, utf8mb4) does not stop the outbox',
    async (switchTo) => {
      const { store } = await setup(switchTo);
      const outbox = createReleaseOutbox({ client: clientFor(emulator), store, pollIntervalMs: 20 });
      try {
        const title = `Same charset ${process.pid} ${switchTo}`;
        await outbox.enqueue({ title, remote_track_id: `same-${switchTo}` });
        await waitFor(() => emulator.releases.some((r) => r.release.title === title), 'the delivery', 3000);
      } finally {
        await outbox.close();
      }
    },
  );

  it.each(['SET collation_connection = utf8mb4_general_ci', 'SET collation_connection = utf8mb4_unicode_ci'])(
    'ids differing by case or a trailing space stay apart (%s)',
    async (switchTo) => {
      const { table, store } = await setup(switchTo);
      const outbox = createReleaseOutbox({ client: clientFor(emulator), store, autoStart: false });
      try {
        for (const track of ['t-a', 't-A', 't-a ', 't-á']) await outbox.enqueue({ title: `Track ${track}`, remote_track_id: track });
        const [rows] = await admin.query(`SELECT remote_track_id FROM ${table} ORDER BY id`);
        expect((rows as { remote_track_id: string }[]).map((r) => r.remote_track_id)).toEqual(['t-a', 't-A', 't-a ', 't-á']);
        expect((await outbox.list({ track: 't-A' })).map((e) => e.release.title)).toEqual(['Track t-A']);
      } finally {
        await outbox.close();
      }
    },
  );

  it.each(['SET character_set_connection = latin1', 'SET collation_connection = latin1_swedish_ci'])(
    'two different track ids stay two rows, stored byte for byte, or the store refuses (%s)',
    async (switchTo) => {
      const { table, store } = await setup(switchTo);
      const outbox = createReleaseOutbox({ client: clientFor(emulator), store, autoStart: false });
      try {
        const first = await outbox.enqueue({ title: 'One 😀', remote_track_id: 'track-😀' }).catch((error: Error) => error);
        const second = await outbox.enqueue({ title: 'Two 😁', remote_track_id: 'track-😁' }).catch((error: Error) => error);
        expect([first, second].map((answer) => (answer instanceof Error ? answer.message : 'stored'))).toEqual([
          expect.stringMatching(/switched its character set after start-up \(.*latin1/),
          expect.stringMatching(/switched its character set after start-up \(.*latin1/),
        ]);
        const [rows] = await admin.query(`SELECT id FROM ${table}`);
        expect(rows).toEqual([]);
      } finally {
        await outbox.close();
      }
    },
  );

  it('the mother receives the title as enqueued, or the store refuses (SET character_set_results = latin1)', async () => {
    const pool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: SESSIONS });
    pools.push(pool);
    const store = mysqlOutboxStore({ pool, table: `${PREFIX}_${++tables}` });
    await store.migrate();
    const outbox = createReleaseOutbox({ client: clientFor(emulator), store, autoStart: false });
    const title = `Results ${process.pid} Zoë 😀`;
    try {
      await outbox.enqueue({ title, remote_track_id: `results-${process.pid}` });
      await onEverySession(pool, SESSIONS, 'SET character_set_results = latin1');
      outbox.start();
      const sent = await waitFor(() => emulator.releases.find((r) => String(r.release.title).startsWith(`Results ${process.pid}`)), 'a delivery', 3000).catch(
        () => undefined,
      );
      // Refused, session after session: never sent changed.
      expect(sent).toBeUndefined();
    } finally {
      await outbox.close();
    }
  });

  it('refuses binary results by name (mysql2 would give every text column as bytes)', async () => {
    const { store } = await setup('SET character_set_results = binary');
    const outbox = createReleaseOutbox({ client: clientFor(emulator), store, autoStart: false });
    try {
      await expect(outbox.enqueue({ title: 'Binary results', remote_track_id: `binary-${process.pid}` })).rejects.toThrow(
        /switched its character set after start-up \(character_set_results is binary;/,
      );
    } finally {
      await outbox.close();
    }
  });
});

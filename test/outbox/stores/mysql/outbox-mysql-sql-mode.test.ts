import { createServer, type Server } from 'node:http';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMotherClient } from '../../../../src/client/mother-client.js';
import type { MotherEmulator } from '../../../../src/emulator/emulator.js';
import { mysqlOutboxStore } from '../../../../src/mysql.js';
import { createReleaseOutbox } from '../../../../src/outbox/outbox.js';
import type { ClaimedRow } from '../../../../src/outbox/store.js';
import { API_KEY, API_SECRET, clientFor, startEmulator, waitFor } from '../../../support/helpers.js';
import { NO_BACKSLASH_ESCAPES_ON, onEverySession, PROBE, probed, STRICT_OFF, valuesApartOnly } from '../../../support/mysql-sessions.js';
import { MYSQL_URL, mysqlAnswers, serviceAvailable } from '../../../support/services.js';

// The MySQL store whatever the session's sql_mode: NO_BACKSLASH_ESCAPES switched on mid-run on
// the pool's sessions (an app sharing the pool, a server restarted with a new global mode) never
// lets a caller's, a release's or the mother's text be read as SQL, and strict mode or not, a
// value is stored the same way.
const haveMysql = serviceAvailable('MySQL/MariaDB', MYSQL_URL, await mysqlAnswers());
const SESSIONS = 3;
const pools: mysql.Pool[] = [];
const newPool = () => {
  const pool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: SESSIONS });
  pools.push(pool);
  return pool;
};
const PREFIX = `test_outbox_mode_${process.pid}`;
let tables = 0;
const freshTable = () => `${PREFIX}_${++tables}`;
let emulator: MotherEmulator;
let admin: mysql.Pool;

beforeAll(async () => {
  emulator = await startEmulator();
  if (haveMysql) admin = newPool();
});
afterAll(async () => {
  await emulator.close();
  if (!haveMysql) return;
  for (let i = 1; i <= tables; i++) await admin.query(`DROP TABLE IF EXISTS ${PREFIX}_${i}, ${PREFIX}_${i}_tracks, ${PREFIX}_${i}_migrations`);
  await Promise.all(pools.map((pool) => pool.end()));
});

const release = (title: string, remote_track_id?: string) => ({ title, primary_artist: 'Ada', ...(remote_track_id === undefined ? {} : { remote_track_id }) });
const newRow = (panel: string, body: string, remoteTrackId?: string) => ({ panel, remoteTrackId, body, contentHash: `h:${body}` });
const rowOf = async (table: string, id: number) =>
  ((await admin.query(`SELECT state, release_id, last_error FROM ${table} WHERE id = ?`, [id]))[0] as Record<string, unknown>[])[0];
/** A row of `panel` made dead (claimed, then refused). */
async function deadRow(store: ReturnType<typeof mysqlOutboxStore>, panel: string, track: string): Promise<number> {
  const { id } = await store.enqueue(newRow(panel, `{"track":"${track}"}`, track), 1000);
  const [claimed] = await store.claimDue({ panel, owner: 'me', limit: 1, nowMs: 2000, leaseMs: 60_000 });
  await store.settle(claimed as ClaimedRow, 'me', { kind: 'dead', error: 'refused' }, 2000);
  return id;
}

describe.skipIf(!haveMysql)('mysqlOutboxStore() when NO_BACKSLASH_ESCAPES is switched on after start-up', () => {
  it('list({ track }) returns no other panel’s release and runs none of the text', async () => {
    const pool = newPool();
    const table = freshTable();
    const store = mysqlOutboxStore({ pool, table });
    const mine = createReleaseOutbox({ client: clientFor(emulator), store, autoStart: false });
    const theirs = createReleaseOutbox({ client: clientFor(emulator, { apiKey: 'pk_another_panel' }), store, autoStart: false });
    await mine.enqueue(release('Mine', 'mine'));
    await theirs.enqueue(release('Theirs', 'theirs'));
    await onEverySession(pool, SESSIONS, NO_BACKSLASH_ESCAPES_ON);

    expect(await mine.list({ track: PROBE })).toEqual([]);
    expect(await store.list({ state: undefined, limit: 10, panel: 'panel-a', track: PROBE })).toEqual([]);
    expect((await mine.list({ track: 'mine' })).map((entry) => entry.release.title)).toEqual(['Mine']);
    expect(await probed(pool, SESSIONS)).toBe(0);
    await Promise.all([mine.close(), theirs.close()]);
  });

  it('counts, the oldest pending and dead rows of a panel run none of its id’s text, and requeue nothing of another panel', async () => {
    const pool = newPool();
    const table = freshTable();
    const store = mysqlOutboxStore({ pool, table });
    const dead = await deadRow(store, 'panel-a', 't-1');
    await store.enqueue(newRow('panel-a', '{"v":2}'), 1000);
    await onEverySession(pool, SESSIONS, NO_BACKSLASH_ESCAPES_ON);

    const scope = { panel: PROBE };
    expect(await store.counts(scope)).toEqual({ pending: 0, delivered: 0, dead: 0, cancelled: 0 });
    expect(await store.oldestPending?.(scope)).toBeUndefined();
    expect(await store.requeueDead(undefined, 3000, scope)).toBe(0);
    expect(await store.list({ state: undefined, limit: 10, panel: PROBE })).toEqual([]);
    expect(await rowOf(table, dead)).toMatchObject({ state: 'dead' });
    expect(await probed(pool, SESSIONS)).toBe(0);
    // Still usable: the panel's own calls, claims and transactions included.
    expect(await store.counts({ panel: 'panel-a' })).toEqual({ pending: 1, delivered: 0, dead: 1, cancelled: 0 });
    expect(await store.requeueDead(dead, 3000, { panel: 'panel-a' })).toBe(1);
    expect(await store.claimDue({ panel: 'panel-a', owner: 'me', limit: 5, nowMs: 4000, leaseMs: 60_000 })).toHaveLength(2);
  });

  it('keeps a release the mother refused (422) dead, with her message as its lastError, whatever that message says', async () => {
    const pool = newPool();
    const table = freshTable();
    const store = mysqlOutboxStore({ pool, table });
    // Ends its quote under NO_BACKSLASH_ESCAPES, then would set the row delivered with release_id 666.
    const message = "x', state = 0x64656c697665726564, release_id = 666, #";
    // A mother that answers 422 once the pool's sessions have changed mode (the row was claimed before).
    const mother: Server = createServer((request, response) => {
      request.resume();
      void onEverySession(pool, SESSIONS, NO_BACKSLASH_ESCAPES_ON).then(() =>
        response.writeHead(422, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: false, error: message })),
      );
    });
    await new Promise<void>((resolve) => mother.listen(0, '127.0.0.1', resolve));
    const { port } = mother.address() as { port: number };
    const client = createMotherClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: API_KEY, apiSecret: API_SECRET, timeoutMs: 5000 });
    const outbox = createReleaseOutbox({ client, store, pollIntervalMs: 50 });
    try {
      const { id } = await outbox.enqueue(release('Refused', 'refused'));
      await waitFor(async () => (await rowOf(table, id))?.state !== 'pending', 'the attempt settled', 5000);
      const said = `The mother rejected the request: ${message}`;
      expect(await rowOf(table, id)).toEqual({ state: 'dead', release_id: null, last_error: said });
      expect((await outbox.get(id))?.lastError).toBe(said);
    } finally {
      await outbox.close();
      await new Promise((resolve) => mother.close(resolve));
    }
  });

  it('stores panels and tracks at their longest, with quotes and backslashes, byte for byte, and finds them again', async () => {
    const pool = newPool();
    const store = mysqlOutboxStore({ pool, table: freshTable() });
    await store.migrate();
    await onEverySession(pool, SESSIONS, NO_BACKSLASH_ESCAPES_ON);
    const panel = 'p\\\'"`😀é'.repeat(25); // 200 UTF-16 code units: the longest panel id
    const track = 't\\\'\\\\"é😀%_'.repeat(50).slice(0, 500);
    const other = `${panel.slice(0, -1)}\\`;
    const { id } = await store.enqueue(newRow(panel, `{"title":"\\\\' #"}`, track), 1000);
    await store.enqueue(newRow(other, '{"other":1}', track), 1000);
    const [listed] = await store.list({ state: 'pending', limit: 10, panel, track });
    expect(listed).toMatchObject({ id, panel, remoteTrackId: track, body: `{"title":"\\\\' #"}` });
    const [claimed] = await store.claimDue({ panel, owner: "o'\\", limit: 5, nowMs: 2000, leaseMs: 60_000 });
    expect(claimed?.id).toBe(id);
    const error = "HTTP 503: it's \\' down";
    await store.settle(claimed as ClaimedRow, "o'\\", { kind: 'retry', nextAttemptAt: 3000, error }, 2000);
    expect((await store.list({ state: undefined, limit: 10, id, panel })).map((row) => [row.panel, row.lastError])).toEqual([[panel, error]]);
    expect(await store.counts({ panel: other })).toEqual({ pending: 1, delivered: 0, dead: 0, cancelled: 0 });
  });
});

describe.skipIf(!haveMysql)('mysqlOutboxStore() on sessions that start with NO_BACKSLASH_ESCAPES', () => {
  // A title that ends its quotes when backslashes are not escapes.
  const attack = release("x', 'y', 'z', 'pending', 0, 0, 0, 0)# \\' é😀", "t\\', 1)#");

  it('uses them, and stores a release alone or in the caller’s transaction byte for byte', async () => {
    const pool = newPool();
    pool.pool.on('connection', (connection) => connection.query(NO_BACKSLASH_ESCAPES_ON));
    const store = mysqlOutboxStore({ pool: valuesApartOnly(pool), table: freshTable() });
    const outbox = createReleaseOutbox({ client: clientFor(emulator), store, autoStart: false });
    await outbox.enqueue(attack);
    await store.migrate();
    const db = await pool.getConnection();
    try {
      await db.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
      await db.beginTransaction();
      await outbox.enqueue({ ...attack, title: `${attack.title} (in a transaction)` }, { transaction: valuesApartOnly(db) });
      await db.commit();
    } finally {
      db.release();
    }
    const stored = await outbox.list();
    expect(stored.map((entry) => [entry.release.title, entry.remoteTrackId, entry.state])).toEqual([
      [`${attack.title} (in a transaction)`, attack.remote_track_id, 'pending'],
    ]);
    expect(stored[0]?.release).toEqual({ ...attack, title: `${attack.title} (in a transaction)` });
    await outbox.close();
  });

  it('claims, leases, adopts and prunes lists of any length (padded to a few statement shapes)', async () => {
    const pool = newPool();
    const table = freshTable();
    const store = mysqlOutboxStore({ pool: valuesApartOnly(pool), table, leaseClock: 'outbox' });
    await store.migrate();
    await onEverySession(pool, SESSIONS, NO_BACKSLASH_ESCAPES_ON);
    const panels = Array.from({ length: 10 }, (_, i) => `p${i}'\\`);
    const ids: number[] = [];
    for (const [i, panel] of panels.entries()) for (let n = 0; n < 7; n++) ids.push((await store.enqueue(newRow(panel, `{"n":${i * 7 + n}}`), 1000)).id);
    const exclude = ids.filter((_, i) => i % 7 < 2); // 20 rows, 2 of each panel
    const fair = { owner: 'me', nowMs: 2000, leaseMs: 60_000, after: '', skipPanels: [], probePanels: [] };
    const claimFair = store.claimFair?.bind(store) as NonNullable<typeof store.claimFair>;
    const first = await claimFair({ ...fair, limit: 30, exclude, maxPanels: 10 });
    const second = await claimFair({ ...fair, limit: 30, exclude: exclude.slice(0, 9), maxPanels: 10 });
    const claimP0 = (skip: number[]) => store.claimDue({ panel: panels[0] as string, owner: 'me', limit: 9, nowMs: 2000, leaseMs: 60_000, exclude: skip });
    expect(await claimP0(ids)).toEqual([]);
    const third = await claimP0([]);
    expect(first.rows).toHaveLength(30);
    expect(first.rows.filter((row) => exclude.includes(row.id))).toEqual([]);
    expect(second.rows.filter((row) => exclude.slice(0, 9).includes(row.id))).toEqual([]);
    expect(third.filter((row) => row.panel !== panels[0])).toEqual([]);
    const claimed = [...first.rows, ...second.rows, ...third].map((row) => row.id);
    expect(new Set(claimed).size).toBe(claimed.length);
    expect(await store.panelCounts?.(3)).toHaveLength(3);
    expect(await store.oldestPending?.({ panel: panels[9] as string })).toEqual(expect.any(Number));
    // Rows stored without a panel, all but the newest of each track superseded by the panel's own.
    for (let n = 0; n < 10; n++) await store.enqueue(newRow('', `{"u":${n}}`, `u-${n}`), 1000);
    for (let n = 0; n < 10; n++) await store.enqueue(newRow(panels[1] as string, `{"mine":${n}}`, `u-${n}`), 1000);
    expect(await store.adoptUnassigned?.(panels[1] as string, 3000)).toBe(10);
    expect((await store.counts({ panel: panels[1] as string })).dead).toBe(10);
    await admin.query(`UPDATE ${table} SET updated_at = 1 WHERE state = 'dead'`);
    expect(await store.prune?.({ deliveredBefore: 2, deadBefore: 2, afterId: 0, limit: 1000 })).toMatchObject({ deleted: 10 });
    expect(await probed(pool, SESSIONS)).toBe(0);
  });
});

describe.skipIf(!haveMysql)('mysqlOutboxStore() with an error text longer than its column holds', () => {
  // 70,000 bytes of UTF-8 (last_error is a TEXT: 65,535 bytes).
  const long = `${'é'.repeat(20_000)}${'😀'.repeat(7_500)}`;
  for (const mode of ['strict', 'not strict'] as const)
    it(`keeps the same beginning of it, on a ${mode} session`, async () => {
      const pool = newPool();
      const table = freshTable();
      const store = mysqlOutboxStore({ pool, table });
      const { id } = await store.enqueue(newRow('panel-a', '{}'), 1000);
      if (mode === 'not strict') await onEverySession(pool, SESSIONS, STRICT_OFF);
      const [claimed] = await store.claimDue({ panel: 'panel-a', owner: 'me', limit: 1, nowMs: 2000, leaseMs: 60_000 });
      expect(await store.settle(claimed as ClaimedRow, 'me', { kind: 'dead', error: long }, 2000)).toBe('applied');
      const kept = String((await rowOf(table, id))?.last_error);
      expect(Buffer.byteLength(kept)).toBeLessThanOrEqual(65_535);
      expect(Buffer.byteLength(kept)).toBeGreaterThan(65_535 - 8);
      expect(kept.endsWith('…')).toBe(true);
      expect(long.startsWith(kept.slice(0, -1))).toBe(true);
    });
});

describe.skipIf(!haveMysql)('mysqlOutboxStore() when MariaDB’s EMPTY_STRING_IS_NULL is switched on after start-up', () => {
  const EMPTY_STRING_IS_NULL_ON = "SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',EMPTY_STRING_IS_NULL')";

  it('still claims across panels, and scopes a read to the unassigned panel only', async () => {
    const pool = newPool();
    const store = mysqlOutboxStore({ pool, table: freshTable() });
    const outbox = createReleaseOutbox({
      store,
      baseUrl: emulator.url,
      panels: { resolve: async () => ({ apiKey: API_KEY, apiSecret: API_SECRET }) },
      pollIntervalMs: 20,
    });
    try {
      await outbox.enqueue(release('Before'), { panel: 'tenant-a' });
      await waitFor(async () => (await outbox.stats({ panel: 'tenant-a' })).delivered === 1, 'the first delivery');
      // MySQL has no such mode: the test speaks of MariaDB only.
      const modes = await onEverySession(pool, SESSIONS, EMPTY_STRING_IS_NULL_ON).catch(() => undefined);
      if (modes === undefined) return;
      for (let i = 0; i < 5; i++) await outbox.enqueue(release(`After ${i}`), { panel: i % 2 === 0 ? 'tenant-a' : 'tenant-b' });
      await outbox.drain({ signal: AbortSignal.timeout(10_000) });
      expect(await store.counts({ panel: 'tenant-b' })).toMatchObject({ pending: 0, delivered: 2 });
      // '' is the panel of rows stored before rows recorded one: there are none (not "every row").
      expect(await store.counts({ panel: '' })).toEqual({ pending: 0, delivered: 0, dead: 0, cancelled: 0 });
      expect(await store.list({ state: undefined, limit: 10, panel: '' })).toEqual([]);
    } finally {
      await outbox.close();
    }
  });
});

describe.skipIf(!haveMysql)('mysqlOutboxStore() when a pooled session switches its character set after start-up', () => {
  it('stores nothing through it (its text would be read as latin1), and says why', async () => {
    const pool = newPool();
    const store = mysqlOutboxStore({ pool, table: freshTable() });
    const before = await store.enqueue(newRow('tenant-a', '{"title":"Café ☕"}', 'tr-é'), 1000);
    await onEverySession(pool, SESSIONS, 'SET NAMES latin1');
    await expect(store.enqueue(newRow('tenant-a', '{"title":"Zoë ☕"}', 'tr-ë'), 1000)).rejects.toThrow(/switched its character set after start-up/);
    await expect(store.list({ state: undefined, limit: 10 })).rejects.toThrow(/switched its character set/);
    await expect(store.claimDue({ panel: 'tenant-a', owner: 'me', limit: 5, nowMs: 2000, leaseMs: 60_000 })).rejects.toThrow(/switched its character set/);
    // Read on a session of its own: only the release stored before, byte for byte.
    const [rows] = await admin.query(`SELECT id, body, remote_track_id FROM ${PREFIX}_${tables}`);
    expect(rows).toEqual([{ id: before.id, body: '{"title":"Café ☕"}', remote_track_id: 'tr-é' }]);
  });
});

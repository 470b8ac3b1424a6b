// The SQLite outbox's v6 step (cancel, controls, the delivery feed) on a file written by the
// previous version, rows and all: read as it is when opened read-only, migrated in place when
// opened for writing. And what SQLite reads to answer the feed and a cancel (query plans).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadSqliteDriver } from '../../../../src/db/sqlite-driver.js';
import { FEED_SQL } from '../../../../src/outbox/stores/sqlite/sqlite-feed.js';
import { OPERATION_SQL } from '../../../../src/outbox/stores/sqlite/sqlite-operations.js';
import { sqliteOutboxStore } from '../../../../src/outbox/stores/sqlite/sqlite-store.js';

const dir = mkdtempSync(join(tmpdir(), 'outbox-sqlite-v6-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const Driver = loadSqliteDriver();

// Schema v5 exactly as the previous version created it.
const V5 = `
CREATE TABLE IF NOT EXISTS release_outbox (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  panel            TEXT    NOT NULL DEFAULT '',
  remote_track_id  TEXT,
  body             TEXT    NOT NULL,
  content_hash     TEXT    NOT NULL,
  state            TEXT    NOT NULL CHECK (state IN ('pending', 'delivered', 'dead')),
  attempts         INTEGER NOT NULL DEFAULT 0,
  next_attempt_at  INTEGER NOT NULL,
  last_error       TEXT,
  release_id       INTEGER,
  delivered_seq    INTEGER,
  history_of       INTEGER,
  lease_owner      TEXT,
  lease_expires_at INTEGER,
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL,
  delivered_at     INTEGER
);
CREATE INDEX IF NOT EXISTS release_outbox_panel_due ON release_outbox (state, panel, next_attempt_at, id);
CREATE INDEX IF NOT EXISTS release_outbox_panel_track ON release_outbox (panel, remote_track_id, state, id);
CREATE INDEX IF NOT EXISTS release_outbox_list ON release_outbox (state, id, created_at);
CREATE INDEX IF NOT EXISTS release_outbox_panel_list ON release_outbox (state, panel, id);
CREATE INDEX IF NOT EXISTS release_outbox_track_list ON release_outbox (state, remote_track_id, id);
`;

/** A v5 file (WAL, as the store leaves it) holding `rows` releases: every third pending, delivered, dead. */
function v5File(rows: number): string {
  const file = join(dir, `v5-${++files}.db`);
  const db = new Driver(file);
  db.pragma('journal_mode = WAL');
  db.exec(V5);
  // Delivered in the reverse of id order: the feed follows delivery time, not ids.
  db.exec(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ${rows})
    INSERT INTO release_outbox (panel, remote_track_id, body, content_hash, state, attempts, next_attempt_at, created_at, updated_at,
      release_id, delivered_seq, delivered_at)
    SELECT 'panel-a', 'track-' || i, '{"title":"' || i || '"}', 'hash-' || i, CASE i % 3 WHEN 0 THEN 'pending' WHEN 1 THEN 'delivered' ELSE 'dead' END,
      1, 0, i, i, CASE i % 3 WHEN 1 THEN 1000 + i END, CASE i % 3 WHEN 1 THEN 1 END, CASE i % 3 WHEN 1 THEN 1000000 - i END FROM c`);
  db.pragma('user_version = 5');
  db.close();
  return file;
}

describe('SQLite outbox schema v5 → v6', () => {
  it('reads a v5 file opened read-only as it is: counts, lists, no controls; the feed and cancel need it writable', async () => {
    const file = v5File(30);
    const reader = sqliteOutboxStore({ file, readonly: true });
    expect(await reader.counts()).toEqual({ pending: 10, delivered: 10, dead: 10, cancelled: 0 });
    expect((await reader.list({ state: 'dead', limit: 2 })).map((row) => row.id)).toEqual([2, 5]);
    expect(await reader.list({ state: 'cancelled', limit: 5 })).toEqual([]);
    expect(await reader.controls?.()).toEqual({});
    expect(() => reader.deliveries?.({ after: 0, limit: 5 })).toThrow(/opened read-only; deliveries\(\) needs it opened for writing/);
    expect(() => reader.cancel?.({ id: 3, nowMs: 0, note: 'x' })).toThrow(/opened read-only; cancel\(\) needs it opened for writing/);
    await reader.close();
    const check = new Driver(file, { readonly: true });
    expect(check.pragma('user_version', { simple: true })).toBe(5);
    check.close();
  });

  it('migrates a v5 file with rows in place: cancelled allowed, old deliveries positioned on the first feed read, in delivery order', async () => {
    const file = v5File(3000);
    // A connection that read the v5 schema before the step reads it again (schema_version bumped).
    const check = new Driver(file);
    expect(check.prepare("SELECT COUNT(*) AS n FROM release_outbox WHERE state = 'pending'").get()).toEqual({ n: 1000 });
    const store = sqliteOutboxStore({ file });
    expect(check.pragma('user_version', { simple: true })).toBe(6);
    expect(check.prepare("UPDATE release_outbox SET state = 'cancelled' WHERE id = 6").run().changes).toBe(1);
    expect(check.pragma('integrity_check')).toEqual([{ integrity_check: 'ok' }]);
    expect(check.prepare('SELECT COUNT(*) AS n FROM release_outbox WHERE feed_position IS NOT NULL').get()).toEqual({ n: 0 });
    expect(() => check.prepare("UPDATE release_outbox SET state = 'lost' WHERE id = 3").run()).toThrow(/CHECK constraint failed/);

    expect(await store.cancel?.({ id: 3, nowMs: 5, note: 'track deleted' })).toEqual({ result: 'cancelled', id: 3, state: 'cancelled' });
    expect(await store.cancel?.({ panel: 'panel-a', track: 'track-1', nowMs: 5, note: 'x' })).toEqual({
      result: 'not-pending',
      id: 1,
      state: 'delivered',
      releaseId: 1001,
    });
    expect(await store.counts()).toEqual({ pending: 998, delivered: 1000, dead: 1000, cancelled: 2 });
    const first = (await store.deliveries?.({ after: 0, limit: 600 })) ?? [];
    const rest = (await store.deliveries?.({ after: 600, limit: 600 })) ?? [];
    const feed = [...first, ...rest];
    expect(feed.map((row) => row.position)).toEqual(Array.from({ length: 1000 }, (_, i) => i + 1));
    // Delivered latest first by id: the highest id was delivered first.
    expect(feed.map((row) => row.id)).toEqual(Array.from({ length: 1000 }, (_, i) => 2998 - 3 * i));
    expect(feed[0]).toEqual({
      position: 1,
      id: 2998,
      panel: 'panel-a',
      remoteTrackId: 'track-2998',
      releaseId: 3998,
      contentHash: 'hash-2998',
      deliveredAt: 1000000 - 2998,
    });
    // The highest position given is kept beside the controls (not one of them).
    expect(await store.controls?.()).toEqual({});
    expect(check.prepare("SELECT value FROM release_outbox_controls WHERE name = 'feed-position'").get()).toEqual({ value: '1000' });
    await store.close();
    // Opened again (and a step run again on a current file) changes nothing.
    const again = sqliteOutboxStore({ file });
    expect(await again.deliveries?.({ after: 998, limit: 10 })).toHaveLength(2);
    await again.close();
    expect(check.prepare('SELECT sql FROM sqlite_schema WHERE name = ?').get('release_outbox')).toEqual({
      sql: expect.stringContaining("CHECK (state IN ('pending', 'delivered', 'dead', 'cancelled'))"),
    });
    check.close();
  });

  it('refuses a file whose state CHECK it did not write, saying why, and leaves it as it was', () => {
    const file = join(dir, `foreign-${++files}.db`);
    const db = new Driver(file);
    db.exec(V5.replace("CHECK (state IN ('pending', 'delivered', 'dead'))", "CHECK (state <> '')"));
    db.pragma('user_version = 5');
    db.close();
    expect(() => sqliteOutboxStore({ file })).toThrow(/state CHECK is not the one this package created/);
    const check = new Driver(file, { readonly: true });
    expect(check.pragma('user_version', { simple: true })).toBe(5);
    expect(check.prepare("SELECT COUNT(*) AS n FROM pragma_table_info('release_outbox') WHERE name = 'feed_position'").get()).toEqual({ n: 0 });
    check.close();
  });
});

describe('what SQLite reads for the feed and a cancel', () => {
  it('stamps and reads the feed through the feed index, in its order; finds a cancel’s row by a seek', async () => {
    const file = join(dir, `plans-${++files}.db`);
    await sqliteOutboxStore({ file }).close();
    const db = new Driver(file);
    // Many rows of other states, as the planner should expect them.
    db.exec(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 2000)
      INSERT INTO release_outbox (panel, remote_track_id, body, content_hash, state, next_attempt_at, created_at, updated_at, delivered_at, feed_position)
      SELECT 'p' || (i % 7), 't' || i, '{}', 'h', CASE WHEN i % 4 = 0 THEN 'delivered' ELSE 'pending' END, 0, i, i,
        CASE WHEN i % 4 = 0 THEN i END, CASE WHEN i % 8 = 0 THEN i END FROM c`);
    db.exec('ANALYZE');
    const plan = (sql: string) => {
      const names = [...new Set([...sql.matchAll(/@(\w+)/g)].map((match) => match[1] as string))];
      const positional = (sql.match(/\?/g) ?? []).length;
      const explain = db.prepare(`EXPLAIN QUERY PLAN ${sql}`);
      const rows = names.length > 0 ? explain.all(Object.fromEntries(names.map((name) => [name, 1]))) : explain.all(...Array(positional).fill(1));
      return (rows as { detail: string }[]).map((row) => row.detail).join(' | ');
    };
    for (const sql of [FEED_SQL.read, FEED_SQL.readOfPanel, FEED_SQL.anyUnstamped, FEED_SQL.stamp]) {
      expect(plan(sql), sql).toMatch(/USING (COVERING )?INDEX release_outbox_feed \(feed_position/);
      expect(plan(sql), sql).not.toMatch(/TEMP B-TREE|SCAN release_outbox/);
    }
    for (const sql of [OPERATION_SQL.pendingOfTrack, OPERATION_SQL.newestOfTrack])
      expect(plan(sql), sql).toMatch(/^SEARCH release_outbox USING INDEX release_outbox_panel_track \(panel=\? AND remote_track_id=\?/);
    expect(plan(OPERATION_SQL.cancel)).toMatch(/^SEARCH release_outbox USING INTEGER PRIMARY KEY/);
    db.close();
  });
});

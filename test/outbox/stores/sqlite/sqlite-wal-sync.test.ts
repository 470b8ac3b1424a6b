import { existsSync, mkdirSync, mkdtempSync, readdirSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadSqliteDriver } from '../../../../src/db/sqlite-driver.js';
import { sqliteGroupCommit } from '../../../../src/outbox/stores/sqlite/sqlite-group-commit.js';
import { sqliteOutboxStore } from '../../../../src/outbox/stores/sqlite/sqlite-store.js';
import { type WalSync, walPathOf, walSync } from '../../../../src/outbox/stores/sqlite/sqlite-wal-sync.js';

// An enqueue on SQLite commits without waiting for the disk on the node thread, and resolves once
// an fdatasync of the WAL file (in libuv's thread pool) has put it there.
const dir = mkdtempSync(join(tmpdir(), 'outbox-wal-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A WAL file with one `rows (track <column>)` table, and group commits that store each enqueue's track in it. */
function tracksTable(name: string, column: string, wal?: WalSync) {
  const db = new (loadSqliteDriver())(join(dir, name));
  db.pragma('journal_mode = WAL');
  db.exec(`CREATE TABLE rows (track ${column})`);
  const insert = db.prepare('INSERT INTO rows (track) VALUES (?)');
  const tracks = () => (db.prepare('SELECT track FROM rows ORDER BY rowid').all() as { track: string }[]).map((row) => row.track);
  const commits = sqliteGroupCommit(
    db,
    (row) => ({ id: Number(insert.run(row.remoteTrackId).lastInsertRowid), state: 'pending', releaseId: undefined, deduplicated: undefined }),
    (write) => write(),
    wal,
  );
  return { db, tracks, commits };
}
const row = (track: string) => ({ panel: 'p', remoteTrackId: track, body: '{}', contentHash: track });

describe('syncing the SQLite WAL off the node thread', () => {
  it('syncs the WAL beside the real file when the outbox is opened through a symbolic link', () => {
    const real = join(dir, 'real');
    mkdirSync(real);
    const link = join(dir, 'link');
    symlinkSync(real, link);
    const Driver = loadSqliteDriver();
    const db = new Driver(join(link, 'outbox.db'));
    try {
      db.pragma('journal_mode = WAL');
      db.exec('CREATE TABLE t (x INTEGER)');
      expect(walPathOf(db)).toBe(join(real, 'outbox.db-wal'));
      expect(existsSync(join(real, 'outbox.db-wal'))).toBe(true);
    } finally {
      db.close();
    }
    const memory = new Driver(':memory:');
    expect(walPathOf(memory)).toBeUndefined();
    memory.close();
  });

  it('fails a sync whose file cannot be opened, and opens it at the next sync once it can', async () => {
    const path = join(dir, 'late.db-wal');
    const sync = walSync(path);
    await expect(sync.durable()).rejects.toMatchObject({ code: 'ENOENT' });
    writeFileSync(path, 'frames');
    await expect(sync.durable()).resolves.toBeUndefined();
    await sync.settled();
  });

  it('answers every caller of a burst, each only after a sync that began after its call', async () => {
    const path = join(dir, 'burst.db-wal');
    writeFileSync(path, '');
    const sync = walSync(path);
    const order: string[] = [];
    const first = sync.durable().then(() => order.push('first'));
    // Arrives while the first sync runs: must wait for the next one, which the rest share.
    const later = Array.from({ length: 20 }, (_, i) => sync.durable().then(() => order.push(`later-${i}`)));
    await Promise.all([first, ...later]);
    expect(order[0]).toBe('first');
    expect(order).toHaveLength(21);
    await sync.settled();
  });

  it('keeps every enqueue of a burst, and every one made just before close()', async () => {
    const file = join(dir, 'outbox.db');
    const store = sqliteOutboxStore({ file });
    const enqueue = (i: number) =>
      store.enqueue({ panel: 'panel-wal', remoteTrackId: `t-${i}`, body: JSON.stringify({ release: { title: `T${i}` } }), contentHash: `h-${i}` }, Date.now());
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => enqueue(i)));
    expect(new Set(results.map((result) => result.id)).size).toBe(200);
    expect(results.every((result) => result.state === 'pending' && result.deduplicated === undefined)).toBe(true);
    // Committed and waiting for their sync when close() is called...
    const syncing = Array.from({ length: 25 }, (_, i) => enqueue(200 + i));
    await new Promise((resolve) => setImmediate(resolve));
    // ...and not committed yet.
    const waiting = Array.from({ length: 25 }, (_, i) => enqueue(225 + i));
    await store.close();
    await expect(Promise.all([...syncing, ...waiting])).resolves.toHaveLength(50);
    // SQLite checkpointed and removed the WAL at close: the sync's file handle did not keep it.
    expect(existsSync(`${file}-wal`)).toBe(false);
    const reopened = sqliteOutboxStore({ file });
    try {
      expect(await reopened.counts()).toMatchObject({ pending: 250 });
    } finally {
      await reopened.close();
    }
  });

  it('fails every sync after one has failed: a later one could succeed without the failed frames on disk', async () => {
    // fdatasync of a character device fails (EINVAL), as a disk's failed writeback would.
    const sync = walSync('/dev/null');
    await expect(sync.durable()).rejects.toMatchObject({ code: 'EINVAL' });
    expect(sync.failed()).toMatchObject({ code: 'EINVAL' });
    await expect(sync.durable()).rejects.toMatchObject({ code: 'EINVAL' });
    await sync.settled();
    await expect(sync.durable()).rejects.toThrow(/closed/);
  });

  it('rejects the enqueues of a batch whose sync failed, and refuses later ones without storing them', async () => {
    const { db, tracks, commits } = tracksTable('failing.db', 'TEXT', walSync('/dev/null'));
    const stored = () => tracks().length;
    try {
      const first = await Promise.allSettled([commits.enqueue(row('a'), 0), commits.enqueue(row('b'), 0)]);
      expect(first.map((result) => result.status)).toEqual(['rejected', 'rejected']);
      expect(String((first[0] as PromiseRejectedResult).reason)).toMatch(/could not be synced to disk.*may or may not be stored.*closed and opened again/);
      expect(stored()).toBe(2);
      await expect(commits.enqueue(row('c'), 0)).rejects.toThrow(/could not be synced to disk.*was not stored/);
      expect(stored()).toBe(2);
    } finally {
      await commits.close();
      db.close();
    }
  });

  it('stores the rest of a batch when one of its rows fails, and rejects only the caller of that row', async () => {
    const { db, tracks, commits } = tracksTable('one-bad-row.db', "TEXT NOT NULL CHECK (track <> 'bad')");
    try {
      // One turn of the event loop: one batch, whose first write fails at its second row.
      const results = await Promise.allSettled(['a', 'bad', 'c'].map((track) => commits.enqueue(row(track), 0)));
      expect(results.map((result) => result.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
      expect(String((results[1] as PromiseRejectedResult).reason)).toMatch(/CHECK constraint failed/);
      // Written once each: the failed first write left nothing behind.
      expect(tracks()).toEqual(['a', 'c']);
      const ids = results.flatMap((result) => (result.status === 'fulfilled' ? [result.value.id] : []));
      expect(ids).toHaveLength(2);
      expect(new Set(ids).size).toBe(2);
    } finally {
      await commits.close();
      db.close();
    }
  });

  it('refuses enqueues made while the store closes, and leaves no handle on the WAL file', async () => {
    const file = join(dir, 'closing.db');
    const store = sqliteOutboxStore({ file });
    const enqueue = (i: number) =>
      store.enqueue({ panel: 'panel-wal', remoteTrackId: `t-${i}`, body: JSON.stringify({ release: { title: `T${i}` } }), contentHash: `h-${i}` }, Date.now());
    await Promise.all(Array.from({ length: 20 }, (_, i) => enqueue(i)));
    const syncing = enqueue(20);
    await new Promise((resolve) => setImmediate(resolve));
    const closed = store.close();
    await expect(enqueue(21)).rejects.toThrow(/closing; this enqueue was not stored/);
    await closed;
    await expect(syncing).resolves.toMatchObject({ state: 'pending' });
    const handles = readdirSync('/proc/self/fd').flatMap((fd) => {
      try {
        return [readlinkSync(join('/proc/self/fd', fd))];
      } catch {
        return [];
      }
    });
    expect(handles.filter((target) => target.includes('closing.db'))).toEqual([]);
  });
});

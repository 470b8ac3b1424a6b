import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadSqliteDriver } from '../src/outbox/sqlite-driver.js';
import { createSqliteOutboxStore } from '../src/outbox/sqlite-store.js';
import { walPathOf, walSync } from '../src/outbox/sqlite-wal-sync.js';

// An enqueue on SQLite commits without waiting for the disk on the node thread, and resolves once
// an fdatasync of the WAL file (in libuv's thread pool) has put it there.
const dir = mkdtempSync(join(tmpdir(), 'outbox-wal-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

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
    const store = createSqliteOutboxStore({ file });
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
    const reopened = createSqliteOutboxStore({ file });
    try {
      expect(await reopened.counts()).toMatchObject({ pending: 250 });
    } finally {
      await reopened.close();
    }
  });
});

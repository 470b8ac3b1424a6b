import { execFileSync } from 'node:child_process';
import { appendFileSync, chmodSync, mkdtempSync, readdirSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EXIT, type Io } from '../../../../src/cli/io.js';
import { main } from '../../../../src/cli/main.js';
import { loadSqliteDriver } from '../../../../src/db/sqlite-driver.js';
import { sqliteOutboxStore } from '../../../../src/outbox/stores/sqlite/sqlite-store.js';

/** A file with two rows, closed cleanly (no -wal/-shm left beside it). */
async function outboxFile(): Promise<{ dir: string; file: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'outbox-ro-'));
  const file = join(dir, 'outbox.db');
  const store = sqliteOutboxStore({ file });
  for (const title of ['One', 'Two']) {
    const body = JSON.stringify({ release: { title } });
    await store.enqueue({ panel: 'panel-a', remoteTrackId: undefined, body, contentHash: title }, Date.now());
  }
  await store.close();
  return { dir, file };
}

/**
 * Makes paths unwritable: chattr +i as root (root ignores file modes), chmod otherwise. Returns
 * an undo function, or null when this file system cannot make them unwritable here.
 */
function makeUnwritable(paths: string[]): (() => void) | null {
  const root = process.getuid?.() === 0;
  try {
    if (root) execFileSync('chattr', ['+i', ...paths], { stdio: 'ignore' });
    else for (const path of paths) chmodSync(path, 0o555);
  } catch {
    return null;
  }
  const undo = () => {
    if (root) execFileSync('chattr', ['-i', ...paths], { stdio: 'ignore' });
    else for (const path of paths) chmodSync(path, 0o755);
  };
  try {
    appendFileSync(paths[0] ?? '', '');
    appendFileSync(join(paths[paths.length - 1] ?? '', 'probe'), '');
  } catch {
    return undo;
  }
  undo();
  return null;
}

function fakeIo() {
  const out: string[] = [];
  const err: string[] = [];
  const io: Io = { out: (l) => out.push(l), err: (l) => err.push(l), write: () => {}, env: {}, isTTY: false };
  return { io, out, err };
}

describe('the SQLite outbox without write access', () => {
  for (const [what, dirToo] of [
    ['a read-only file', false],
    ['a read-only file in a read-only directory', true],
  ] as const) {
    it(`lists and counts ${what}`, async (ctx) => {
      const { dir, file } = await outboxFile();
      const undo = makeUnwritable(dirToo ? [file, dir] : [file]);
      if (!undo) return ctx.skip('cannot make a file unwritable on this file system (chattr/chmod had no effect)');
      try {
        const store = sqliteOutboxStore({ file, readonly: true });
        expect(await store.counts()).toEqual({ pending: 2, delivered: 0, dead: 0, cancelled: 0 });
        expect((await store.list({ state: undefined, limit: 10 })).map((row) => row.id)).toEqual([1, 2]);
        expect(() => store.enqueue({ panel: 'panel-a', remoteTrackId: undefined, body: '{}', contentHash: 'x' }, 0)).toThrow(
          /opened read-only; enqueue\(\) needs it opened for writing/,
        );
        await store.close();
        const { io, out } = fakeIo();
        expect(await main(['outbox', '--outbox', file], io)).toBe(EXIT.ok);
        expect(out[0]).toBe('pending 2 · delivered 0 · dead 0 · cancelled 0');
      } finally {
        undo();
      }
    });
  }

  it('opens a current file for writing without writing anything', async (ctx) => {
    const { file } = await outboxFile();
    const undo = makeUnwritable([file]);
    if (!undo) return ctx.skip('cannot make a file unwritable on this file system (chattr/chmod had no effect)');
    try {
      // SQLite falls back to reading; the open must not need a write transaction.
      const store = sqliteOutboxStore({ file });
      expect(await store.counts()).toMatchObject({ pending: 2 });
      await store.close();
    } finally {
      undo();
    }
  });

  it('reads through a symbolic link from the real file, and leaves no snapshot behind', async (ctx) => {
    const { dir, file } = await outboxFile();
    // The newest row only in the -wal: a writer still has the file open.
    const writer = sqliteOutboxStore({ file });
    await writer.enqueue(
      { panel: 'panel-a', remoteTrackId: undefined, body: JSON.stringify({ release: { title: 'Three' } }), contentHash: 'three' },
      Date.now(),
    );
    const linkDir = mkdtempSync(join(tmpdir(), 'outbox-link-'));
    const link = join(linkDir, 'outbox.db');
    symlinkSync(file, link);
    const snapshotsBefore = readdirSync(tmpdir()).filter((name) => name.startsWith('panel-outbox-snapshot-')).length;
    const undo = makeUnwritable([file, dir]);
    if (!undo) return ctx.skip('cannot make a file unwritable on this file system (chattr/chmod had no effect)');
    try {
      const store = sqliteOutboxStore({ file: link, readonly: true });
      expect(await store.counts()).toMatchObject({ pending: 3 });
      await store.close();
    } finally {
      undo();
      await writer.close();
    }
    expect(readdirSync(tmpdir()).filter((name) => name.startsWith('panel-outbox-snapshot-')).length).toBe(snapshotsBefore);
  });

  it('retry refuses a database that is not an outbox, and leaves it untouched', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'not-outbox-'));
    const file = join(dir, 'app.db');
    const Driver = loadSqliteDriver();
    const other = new Driver(file);
    other.exec('CREATE TABLE users (id INTEGER PRIMARY KEY)');
    other.close();
    const { io, err } = fakeIo();
    await expect(main(['outbox', 'retry', '--all-dead', '--outbox', file], io)).rejects.toThrow(/Cannot open the outbox .*app\.db: .*is not a release outbox/);
    expect(err).toEqual([]);
    const check = new Driver(file, { readonly: true });
    expect(check.pragma('journal_mode', { simple: true })).toBe('delete');
    expect(check.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all()).toEqual([{ name: 'users' }]);
    check.close();
  });

  it('says so when there is no outbox to list', async () => {
    const { io, err } = fakeIo();
    expect(await main(['outbox', '--outbox', join(tmpdir(), 'no-such-dir', 'outbox.db')], io)).toBe(EXIT.usage);
    expect(err[0]).toMatch(/There is no outbox at .*no-such-dir/);
  });
});

// Durable commits without blocking the event loop: a commit made with synchronous=NORMAL is in the
// WAL file but maybe not yet on the disk; an fdatasync of the WAL file puts it (and every commit
// before it) there. better-sqlite3 is synchronous, so with synchronous=FULL each enqueue's commit
// would wait for the disk on the node thread, holding up delivery meanwhile; here the wait runs in
// libuv's thread pool, and every commit made while one sync runs shares the next one. What a sync
// covered cannot be lost when SQLite later restarts the WAL: it does so only after a checkpoint
// has copied the frames into the database file and synced it (synchronous=NORMAL does that too).
import { close, fdatasync, open } from 'node:fs';
import { promisify } from 'node:util';
import type { SqliteDatabase } from '../../../db/sqlite-driver.js';

const openFile = promisify(open);
const syncData = promisify(fdatasync);
const closeFile = promisify(close);

export interface WalSync {
  /**
   * Resolves once every commit made before this call is on the disk. After one sync has failed,
   * every later call rejects with that failure (see walSync), as does a call after settled().
   */
  durable(): Promise<void>;
  /** The failure of a sync, once one has failed: nothing more may be committed and answered. */
  failed(): Error | undefined;
  /** Waits for the syncs under way and closes the WAL file (the store's close() then lets SQLite remove it). */
  settled(): Promise<void>;
}

/**
 * The WAL file of a database in WAL mode, as SQLite names it: the main file's full path (symbolic
 * links resolved, the `-wal` lives beside the real file) plus `-wal`. Undefined for `:memory:`.
 */
export function walPathOf(db: SqliteDatabase): string | undefined {
  const main = (db.pragma('database_list') as { name: string; file: string }[]).find((entry) => entry.name === 'main');
  return main?.file ? `${main.file}-wal` : undefined;
}

/**
 * One fdatasync at a time; a caller arriving while one runs waits for the next, which all such
 * callers share (their commits may have missed the running one). The WAL file is opened once, at
 * the first sync (a commit has created it by then), and kept: SQLite removes it only when the last
 * connection to the database closes, and this store's stays open until close(). Opened for
 * writing: Windows flushes only a handle with write access.
 *
 * A failed sync is final. To SQLite the failed batch is committed, and later commits are written
 * after its frames; Linux reports a failed writeback once and marks the pages clean, so a later
 * sync would succeed without those frames reaching the disk, and after a power loss recovery
 * would stop at the gap and drop every commit after it, answered or not. So nothing more is
 * answered as on disk: every later call rejects until the store is opened again.
 */
export function walSync(walPath: string): WalSync {
  let running: Promise<void> | undefined;
  let next: Promise<void> | undefined;
  let file: Promise<number> | undefined;
  let failure: Error | undefined;
  let closed = false;
  async function syncOnce(): Promise<void> {
    if (failure) throw failure;
    file ??= openFile(walPath, 'r+');
    // A failed open is tried again at the next sync: nothing was answered from it.
    const fd = await file.catch((error: unknown) => {
      file = undefined;
      throw error;
    });
    try {
      await syncData(fd);
    } catch (error) {
      failure ??= error as Error;
      throw failure;
    }
  }
  function start(): Promise<void> {
    const sync = syncOnce().finally(() => {
      if (running === sync) running = undefined;
    });
    running = sync;
    return sync;
  }
  return {
    durable() {
      if (closed) return Promise.reject(new Error('panel-license-guard: the outbox file was closed before this enqueue reached the disk.'));
      if (failure) return Promise.reject(failure);
      if (running === undefined) return start();
      next ??= running
        .catch(() => {})
        .then(() => {
          next = undefined;
          return start();
        });
      return next;
    },
    failed: () => failure,
    async settled() {
      closed = true;
      while (running !== undefined || next !== undefined) await Promise.allSettled([running, next]);
      const fd = await file?.catch(() => undefined);
      file = undefined;
      if (fd !== undefined) await closeFile(fd);
    },
  };
}

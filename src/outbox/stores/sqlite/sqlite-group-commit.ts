// Enqueues on SQLite, committed together and answered once on disk. Enqueues made in the same
// turn of the event loop (concurrent uploads) share one transaction; should one row fail, the
// batch is rolled back and written again with each row in its own savepoint (a nested
// better-sqlite3 transaction), so one failing row rejects only its own caller. The batch commits
// with synchronous=NORMAL and its callers resolve once the WAL is synced off the node thread
// (sqlite-wal-sync.ts): as durable as FULL, without the event loop waiting for the disk.

import type { SqliteDatabase } from '../../../db/sqlite-driver.js';
import { describeError } from '../../../logger.js';
import type { EnqueueLease, EnqueueResult, NewOutboxRow } from '../../store.js';
import { type WalSync, walPathOf, walSync } from './sqlite-wal-sync.js';

export interface GroupCommit {
  enqueue(row: NewOutboxRow, nowMs: number, lease?: EnqueueLease): Promise<EnqueueResult>;
  /** Commits the enqueues still waiting (with FULL, on this thread) and waits for the syncs under way. */
  close(): Promise<void>;
}

type Waiting = {
  row: NewOutboxRow;
  nowMs: number;
  lease: EnqueueLease | undefined;
  resolve: (result: EnqueueResult) => void;
  reject: (error: unknown) => void;
};
type Outcome = { ok: true; result: EnqueueResult } | { ok: false; error: unknown };

/**
 * A sync of the WAL failed: the batch is committed as far as SQLite knows but maybe not on disk,
 * and no later commit can be answered as on disk (sqlite-wal-sync.ts). Reopening the outbox reads
 * the file again.
 */
function notOnDisk(error: unknown, stored: 'maybe' | 'no'): Error {
  return new Error(
    `panel-license-guard: the outbox file could not be synced to disk (${describeError(error)}). ` +
      (stored === 'no' ? 'This release was not stored; ' : 'This release may or may not be stored; ') +
      'no more enqueues are accepted until the outbox is closed and opened again (check the disk), and an enqueue made again then is de-duplicated.',
    { cause: error },
  );
}

/** The WAL sync of a database: none for `:memory:` (no WAL file), whose commits are then made with FULL. */
export function walSyncOf(db: SqliteDatabase): WalSync | undefined {
  const walPath = walPathOf(db);
  return walPath === undefined ? undefined : walSync(walPath);
}

/**
 * `enqueueRow` is the store's enqueue, run inside the batch's transaction; `withFullSync` runs a
 * write with synchronous=FULL (without `wal`, and for close(), which must not leave a sync behind).
 */
export function sqliteGroupCommit(
  db: SqliteDatabase,
  enqueueRow: (row: NewOutboxRow, nowMs: number, lease?: EnqueueLease) => EnqueueResult,
  withFullSync: <T>(write: () => T) => T,
  wal: WalSync | undefined = walSyncOf(db),
): GroupCommit {
  let batch: Waiting[] = [];
  let closing = false;
  // Every row in one transaction: a savepoint per row would cost two statements more each, and
  // rows almost never fail one by one. A row that fails rolls the whole batch back (nothing of it
  // stored), and `rowFailed` says to write it again row by row.
  let rowFailed = false;
  const enqueueAll = db.transaction((waiting: Waiting[]) =>
    waiting.map(({ row, nowMs, lease }): Outcome => {
      try {
        return { ok: true, result: enqueueRow(row, nowMs, lease) };
      } catch (error) {
        rowFailed = true;
        throw error;
      }
    }),
  );
  const enqueueOne = db.transaction(enqueueRow);
  const enqueueEach = db.transaction((waiting: Waiting[]) =>
    waiting.map(({ row, nowMs, lease }): Outcome => {
      try {
        return { ok: true, result: enqueueOne(row, nowMs, lease) };
      } catch (error) {
        // Disk full, I/O errors and the like roll back the whole transaction, not just the
        // savepoint: then nothing of the batch is stored, so every caller must be rejected.
        if (!db.inTransaction) throw error;
        return { ok: false, error };
      }
    }),
  );

  function flush(fullSyncNow = false): void {
    const waiting = batch;
    batch = [];
    // close() flushed this batch already (its scheduled flush still runs), or the file is closed.
    if (waiting.length === 0 || !db.open) {
      for (const entry of waiting) entry.reject(new Error('panel-license-guard: the outbox store was closed before this enqueue was stored.'));
      return;
    }
    const syncAfter = wal !== undefined && !fullSyncNow;
    const write = () => {
      rowFailed = false;
      try {
        return enqueueAll.immediate(waiting);
      } catch (error) {
        // A busy lock or a failed commit is the batch's: every caller is rejected. A failed row
        // rolled the batch back: again, each row in its own savepoint, rejecting only those that fail.
        if (!rowFailed) throw error;
        return enqueueEach.immediate(waiting);
      }
    };
    let outcomes: Outcome[];
    try {
      outcomes = syncAfter ? write() : withFullSync(write);
    } catch (error) {
      for (const entry of waiting) entry.reject(error);
      return;
    }
    const answer = () => {
      for (const [i, outcome] of outcomes.entries()) {
        if (outcome.ok) waiting[i]?.resolve(outcome.result);
        else waiting[i]?.reject(outcome.error);
      }
    };
    if (!syncAfter || outcomes.every((outcome) => !outcome.ok)) {
      answer();
      return;
    }
    wal.durable().then(answer, (error: unknown) => {
      const failure = notOnDisk(error, 'maybe');
      for (const [i, outcome] of outcomes.entries()) waiting[i]?.reject(outcome.ok ? failure : outcome.error);
    });
  }

  return {
    enqueue: (row, nowMs, lease) =>
      new Promise<EnqueueResult>((resolve, reject) => {
        if (closing) throw new Error('panel-license-guard: the outbox store is closing; this enqueue was not stored.');
        // Not even committed: to SQLite it would follow frames that may not be on disk.
        const failed = wal?.failed();
        if (failed) throw notOnDisk(failed, 'no');
        if (batch.length === 0) setImmediate(flush);
        batch.push({ row, nowMs, lease, resolve, reject });
      }),
    async close() {
      closing = true;
      // Before SQLite checkpoints and removes the WAL file the syncs use.
      if (batch.length > 0 && db.open) flush(true);
      await wal?.settled();
    },
  };
}

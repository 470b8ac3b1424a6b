// Enqueues on SQLite, committed together and answered once on disk. Enqueues made in the same
// turn of the event loop (concurrent uploads) share one transaction, each in its own savepoint (a
// nested better-sqlite3 transaction), so one failing row rejects only its own caller. The batch
// commits with synchronous=NORMAL and its callers resolve once the WAL is synced off the node
// thread (sqlite-wal-sync.ts): as durable as FULL, without the event loop waiting for the disk.
import { describeError } from '../logger.js';
import type { SqliteDatabase } from './sqlite-driver.js';
import { walPathOf, walSync } from './sqlite-wal-sync.js';
import type { EnqueueResult, NewOutboxRow } from './store.js';

export interface GroupCommit {
  enqueue(row: NewOutboxRow, nowMs: number): Promise<EnqueueResult>;
  /** Commits the enqueues still waiting (with FULL, on this thread) and waits for the syncs under way. */
  close(): Promise<void>;
}

type Waiting = { row: NewOutboxRow; nowMs: number; resolve: (result: EnqueueResult) => void; reject: (error: unknown) => void };
type Outcome = { ok: true; result: EnqueueResult } | { ok: false; error: unknown };

/**
 * `enqueueOne` is the store's enqueue transaction (run nested, as a savepoint); `withFullSync`
 * runs a write with synchronous=FULL (a database without a WAL file, `:memory:`, has nothing to
 * sync afterwards, and close() must not leave a sync behind).
 */
export function sqliteGroupCommit(
  db: SqliteDatabase,
  enqueueOne: (row: NewOutboxRow, nowMs: number) => EnqueueResult,
  withFullSync: <T>(write: () => T) => T,
): GroupCommit {
  const walPath = walPathOf(db);
  const wal = walPath === undefined ? undefined : walSync(walPath);
  let batch: Waiting[] = [];
  const enqueueBatch = db.transaction((waiting: Waiting[]) =>
    waiting.map(({ row, nowMs }): Outcome => {
      try {
        return { ok: true, result: enqueueOne(row, nowMs) };
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
    const syncAfter = wal !== undefined && !fullSyncNow;
    let outcomes: Outcome[];
    try {
      outcomes = syncAfter ? enqueueBatch.immediate(waiting) : withFullSync(() => enqueueBatch.immediate(waiting));
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
      const failure = new Error(
        `panel-license-guard: the outbox file could not be synced to disk (${describeError(error)}); the release may not be stored, enqueue it again.`,
        { cause: error },
      );
      for (const entry of waiting) entry.reject(failure);
    });
  }

  return {
    enqueue: (row, nowMs) =>
      new Promise<EnqueueResult>((resolve, reject) => {
        if (batch.length === 0) setImmediate(flush);
        batch.push({ row, nowMs, resolve, reject });
      }),
    async close() {
      // Before SQLite checkpoints and removes the WAL file the syncs use.
      if (batch.length > 0 && db.open) flush(true);
      await wal?.settled();
    },
  };
}

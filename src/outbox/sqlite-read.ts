// Reading the SQLite outbox: rows as the OutboxStore interface returns them, and a read-only store.
import type { SqliteDatabase } from './sqlite-driver.js';
import { closeOutboxDatabase } from './sqlite-schema.js';
import { OUTBOX_STATES, type OutboxState, type OutboxStore, type StoredRow } from './store.js';

interface RowRecord {
  id: number;
  state: OutboxState;
  remote_track_id: string | null;
  body: string;
  content_hash: string;
  attempts: number;
  next_attempt_at: number;
  last_error: string | null;
  release_id: number | null;
  lease_owner: string | null;
  lease_expires_at: number | null;
  created_at: number;
  updated_at: number;
  delivered_at: number | null;
}

export const orUndefined = <T>(value: T | null): T | undefined => (value === null ? undefined : value);
export const orNull = <T>(value: T | undefined): T | null => (value === undefined ? null : value);

function toStoredRow(record: RowRecord): StoredRow {
  return {
    id: record.id,
    state: record.state,
    remoteTrackId: orUndefined(record.remote_track_id),
    body: record.body,
    contentHash: record.content_hash,
    attempts: record.attempts,
    nextAttemptAt: record.next_attempt_at,
    lastError: orUndefined(record.last_error),
    releaseId: orUndefined(record.release_id),
    leaseOwner: orUndefined(record.lease_owner),
    leaseExpiresAt: orUndefined(record.lease_expires_at),
    createdAt: record.created_at,
    updatedAt: record.updated_at,
    deliveredAt: orUndefined(record.delivered_at),
  };
}

/** counts() and list(), shared by the writable and the read-only store. */
export function createReaders(db: SqliteDatabase): Pick<OutboxStore, 'counts' | 'list' | 'oldestPending'> {
  const countsQuery = db.prepare('SELECT state, COUNT(*) AS count FROM release_outbox GROUP BY state');
  const oldestQuery = db.prepare("SELECT MIN(created_at) AS at FROM release_outbox WHERE state = 'pending'");
  const listAll = db.prepare('SELECT * FROM release_outbox ORDER BY id LIMIT ?');
  const listState = db.prepare('SELECT * FROM release_outbox WHERE state = ? ORDER BY id LIMIT ?');
  const byId = db.prepare('SELECT * FROM release_outbox WHERE id = ?');
  return {
    counts() {
      const counts = Object.fromEntries(OUTBOX_STATES.map((state) => [state, 0])) as Record<OutboxState, number>;
      for (const { state, count } of countsQuery.all() as { state: OutboxState; count: number }[]) counts[state] = count;
      return counts;
    },
    oldestPending() {
      const { at } = oldestQuery.get() as { at: number | null };
      return at ?? undefined;
    },
    list({ state, limit, id }) {
      if (id !== undefined) return (byId.all(id) as RowRecord[]).filter((record) => state === undefined || record.state === state).map(toStoredRow);
      const records = (state === undefined ? listAll.all(limit) : listState.all(state, limit)) as RowRecord[];
      return records.map(toStoredRow);
    },
  };
}

/** A store over a database opened read-only: listing and counts work, every write says why it cannot. */
export function readOnlyStore(db: SqliteDatabase, file: string): OutboxStore {
  const refuse = (method: string) => () => {
    throw new Error(`panel-license-guard: the outbox ${file} was opened read-only; ${method}() needs it opened for writing.`);
  };
  return {
    ...createReaders(db),
    enqueue: refuse('enqueue'),
    claimDue: refuse('claimDue'),
    settle: refuse('settle'),
    requeueDead: refuse('requeueDead'),
    close() {
      // Also removes the private snapshot the database was read from, if it was.
      closeOutboxDatabase(db);
    },
  };
}

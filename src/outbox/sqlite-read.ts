// Reading the SQLite outbox: rows as the OutboxStore interface returns them, and a read-only store.
import type { SqliteDatabase } from './sqlite-driver.js';
import { closeOutboxDatabase } from './sqlite-schema.js';
import { OUTBOX_STATES, type OutboxState, type OutboxStore, type StoredRow } from './store.js';

interface RowRecord {
  id: number;
  /** Missing in a file older than schema v3 (opened read-only). */
  panel?: string;
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
    panel: record.panel ?? '',
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

/** counts(), list() and the panel counts, shared by the writable and the read-only store. */
export function createReaders(db: SqliteDatabase): Pick<OutboxStore, 'counts' | 'list' | 'oldestPending' | 'panelCounts'> {
  // A file older than v3 (read-only) has no panel column: every row reads as unassigned ('').
  const hasPanel = (db.prepare("SELECT 1 AS found FROM pragma_table_info('release_outbox') WHERE name = 'panel'").get() as unknown) !== undefined;
  const panel = hasPanel ? 'panel' : "''";
  const inScope = `(@panel IS NULL OR ${panel} = @panel)`;
  const countsQuery = db.prepare(`SELECT state, COUNT(*) AS count FROM release_outbox WHERE ${inScope} GROUP BY state`);
  const oldestQuery = db.prepare(`SELECT MIN(created_at) AS at FROM release_outbox WHERE state = 'pending' AND ${inScope}`);
  const listQuery = db.prepare(`SELECT * FROM release_outbox WHERE (@state IS NULL OR state = @state) AND ${inScope}
    AND (@track IS NULL OR remote_track_id = @track) AND (@afterId IS NULL OR id > @afterId) ORDER BY id LIMIT @limit`);
  const byId = db.prepare('SELECT * FROM release_outbox WHERE id = ?');
  const panelCountsQuery = db.prepare(`SELECT ${panel} AS panel, SUM(state = 'pending') AS pending, SUM(state = 'dead') AS dead,
    MIN(CASE WHEN state = 'pending' THEN created_at END) AS oldestPendingAt
    FROM release_outbox WHERE state IN ('pending', 'dead') GROUP BY 1 ORDER BY pending DESC, dead DESC, 1 LIMIT ?`);
  const scope = (given: { panel?: string | undefined } | undefined) => ({ panel: given?.panel ?? null });
  return {
    counts(given) {
      const counts = Object.fromEntries(OUTBOX_STATES.map((state) => [state, 0])) as Record<OutboxState, number>;
      for (const { state, count } of countsQuery.all(scope(given)) as { state: OutboxState; count: number }[]) counts[state] = count;
      return counts;
    },
    oldestPending(given) {
      const { at } = oldestQuery.get(scope(given)) as { at: number | null };
      return at ?? undefined;
    },
    list({ state, limit, id, panel: only, track, afterId }) {
      if (id !== undefined)
        return (byId.all(id) as RowRecord[])
          .map(toStoredRow)
          .filter((row) => (state === undefined || row.state === state) && (only === undefined || row.panel === only))
          .filter((row) => (track === undefined || row.remoteTrackId === track) && (afterId === undefined || row.id > afterId));
      const filters = { track: track ?? null, afterId: afterId ?? null };
      return (listQuery.all({ state: state ?? null, limit, ...scope({ panel: only }), ...filters }) as RowRecord[]).map(toStoredRow);
    },
    panelCounts(limit) {
      return (panelCountsQuery.all(limit) as { panel: string; pending: number; dead: number; oldestPendingAt: number | null }[]).map((counts) => ({
        ...counts,
        oldestPendingAt: orUndefined(counts.oldestPendingAt),
      }));
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
    claimFair: refuse('claimFair'),
    adoptUnassigned: refuse('adoptUnassigned'),
    settle: refuse('settle'),
    requeueDead: refuse('requeueDead'),
    close() {
      // Also removes the private snapshot the database was read from, if it was.
      closeOutboxDatabase(db);
    },
  };
}

// Reading the SQLite outbox: rows as the OutboxStore interface returns them, and a read-only store.

import type { SqliteDatabase, SqliteStatement } from '../../../db/sqlite-driver.js';
import { OUTBOX_STATES, type OutboxState, type OutboxStore, type StoredRow } from '../../store.js';
import { OPERATION_SQL } from './sqlite-operations.js';
import { createPanelRanking } from './sqlite-panel-ranking.js';
import { closeOutboxDatabase } from './sqlite-schema.js';

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

/** Which of list()'s filters are set: each set of them has its own statement. */
interface ListFilters {
  state: OutboxState | undefined;
  panel: string | undefined;
  track: string | undefined;
  afterId: number | undefined;
}

function listKey({ state, panel, track, afterId }: ListFilters): string {
  return [state, panel, track, afterId].map((value) => (value === undefined ? '-' : '+')).join('');
}

/**
 * The SELECT of list() for a set of filters (`panelColumn`: `''` in a file older than v3). With a
 * state, it reads an index of that state in id order from `afterId` on — (state, id) (v4), or
 * (state, panel, id) and (state, remote_track_id, id) with one filter (v5) — so a page reads the
 * rows it returns and no other, whatever the table holds. With a panel and a track, it reads that
 * track's rows (a few: its pending row, its deliveries until retention prunes them).
 */
export function listSql({ state, panel, track, afterId }: ListFilters, panelColumn = 'panel'): string {
  const byTrack = panel !== undefined && track !== undefined;
  // With a state, one filter reads its own index (v5) in id order. Without one, the unary + keeps
  // SQLite on the id order: through an index it would sort every matching row, bodies and all.
  const indexed = state !== undefined || byTrack;
  const conditions = [
    state === undefined ? '' : 'state = @state',
    panel === undefined ? '' : `${indexed ? '' : '+'}${panelColumn} = @panel`,
    track === undefined ? '' : `${indexed ? '' : '+'}remote_track_id = @track`,
    afterId === undefined ? '' : 'id > @afterId',
  ].filter((condition) => condition !== '');
  const where = conditions.length === 0 ? '' : `WHERE ${conditions.join(' AND ')}`;
  return `SELECT * FROM release_outbox ${where} ORDER BY id LIMIT @limit`;
}

/** counts(), list() and the panel counts, shared by the writable and the read-only store. */
export function createReaders(db: SqliteDatabase): Pick<OutboxStore, 'counts' | 'list' | 'oldestPending' | 'panelCounts'> {
  // A file older than v3 (read-only) has no panel column: every row reads as unassigned ('').
  const hasPanel = (db.prepare("SELECT 1 AS found FROM pragma_table_info('release_outbox') WHERE name = 'panel'").get() as unknown) !== undefined;
  const panel = hasPanel ? 'panel' : "''";
  // Counts come from indexes alone (never a row's own page, whose body comes before its state).
  const countsOfAll = db.prepare('SELECT state, COUNT(*) AS count FROM release_outbox GROUP BY state');
  // Each state's rows of the panel, in the due index (the track index holds long track ids).
  const countsOfPanel = db.prepare(
    `SELECT state, COUNT(*) AS count FROM release_outbox WHERE state IN ('pending', 'delivered', 'dead', 'cancelled') AND ${panel} = ? GROUP BY state`,
  );
  // The oldest pending row is the one with the lowest id (ids follow the order rows are stored
  // in): found in an index, then its own row read for when it was stored.
  const oldestOfAll = db.prepare(`SELECT created_at AS at FROM release_outbox WHERE state = 'pending' ORDER BY id LIMIT 1`);
  const oldestOfPanel = db.prepare(
    `SELECT created_at AS at FROM release_outbox WHERE id = (SELECT MIN(id) FROM release_outbox WHERE state = 'pending' AND ${panel} = ?)`,
  );
  // One statement per set of filters, each with only the conditions it needs: an `(@x IS NULL OR …)`
  // form keeps SQLite off the indexes, and a scan reads every row's body (stored before `state`).
  const listQueries = new Map<string, SqliteStatement>();
  const listQuery = (filters: ListFilters) => {
    const key = listKey(filters);
    const known = listQueries.get(key);
    if (known !== undefined) return known;
    const query = db.prepare(listSql(filters, panel));
    listQueries.set(key, query);
    return query;
  };
  const byId = db.prepare('SELECT * FROM release_outbox WHERE id = ?');
  const panelCounts = createPanelRanking(db, panel);
  return {
    counts(given) {
      const counts = Object.fromEntries(OUTBOX_STATES.map((state) => [state, 0])) as Record<OutboxState, number>;
      const only = given?.panel;
      const rows = (only === undefined ? countsOfAll.all() : countsOfPanel.all(only)) as { state: OutboxState; count: number }[];
      for (const { state, count } of rows) counts[state] = count;
      return counts;
    },
    oldestPending(given) {
      const only = given?.panel;
      const oldest = (only === undefined ? oldestOfAll.get() : oldestOfPanel.get(only)) as { at: number } | undefined;
      return oldest?.at;
    },
    list({ state, limit, id, panel: only, track, afterId }) {
      if (id !== undefined)
        return (byId.all(id) as RowRecord[])
          .map(toStoredRow)
          .filter((row) => (state === undefined || row.state === state) && (only === undefined || row.panel === only))
          .filter((row) => (track === undefined || row.remoteTrackId === track) && (afterId === undefined || row.id > afterId));
      const filters = { state, panel: only, track, afterId };
      const given = Object.fromEntries(Object.entries(filters).filter(([, value]) => value !== undefined));
      return (listQuery(filters).all({ ...given, limit }) as RowRecord[]).map(toStoredRow);
    },
    panelCounts,
  };
}

/** A store over a database opened read-only: listing and counts work, every write says why it cannot. */
export function readOnlyStore(db: SqliteDatabase, file: string): OutboxStore {
  const refuse = (method: string) => () => {
    throw new Error(`panel-license-guard: the outbox ${file} was opened read-only; ${method}() needs it opened for writing.`);
  };
  // A file older than v6 has no controls (nothing paused); the feed stamps positions, a write.
  const hasControls = db.prepare("SELECT 1 AS found FROM sqlite_schema WHERE type = 'table' AND name = 'release_outbox_controls'").get() !== undefined;
  const controls = hasControls ? db.prepare(OPERATION_SQL.controls) : undefined;
  return {
    ...createReaders(db),
    controls: () => Object.fromEntries(((controls?.all() ?? []) as { name: string; value: string }[]).map(({ name, value }) => [name, value])),
    cancel: refuse('cancel'),
    setControl: refuse('setControl'),
    deliveries: refuse('deliveries'),
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

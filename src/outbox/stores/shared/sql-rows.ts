// How the SQL stores' rows read back, and the two conversions every statement's values need: the
// same columns on PostgreSQL and MySQL (SQLite names its own in its SQL).
import type { ClaimedRow, FeedRow, OutboxState, StoredRow } from '../../store.js';

export type Row = Record<string, unknown>;
/** A number column that may be NULL. */
export const num = (value: unknown) => (value === null || value === undefined ? undefined : Number(value));
/** An optional value as a statement takes it. */
export const orNull = <T>(value: T | undefined) => (value === undefined ? null : value);

export function storedRow(row: Row): StoredRow {
  return {
    id: Number(row.id),
    // Listing reads older tables as they are: before v4 no row has a panel.
    panel: (row.panel as string | undefined) ?? '',
    state: row.state as OutboxState,
    remoteTrackId: (row.remote_track_id as string | null) ?? undefined,
    body: row.body as string,
    contentHash: row.content_hash as string,
    attempts: Number(row.attempts),
    nextAttemptAt: Number(row.next_attempt_at),
    lastError: (row.last_error as string | null) ?? undefined,
    releaseId: num(row.release_id),
    leaseOwner: (row.lease_owner as string | null) ?? undefined,
    leaseExpiresAt: num(row.lease_expires_at),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    deliveredAt: num(row.delivered_at),
  };
}

export function claimedRow(r: Row): ClaimedRow {
  return {
    id: Number(r.id),
    panel: r.panel as string,
    remoteTrackId: (r.remote_track_id as string | null) ?? undefined,
    body: r.body as string,
    contentHash: r.content_hash as string,
    attempts: Number(r.attempts),
    traceContext: (r.trace_context as string | null | undefined) ?? undefined,
  };
}

/** A delivery as the feed reads it (`deliveries`). */
export function feedRow(r: Row): FeedRow {
  return {
    position: Number(r.feed_position),
    id: Number(r.id),
    panel: r.panel as string,
    remoteTrackId: (r.remote_track_id as string | null) ?? undefined,
    releaseId: num(r.release_id),
    contentHash: r.content_hash as string,
    deliveredAt: Number(r.delivered_at),
  };
}

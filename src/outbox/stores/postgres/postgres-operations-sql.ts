// The SQL of what operators do to a PostgreSQL outbox: cancel a release, shared control values,
// and the feed of deliveries (positions given under one lock, in the order deliveries committed).

import type { TableNames } from './postgres-schema.js';
import { DB_NOW_MS } from './postgres-sql.js';

/** The control row that holds the highest feed position given so far (its lock serializes stamping). */
export const FEED_COUNTER = 'feed-position';

/**
 * `clock`: the clock leases are reckoned on, as the claims do (postgres-sql.ts): a lease has
 * ended when `lease_expires_at` is at or before that clock's now. `$now` is the host's time.
 */
export function operationStatements({ table: t, controls }: TableNames, clock: 'database' | 'outbox') {
  const leaseNow = clock === 'database' ? DB_NOW_MS : '$2::bigint';
  // The lease's end as the host reckons it: on the database's clock, the same delay from the
  // host's now ($2), so a caller can compare it with its own clock.
  const leaseEndForHost = clock === 'database' ? `locked.lease_expires_at - ${DB_NOW_MS} + $2::bigint` : 'locked.lease_expires_at';
  /**
   * Cancels the pending row `match` finds, unless a worker holds its lease. FOR UPDATE waits for
   * a claim that holds the row and reads it as that claim left it (READ COMMITTED re-reads a row
   * it waited for), so the claim and the cancel never both win: the claim's own FOR UPDATE SKIP
   * LOCKED passes over a row being cancelled, then finds it no longer pending. $1 note, $2 now.
   */
  const cancelWhere = (match: string) => `WITH locked AS (
        SELECT id, lease_expires_at, (lease_expires_at IS NULL OR lease_expires_at <= ${leaseNow}) AS free
        FROM ${t} WHERE ${match} AND state = 'pending' FOR UPDATE),
      cancelled AS (
        UPDATE ${t} AS target SET state = 'cancelled', last_error = $1, lease_owner = NULL, lease_expires_at = NULL, updated_at = $2
        FROM locked WHERE target.id = locked.id AND locked.free RETURNING target.id)
      SELECT locked.id, cancelled.id IS NOT NULL AS done, CASE WHEN locked.free THEN NULL ELSE ${leaseEndForHost} END AS lease_ends
      FROM locked LEFT JOIN cancelled USING (id)`;
  const seen = 'SELECT id, state, release_id';
  return {
    // $3 id, $4 panel (null: any).
    cancelById: cancelWhere('id = $3 AND ($4::text IS NULL OR panel = $4)'),
    // $3 panel, $4 track: its pending row (at most one, the one-pending-row index says).
    cancelByTrack: cancelWhere('panel = $3 AND remote_track_id = $4'),
    // What a cancel that found nothing pending reports: the row, or the track's newest row.
    rowById: `${seen} FROM ${t} WHERE id = $1 AND ($2::text IS NULL OR panel = $2)`,
    newestOfTrack: `${seen} FROM ${t} WHERE panel = $1 AND remote_track_id = $2 ORDER BY id DESC LIMIT 1`,

    // The feed's counter is the store's own, not a control an operator sets.
    controls: `SELECT name, value FROM ${controls} WHERE name <> '${FEED_COUNTER}'`,
    setControl: `INSERT INTO ${controls} (name, value, updated_at) VALUES ($1, $2, $3)
      ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at`,
    removeControl: `DELETE FROM ${controls} WHERE name = $1`,

    // Whether any delivered row waits for a position: one probe of the partial index, no lock.
    unstamped: `SELECT EXISTS (SELECT 1 FROM ${t} WHERE state = 'delivered' AND feed_position IS NULL) AS waiting`,
    // The counter, locked until the stamping transaction ends. Created when missing, above every
    // position in the table (should the row have been removed, positions never start over).
    readCounter: `SELECT value::bigint AS top FROM ${controls} WHERE name = '${FEED_COUNTER}'`,
    lockCounter: `SELECT value::bigint AS top FROM ${controls} WHERE name = '${FEED_COUNTER}' FOR UPDATE`,
    createCounter: `INSERT INTO ${controls} (name, value, updated_at)
      SELECT '${FEED_COUNTER}', COALESCE(MAX(feed_position), 0)::text, ${DB_NOW_MS} FROM ${t} WHERE feed_position IS NOT NULL
      ON CONFLICT (name) DO NOTHING`,
    // Up to $2 delivered rows without a position get $1 + 1, $1 + 2, … in (delivered_at, id)
    // order. Its snapshot is taken after the counter's lock: it sees every position given before.
    // `feed_position IS NULL` is checked again on the row as it is when updated.
    stamp: `WITH batch AS (
        SELECT id, row_number() OVER (ORDER BY delivered_at, id) AS n FROM (
          SELECT id, delivered_at FROM ${t} WHERE state = 'delivered' AND feed_position IS NULL ORDER BY delivered_at, id LIMIT $2) AS unfed)
      UPDATE ${t} AS fed SET feed_position = $1::bigint + batch.n FROM batch WHERE fed.id = batch.id AND fed.feed_position IS NULL
      RETURNING fed.feed_position`,
    moveCounter: `UPDATE ${controls} SET value = $1, updated_at = ${DB_NOW_MS} WHERE name = '${FEED_COUNTER}'`,
    // Positions above $1 of one panel ($3): whether a page of $2 is there yet.
    panelAfter: `SELECT COUNT(*) AS n FROM (SELECT 1 FROM ${t} WHERE panel = $3 AND feed_position > $1 ORDER BY feed_position LIMIT $2) AS page`,

    feed: `SELECT feed_position, id, panel, remote_track_id, release_id, content_hash, delivered_at FROM ${t}
      WHERE feed_position > $1 ORDER BY feed_position LIMIT $2`,
    feedOfPanel: `SELECT feed_position, id, panel, remote_track_id, release_id, content_hash, delivered_at FROM ${t}
      WHERE panel = $3 AND feed_position > $1 ORDER BY feed_position LIMIT $2`,
  };
}

export type OperationStatements = ReturnType<typeof operationStatements>;

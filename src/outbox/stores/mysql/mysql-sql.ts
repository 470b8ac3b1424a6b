// The SQL of the MySQL/MariaDB outbox store, and how its rows read back. Every value is a
// placeholder (mysql-params.ts sends them apart from the text); lists have a placeholder per value.
import { withLists } from './mysql-params.js';
import type { MysqlTableNames } from './mysql-schema.js';

/**
 * The server's clock in epoch milliseconds (the one clock every host shares). UNIX_TIMESTAMP()
 * and NOW(6) are both the statement's start, so the two halves agree; neither goes through the
 * session's time zone (UNIX_TIMESTAMP(NOW()) would, and is ambiguous when clocks fall back).
 */
export const DB_NOW_MS = '(UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000)';
// Rows read back exactly as the PostgreSQL store's (same column names).
export { claimedRow, num, orNull, storedRow } from '../shared/sql-rows.js';

/**
 * `clock`: what leases and due times are reckoned on. `'database'`: the server's clock, the one
 * all hosts share (a host's own times become delays from it); `'outbox'`: the times the outbox
 * passes, for tests that simulate time. Every statement takes the host's now as its first value.
 */
/**
 * Which panel a read covers, without an empty string anywhere: MariaDB's EMPTY_STRING_IS_NULL,
 * set on a pooled session, turns an empty literal or parameter into NULL, so the unassigned
 * panel ('') is told by its length. Values (panelScope()): scoped, unassigned, the panel.
 */
const PANEL_SCOPE = '(? = 0 OR (? = 1 AND CHAR_LENGTH(panel) = 0) OR panel = ?)';

/** The values of PANEL_SCOPE for `panel` (undefined: every panel). */
export function panelScope(panel: string | undefined): [number, number, string | null] {
  if (panel === undefined) return [0, 0, null];
  return panel === '' ? [1, 1, null] : [1, 0, panel];
}

/** `(?, ?), (?, ?), …`: a pair of placeholders for each one of `marks` (`?, ?, …`). */
const pairsOf = (marks: string) => marks.replaceAll('?', '(?, ?)');

export function mysqlStatements({ table: t, tracks }: MysqlTableNames, clock: 'database' | 'outbox') {
  const onDatabase = clock === 'database';
  /** The host's now (the first value), on the clock leases are reckoned on. */
  const now = onDatabase ? `(${DB_NOW_MS} + 0 * ?)` : 'CAST(? AS SIGNED)';
  const COLUMNS = 'id, panel, remote_track_id, body, content_hash, attempts, next_attempt_at, trace_context';
  /** Due and not leased, on the lease clock (`now` stands for the statement's host time). */
  const dueNow = (alias: string, hostNow: string) =>
    `${alias}.state = 'pending' AND ${alias}.next_attempt_at <= ${hostNow} AND (${alias}.lease_expires_at IS NULL OR ${alias}.lease_expires_at <= ${hostNow})`;
  const settleRow = (conditions: string) => `UPDATE ${t} SET state = ?, attempts = ?,
        next_attempt_at = COALESCE(${onDatabase ? `${DB_NOW_MS} + (? - ?)` : '? + 0 * ?'}, next_attempt_at),
        last_error = ?, release_id = ?, delivered_at = ?, delivered_seq = CASE WHEN ? = 'delivered' THEN UUID_SHORT() ELSE delivered_seq END,
        lease_owner = ?, lease_expires_at = NULL, updated_at = ? WHERE id = ? ${conditions}`;
  const trackInOrder = `(candidate.remote_track_id IS NULL OR NOT EXISTS (
      SELECT 1 FROM ${t} AS older WHERE older.panel = candidate.panel AND older.remote_track_id = candidate.remote_track_id
        AND older.state = 'pending' AND older.id < candidate.id))`;
  return {
    /** The host's now (for statements built elsewhere). */
    now,
    // A track's lock: its row in the tracks table, taken (created if missing) and held until the
    // transaction ends, as PostgreSQL's transaction-scoped advisory lock is.
    lockTrack: `INSERT INTO ${tracks} (panel, remote_track_id) VALUES (?, ?) ON DUPLICATE KEY UPDATE panel = VALUES(panel)`,
    // Locking reads, after the track's lock: they read what is committed now, whatever the
    // transaction's isolation level (a caller's REPEATABLE READ snapshot may be older).
    newestPending: `SELECT id, content_hash FROM ${t} WHERE panel = ? AND pending_track = ? FOR UPDATE`,
    latestDelivered: `SELECT id, content_hash, release_id, history_of FROM ${t} WHERE panel = ? AND remote_track_id = ? AND state = 'delivered'
      ORDER BY delivered_seq DESC, id DESC LIMIT 1 FOR UPDATE`,
    // A locking read under the track's lock, as the two above: the track's newest dead release.
    newestDead: `SELECT id FROM ${t} WHERE panel = ? AND remote_track_id = ? AND state = 'dead' ORDER BY id DESC LIMIT 1 FOR UPDATE`,
    // The last value of each: the enqueue's trace context, or null (a replaced payload takes the newer one).
    replacePayload: `UPDATE ${t} SET body = ?, content_hash = ?, updated_at = ?, trace_context = ? WHERE id = ? AND state = 'pending'`,
    insertPending: `INSERT INTO ${t} (panel, remote_track_id, body, content_hash, state, attempts, next_attempt_at, created_at, updated_at, trace_context)
      VALUES (?, ?, ?, ?, 'pending', 0, ${now}, ?, ?, ?)`,
    // Through a library's `query`, a write's answer is not read: the caller's own statements may
    // run between it and a ROW_COUNT() (statement-transaction.ts). These read back what it did.
    // Values: id, content_hash, updated_at / panel, remote_track_id, content_hash, created_at.
    replacedRow: `SELECT id FROM ${t} WHERE id = ? AND state = 'pending' AND content_hash = ? AND updated_at = ?`,
    insertedRow: `SELECT MAX(id) AS id FROM ${t} WHERE panel = ? AND remote_track_id <=> ? AND content_hash = ? AND state = 'pending' AND created_at = ?`,
    // One panel's due rows, oldest due first, skipping rows another host is claiming; a track's
    // newer pending row waits for its older one. Values: panel, now, now, the excluded ids, limit.
    claim: withLists(
      (exclude) => `SELECT ${COLUMNS} FROM ${t} AS candidate
      WHERE candidate.panel = ? AND ${dueNow('candidate', now)} AND candidate.id NOT IN (${exclude}) AND ${trackInOrder}
      ORDER BY candidate.next_attempt_at, candidate.id LIMIT ? FOR UPDATE SKIP LOCKED`,
    ),
    // Values: owner, now, lease ms, ids.
    lease: withLists((ids) => `UPDATE ${t} SET lease_owner = ?, lease_expires_at = ${now} + ? WHERE id IN (${ids})`),
    // Panels with pending rows after a cursor, in id order (a loose scan of the due index).
    panelsAfter: `SELECT DISTINCT panel FROM ${t} WHERE state = 'pending' AND panel > ? ORDER BY panel LIMIT ?`,
    // From the first panel (the cursor is '': no empty string is sent, see PANEL_SCOPE).
    panelsFirst: `SELECT DISTINCT panel FROM ${t} WHERE state = 'pending' AND CHAR_LENGTH(panel) > 0 ORDER BY panel LIMIT ?`,
    panelsUpTo: `SELECT DISTINCT panel FROM ${t} WHERE state = 'pending' AND CHAR_LENGTH(panel) > 0 AND panel <= ? ORDER BY panel LIMIT ?`,
    // Each listed panel's first due rows, numbered in the order it would send them. Values: now,
    // now, panels, the excluded ids, limit; the caller keeps the first `limit` (1 for a probing panel).
    heads: withLists(
      (panels, exclude) => `SELECT ${COLUMNS}, turn FROM (
        SELECT candidate.*, ROW_NUMBER() OVER (PARTITION BY candidate.panel ORDER BY candidate.next_attempt_at, candidate.id) AS turn
        FROM ${t} AS candidate WHERE ${dueNow('candidate', now)} AND candidate.panel IN (${panels}) AND candidate.id NOT IN (${exclude}) AND ${trackInOrder}) AS due
      WHERE turn <= ?`,
    ),
    // The chosen rows, locked if still due and unleased (another host may have taken one meanwhile). Values: ids, now, now.
    lockChosen: withLists(
      (ids) => `SELECT ${COLUMNS} FROM ${t} AS candidate WHERE candidate.id IN (${ids}) AND ${dueNow('candidate', now)} FOR UPDATE SKIP LOCKED`,
    ),
    snapshot: `SELECT state, content_hash, lease_owner, next_attempt_at, release_id FROM ${t} WHERE id = ? FOR UPDATE`,
    // A payload delivered after its row took a newer one; it keeps who recorded it (the last value).
    insertDelivered: `INSERT INTO ${t} (panel, remote_track_id, body, content_hash, state, attempts, next_attempt_at, release_id, delivered_seq, history_of, delivered_at, created_at, updated_at, lease_owner)
      VALUES (?, ?, ?, ?, 'delivered', ?, ?, ?, UUID_SHORT(), ?, ?, ?, ?, ?)`,
    // Whether that owner already recorded that delivery (rules.ts, mayBeRecordedHistory).
    recordedHistory: `SELECT 1 FROM ${t} WHERE panel = ? AND remote_track_id = ? AND state = 'delivered'
      AND history_of = ? AND content_hash = ? AND lease_owner = ? AND release_id <=> ? LIMIT 1`,
    // The outcome of an attempt; ends the lease (a delivered or dead row keeps who recorded it:
    // rules.ts, RowUpdate). Deliveries are ordered by UUID_SHORT(), which only grows on a server:
    // the highest of a track is what the mother holds. Values: state, attempts, next attempt
    // (null: keep; a host time), now, error, release_id, delivered at, state, lease owner, now,
    // then the row's conditions.
    settle: settleRow(''),
    // The same, if the row is still as the worker claimed it. Then: content hash, owner.
    settleAsClaimed: settleRow("AND state = 'pending' AND content_hash = ? AND lease_owner = ?"),
    // Held rows replaced or no longer pending since they were claimed. Values: the ids, then the
    // same ids and their content hashes as claimed (a pair list: id, hash, id, hash, …).
    recheck: withLists(
      (ids) => `SELECT id, state, body, content_hash FROM ${t} WHERE id IN (${ids}) AND (state <> 'pending' OR (id, content_hash) NOT IN (${pairsOf(ids)}))`,
    ),
    deadRows: `SELECT id, panel, remote_track_id FROM ${t} WHERE state = 'dead' AND (? IS NULL OR id = ?) AND ${PANEL_SCOPE} ORDER BY id`,
    // rules.ts, mayRequeue: only the newest row of a track comes back (read under the track's lock).
    newerOfTrack: `SELECT 1 FROM ${t} WHERE panel = ? AND remote_track_id = ? AND id > ? AND (history_of IS NULL OR history_of <> ?) LIMIT 1`,
    requeue: `UPDATE ${t} SET state = 'pending', attempts = 0, next_attempt_at = ${now}, lease_owner = NULL, lease_expires_at = NULL, updated_at = ?
      WHERE id = ? AND state = 'dead'`,
    // Adoption of rows stored without a panel (''): see the other stores.
    supersededUnassigned: `SELECT old.id FROM ${t} AS old WHERE CHAR_LENGTH(old.panel) = 0 AND old.state = 'pending' AND old.remote_track_id IS NOT NULL AND EXISTS (
        SELECT 1 FROM ${t} AS theirs WHERE theirs.panel = ? AND theirs.remote_track_id = old.remote_track_id AND theirs.id > old.id)`,
    markSuperseded: withLists(
      (ids) =>
        `UPDATE ${t} SET state = 'dead', last_error = ?, lease_owner = NULL, lease_expires_at = NULL, updated_at = ? WHERE id IN (${ids}) AND state = 'pending'`,
    ),
    adopt: `UPDATE ${t} SET panel = ? WHERE CHAR_LENGTH(panel) = 0`,
    // Retention (rules.ts, mayPrune), one id range at a time. MySQL cannot delete from a table a
    // subquery of the same statement reads, so the rows are chosen first, then deleted if still as chosen.
    pruneRange: `SELECT (SELECT MAX(id) FROM (SELECT id FROM ${t} WHERE id > ? ORDER BY id LIMIT ?) AS examined) AS last_id, (SELECT MAX(id) FROM ${t}) AS highest_id`,
    // Cancelled rows go as dead ones do. With a feed being read (`feedHold` not null), a delivery
    // goes only once it has a position no higher than the one every feed acknowledged. Values:
    // after id, up to id, dead before, delivered before, feed hold, feed hold.
    prunable: `SELECT old.id FROM ${t} AS old WHERE old.id > ? AND old.id <= ? AND (
        (old.state IN ('dead', 'cancelled') AND old.updated_at < ?)
        OR (old.state = 'delivered' AND old.updated_at < ? AND (? IS NULL OR old.feed_position <= ?) AND (old.remote_track_id IS NULL OR EXISTS (
          SELECT 1 FROM ${t} AS newer WHERE newer.panel = old.panel AND newer.remote_track_id = old.remote_track_id AND newer.state = 'delivered'
            AND (COALESCE(newer.delivered_seq, 0) > COALESCE(old.delivered_seq, 0) OR (COALESCE(newer.delivered_seq, 0) = COALESCE(old.delivered_seq, 0) AND newer.id > old.id))))))`,
    prune: withLists(
      (ids) =>
        `DELETE FROM ${t} WHERE id IN (${ids}) AND ((state IN ('dead', 'cancelled') AND updated_at < ?) OR (state = 'delivered' AND updated_at < ? AND (? IS NULL OR feed_position <= ?)))`,
    ),
    counts: `SELECT state, COUNT(*) AS n FROM ${t} WHERE ${PANEL_SCOPE} GROUP BY state`,
    oldestPending: `SELECT MIN(created_at) AS at FROM ${t} WHERE state = 'pending' AND ${PANEL_SCOPE}`,
    list: `SELECT * FROM ${t} WHERE (? IS NULL OR state = ?) AND (? IS NULL OR id = ?) AND ${PANEL_SCOPE}
      AND (? IS NULL OR remote_track_id = ?) AND (? IS NULL OR id > ?) ORDER BY id LIMIT ?`,
    panelCounts: `SELECT panel, SUM(state = 'pending') AS pending, SUM(state = 'dead') AS dead, MIN(CASE WHEN state = 'pending' THEN created_at END) AS oldest_pending_at
      FROM ${t} WHERE state IN ('pending', 'dead') GROUP BY panel ORDER BY pending DESC, dead DESC, panel LIMIT ?`,
  };
}

export type MysqlStatements = ReturnType<typeof mysqlStatements>;

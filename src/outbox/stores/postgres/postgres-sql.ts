// The SQL of the PostgreSQL outbox store (`t` is the quoted table name); its rows read back as every SQL store's do (shared/sql-rows.ts).
import { createHash } from 'node:crypto';

export { claimedRow, num, orNull, type Row, storedRow } from '../shared/sql-rows.js';

import { CLAIMABLE, type PgPool, type PgQueryable, type PgQueryConfig, type TableNames } from './postgres-schema.js';

/** The database's clock in epoch milliseconds (the one clock every host shares). */
export const DB_NOW_MS = '(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint';
/** How long a batch of enqueues waits for a row another transaction holds before going row by row. */
const BATCH_LOCK_WAIT = '20ms';

/**
 * `OFFSET 0` keeps a NOT EXISTS a lookup per row (one seek of the one-pending-row index): as an
 * anti-join, on a table without statistics (new, or autovacuum off) the planner took pending rows
 * for rare and could read every pending row of the panel once per row instead.
 */
const PER_ROW = 'OFFSET 0';
/** A track's newer pending row waits for its older one (the candidate is aliased `candidate`; under OR, a lookup per row). */
const trackInOrder = (t: string) => `(candidate.remote_track_id IS NULL OR NOT EXISTS (
            SELECT 1 FROM ${t} AS older WHERE older.panel = candidate.panel AND older.remote_track_id = candidate.remote_track_id
              AND older.state = 'pending' AND older.id < candidate.id))`;
const CLAIMED =
  'claimed.id, claimed.panel, claimed.remote_track_id, claimed.body, claimed.content_hash, claimed.attempts, claimed.next_attempt_at, claimed.trace_context';

/**
 * `clock`: what leases and due times are reckoned on. `'database'`: the server's clock, the one
 * all hosts share (a host's own times become delays from it); `'outbox'`: the times the outbox
 * passes ($1 of a claim), for tests that simulate time.
 */
export function statements({ table: t, deliveries }: TableNames, clock: 'database' | 'outbox') {
  const onDatabase = clock === 'database';
  const leaseNow = onDatabase ? DB_NOW_MS : '$1';
  /** A time the host passed as `at`, taken at `hostNow`: the same delay on the database's clock. */
  const due = (at: string, hostNow: string) => (onDatabase ? `${DB_NOW_MS} + (${at}::bigint - ${hostNow}::bigint)` : at);
  // A claim's $1 (the host's time) is unused on the database's clock, but must keep a type.
  const hostTimeTyped = onDatabase ? ' AND $1::bigint IS NOT NULL' : '';
  /** The host's "now" passed as `hostNow`, on the database's clock. */
  const now = (hostNow: string) => (onDatabase ? DB_NOW_MS : hostNow);
  const nextDelivery = `nextval('${deliveries}')`;
  // The outcome of an attempt: state, attempts, next attempt (null: keep), error, release_id, delivered
  // at, now, owner (a delivered or dead row keeps who recorded it: RowUpdate). Ends the lease.
  // Deliveries are ordered by one sequence: the highest of a track is what the mother holds.
  const settled = (state: string, attempts: string, next: string, error: string, releaseId: string, deliveredAt: string, at: string, owner: string) =>
    `state = ${state}, attempts = ${attempts}, next_attempt_at = COALESCE(${due(next, at)}, next_attempt_at), last_error = ${error}, release_id = ${releaseId},
      delivered_at = ${deliveredAt}, delivered_seq = CASE WHEN ${state} = 'delivered' THEN ${nextDelivery} ELSE delivered_seq END,
      lease_owner = ${owner}, lease_expires_at = NULL, updated_at = ${at}`;
  const SETTLED = settled('$2', '$3', '$4', '$5', '$6', '$7', '$8', '$9');
  const TRACK_IN_ORDER = trackInOrder(t);
  return {
    // Settles that add a history row, and requeues, of one track take turns (until their
    // transaction ends). Enqueues need no lock: the one-pending-row index arbitrates them.
    // $1 table, $2 panel, $3 track.
    lockTrack: "SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2 || E'\\n' || $3))",
    // The newest pending row, the latest delivery and the newest dead row of a panel's track, in one round trip.
    trackRows: `SELECT * FROM
      (SELECT id AS pending_id, content_hash AS pending_hash FROM ${t} WHERE panel = $2 AND remote_track_id = $1 AND state = 'pending'
        ORDER BY id DESC LIMIT 1) AS pending
      FULL JOIN (SELECT id AS delivered_id, content_hash AS delivered_hash, release_id, history_of AS delivered_history_of FROM ${t}
          WHERE panel = $2 AND remote_track_id = $1 AND state = 'delivered'
        ORDER BY delivered_seq DESC NULLS LAST, id DESC LIMIT 1) AS delivered ON true
      CROSS JOIN (SELECT MAX(id) AS dead_id FROM ${t} WHERE panel = $2 AND remote_track_id = $1 AND state = 'dead') AS dead`,
    // Only while pending: a settle may have just delivered the row (the caller then reads again).
    // RETURNING: a transaction joined through a library's `query` learns what it changed from its rows.
    // $5: the newer enqueue's trace context (its content is what the delivery carries).
    replacePayload: `UPDATE ${t} SET body = $2, content_hash = $3, updated_at = $4, trace_context = $5 WHERE id = $1 AND state = 'pending' RETURNING id`,
    // The common case in one statement: a new or changed track. It inserts only when planEnqueue
    // would ('insert': no pending row, and the latest delivery differs), otherwise returns no row
    // and the rules run on what is read. Any pending row in the snapshot declines it: its WHERE is
    // judged once, on the snapshot, so an insert that waited for that row's delivery (or for a
    // transaction changing it) would queue content the mother may already hold. $6 and $7: a lease
    // for the enqueuing outbox's worker (EnqueueLease), or nulls. $8: the trace context, or null.
    insertIfNew: `INSERT INTO ${t} (panel, remote_track_id, body, content_hash, state, attempts, next_attempt_at, created_at, updated_at, lease_owner, lease_expires_at, trace_context)
      SELECT $5, $1, $2, $3, 'pending', 0, ${now('$4')}, $4, $4, $6::text, ${now('$4')} + $7::bigint, $8::text
      WHERE NOT EXISTS (SELECT 1 FROM ${t} WHERE panel = $5 AND remote_track_id = $1 AND state = 'pending')
        AND NOT EXISTS (SELECT 1 FROM (SELECT content_hash FROM ${t} WHERE panel = $5 AND remote_track_id = $1 AND state = 'delivered'
          ORDER BY delivered_seq DESC NULLS LAST, id DESC LIMIT 1) AS latest WHERE latest.content_hash = $3)
      ON CONFLICT (panel, remote_track_id) WHERE state = 'pending' DO NOTHING RETURNING id`,
    // insertIfNew for new tracks enqueued together: one statement and one commit for all. It waits
    // at most BATCH_LOCK_WAIT for another transaction's row (a caller's transaction holding one
    // of the tracks): then it fails, nothing of it is stored, and its rows go one by one, so one
    // track held by a caller never holds up the others (nor deadlocks with that caller). The
    // setting is local to this statement's own transaction, and read before the first row.
    // $1 tracks, $2 bodies, $3 content hashes, $4 panels, $5 host times, $6 lease owners and $7
    // lease lengths (ms) or nulls (EnqueueLease), $8 trace contexts or nulls; distinct tracks only.
    insertManyIfNew: `WITH wait AS MATERIALIZED (SELECT set_config('lock_timeout', '${BATCH_LOCK_WAIT}', true) AS lock_timeout)
      INSERT INTO ${t} (panel, remote_track_id, body, content_hash, state, attempts, next_attempt_at, created_at, updated_at, lease_owner, lease_expires_at, trace_context)
      SELECT v.panel, v.track, v.body, v.hash, 'pending', 0, ${now('v.at')}, v.at, v.at, v.owner, ${now('v.at')} + v.lease_ms, v.trace
      FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::bigint[], $8::text[])
        AS v(track, body, hash, panel, at, owner, lease_ms, trace)
        CROSS JOIN wait
      WHERE NOT EXISTS (SELECT 1 FROM ${t} WHERE panel = v.panel AND remote_track_id = v.track AND state = 'pending' ${PER_ROW})
        AND NOT EXISTS (SELECT 1 FROM (SELECT content_hash FROM ${t} WHERE panel = v.panel AND remote_track_id = v.track AND state = 'delivered'
          ORDER BY delivered_seq DESC NULLS LAST, id DESC LIMIT 1) AS latest WHERE latest.content_hash = v.hash)
      ON CONFLICT (panel, remote_track_id) WHERE state = 'pending' DO NOTHING RETURNING id, panel, remote_track_id`,
    // No row when the track got a pending row meanwhile (another host, another transaction):
    // the caller reads again and replaces that row's payload instead.
    // $6: the trace context, or null.
    insertPending: `INSERT INTO ${t} (panel, remote_track_id, body, content_hash, state, attempts, next_attempt_at, created_at, updated_at, trace_context)
      VALUES ($5, $1, $2, $3, 'pending', 0, ${now('$4')}, $4, $4, $6::text)
      ON CONFLICT (panel, remote_track_id) WHERE state = 'pending' DO NOTHING RETURNING id`,
    // One panel's due rows ($6), oldest due first, skipping rows another host is claiming right
    // now; a track's newer pending row waits for its older one (updates reach the mother in
    // order). Leases are reckoned on the database's clock, so hosts whose clocks disagree never
    // cut one short.
    claim: `WITH due AS (
        SELECT id FROM ${t} AS candidate
        WHERE state = 'pending' AND ${CLAIMABLE} AND panel = $6 AND next_attempt_at <= ${leaseNow}${hostTimeTyped} AND (lease_expires_at IS NULL OR lease_expires_at <= ${leaseNow})
          AND NOT (id = ANY($5::bigint[])) AND ${TRACK_IN_ORDER}
        ORDER BY next_attempt_at, id LIMIT $2
        FOR UPDATE SKIP LOCKED)
      UPDATE ${t} AS claimed SET lease_owner = $3, lease_expires_at = ${leaseNow} + $4 FROM due WHERE claimed.id = due.id
      RETURNING ${CLAIMED}`,
    // Across panels, fairly (fair-claim.ts): visit the panels with pending rows from after $6,
    // then from the first up to $6 (one index seek each; held panels $8 passed over uncounted),
    // at most $7 of them; take each visited panel's due rows (one for a probing panel, $9),
    // round-robin, $2 in all. The visit comes back as a row with a null id.
    claimFair: `WITH RECURSIVE after_cursor(panel, n, depth) AS (
        SELECT first.panel, CASE WHEN first.panel = ANY($8::text[]) THEN 0 ELSE 1 END, 1
          FROM (SELECT panel FROM ${t} WHERE state = 'pending' AND panel > $6 ORDER BY panel LIMIT 1) AS first
        UNION ALL
        SELECT next.panel, prev.n + CASE WHEN next.panel = ANY($8::text[]) THEN 0 ELSE 1 END, prev.depth + 1
          FROM after_cursor AS prev, LATERAL (SELECT panel FROM ${t} WHERE state = 'pending' AND panel > prev.panel ORDER BY panel LIMIT 1) AS next
          WHERE prev.n <= $7 AND prev.depth <= $7 + cardinality($8::text[])),
      from_start(panel, n, depth) AS (
        SELECT first.panel, CASE WHEN first.panel = ANY($8::text[]) THEN 0 ELSE 1 END, 1
          FROM (SELECT panel FROM ${t} WHERE state = 'pending' AND panel > '' AND panel <= $6 ORDER BY panel LIMIT 1) AS first
        UNION ALL
        SELECT next.panel, prev.n + CASE WHEN next.panel = ANY($8::text[]) THEN 0 ELSE 1 END, prev.depth + 1
          FROM from_start AS prev, LATERAL (SELECT panel FROM ${t} WHERE state = 'pending' AND panel > prev.panel AND panel <= $6 ORDER BY panel LIMIT 1) AS next
          WHERE prev.n <= $7 AND prev.depth <= $7 + cardinality($8::text[])),
      visit AS (
        SELECT panel, n AS visit_order FROM after_cursor WHERE NOT (panel = ANY($8::text[]))
        UNION ALL
        SELECT panel, n + (SELECT COALESCE(MAX(n), 0) FROM after_cursor) FROM from_start WHERE NOT (panel = ANY($8::text[]))),
      visited AS (SELECT panel, visit_order FROM visit WHERE visit_order <= $7),
      candidates AS (
        SELECT heads.id, visited.panel, visited.visit_order,
            row_number() OVER (PARTITION BY visited.panel ORDER BY heads.next_attempt_at, heads.id) AS turn
          FROM visited CROSS JOIN LATERAL (
            SELECT id, next_attempt_at FROM ${t} AS candidate
            WHERE candidate.state = 'pending' AND candidate.${CLAIMABLE} AND candidate.panel = visited.panel AND candidate.next_attempt_at <= ${leaseNow}
              AND (candidate.lease_expires_at IS NULL OR candidate.lease_expires_at <= ${leaseNow})
              AND NOT (candidate.id = ANY($5::bigint[])) AND ${TRACK_IN_ORDER}
            ORDER BY candidate.next_attempt_at, candidate.id
            LIMIT CASE WHEN visited.panel = ANY($9::text[]) THEN 1 ELSE $2 END) AS heads),
      -- Locked in round-robin order, skipping rows other claimers hold, re-checked on the row as it
      -- is now (another host may have leased or rescheduled it since this snapshot), then limited.
      chosen AS (
        SELECT locked.id, candidates.turn, candidates.visit_order FROM ${t} AS locked JOIN candidates ON candidates.id = locked.id
        WHERE locked.state = 'pending' AND locked.next_attempt_at <= ${leaseNow}${hostTimeTyped} AND (locked.lease_expires_at IS NULL OR locked.lease_expires_at <= ${leaseNow})
        ORDER BY candidates.turn, candidates.visit_order LIMIT $2
        FOR UPDATE OF locked SKIP LOCKED),
      claimed AS (
        UPDATE ${t} AS claimed SET lease_owner = $3, lease_expires_at = ${leaseNow} + $4 FROM chosen WHERE claimed.id = chosen.id
        RETURNING ${CLAIMED})
      SELECT claimed.*, chosen.turn, chosen.visit_order, NULL AS visited_panels FROM claimed JOIN chosen USING (id)
      UNION ALL
      SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, (SELECT array_agg(panel ORDER BY visit_order) FROM visit)`,
    snapshot: `SELECT state, content_hash, lease_owner, next_attempt_at, release_id FROM ${t} WHERE id = $1 FOR UPDATE`,
    peek: `SELECT state, content_hash, lease_owner, next_attempt_at, release_id FROM ${t} WHERE id = $1`,
    // A payload delivered after its row took a newer one; it keeps who recorded it ($9).
    insertDelivered: `INSERT INTO ${t} (remote_track_id, body, content_hash, state, attempts, next_attempt_at, release_id, delivered_seq, history_of, delivered_at, created_at, updated_at, panel, lease_owner)
      VALUES ($1, $2, $3, 'delivered', $4, $5, $6, ${nextDelivery}, $7, $5, $5, $5, $8, $9)`,
    // Whether that owner already recorded that delivery (rules.ts, mayBeRecordedHistory).
    recordedHistory: `SELECT 1 FROM ${t} WHERE panel = $1 AND remote_track_id = $2 AND state = 'delivered'
      AND history_of = $3 AND content_hash = $4 AND lease_owner = $5 AND release_id IS NOT DISTINCT FROM $6 LIMIT 1`,
    update: `UPDATE ${t} SET ${SETTLED} WHERE id = $1`,
    // Compare-and-set: applied only if the row is still as it was read ...
    updateIfUnchanged: `UPDATE ${t} SET ${SETTLED}
      WHERE id = $1 AND state = 'pending' AND content_hash = $10 AND lease_owner IS NOT DISTINCT FROM $11 AND next_attempt_at = $12`,
    // ... or as this worker claimed it (a null $4 keeps next_attempt_at, whatever it is).
    updateAsClaimed: `UPDATE ${t} SET ${SETTLED} WHERE id = $1 AND state = 'pending' AND content_hash = $10 AND lease_owner = $11`,
    // Many rows' outcomes in one statement, each applied only if its row is as this worker ($11)
    // claimed it. Rows locked by someone else (a caller's transaction replacing the payload) are
    // skipped, never waited for: the statement can take part in no deadlock, and the caller
    // settles what comes back missing one row at a time. Arrays: $1 id, $2 state, $3 attempts,
    // $4 next attempt, $5 error, $6 release_id, $7 delivered at, $8 now, $9 lease owner after,
    // $10 content hash.
    // The rows are found by id alone (state is checked on the locked row): given `state =
    // 'pending'` too, on a table without statistics the planner walked the one-pending-row
    // index (every pending row) for each batch, 40 % of the statement's pages with 3,000 pending.
    settleMany: `WITH mine AS (
        SELECT id FROM ${t} WHERE id = ANY($1::bigint[]) AND lease_owner = $11
        ORDER BY id FOR UPDATE SKIP LOCKED),
      given AS (
        SELECT * FROM unnest($1::bigint[], $2::text[], $3::int[], $4::bigint[], $5::text[], $6::bigint[], $7::bigint[], $8::bigint[], $9::text[], $10::text[])
          AS g(g_id, g_state, g_attempts, g_next, g_error, g_release, g_delivered_at, g_now, g_owner, g_hash))
      UPDATE ${t} AS target SET ${settled('g_state', 'g_attempts', 'g_next', 'g_error', 'g_release', 'g_delivered_at', 'g_now', 'g_owner')}
      FROM mine JOIN given ON given.g_id = mine.id WHERE target.id = mine.id AND target.state = 'pending' AND target.content_hash = given.g_hash
      RETURNING target.id`,
    // Held rows ($1 ids, $2 hashes as claimed) replaced or no longer pending since: a key lookup each.
    recheck: `SELECT held.id, held.state, held.body, held.content_hash FROM unnest($1::bigint[], $2::text[]) AS claimed(id, content_hash)
      JOIN ${t} AS held ON held.id = claimed.id WHERE held.state <> 'pending' OR held.content_hash <> claimed.content_hash`,
    deadRows: `SELECT id, panel, remote_track_id FROM ${t} WHERE state = 'dead' AND ($1::bigint IS NULL OR id = $1) AND ($2::text IS NULL OR panel = $2) ORDER BY id`,
    // Adoption of rows stored before v4 ('' panel): a pending one whose track the panel has stored
    // since (pending or delivered) gives way to that newer content, then every such row becomes the panel's.
    adoptSuperseded: `UPDATE ${t} AS old SET state = 'dead', last_error = $3, lease_owner = NULL, lease_expires_at = NULL, updated_at = $2
      WHERE old.panel = '' AND old.state = 'pending' AND old.remote_track_id IS NOT NULL AND EXISTS (
        SELECT 1 FROM ${t} AS theirs WHERE theirs.panel = $1 AND theirs.remote_track_id = old.remote_track_id AND theirs.id > old.id)`,
    adopt: `UPDATE ${t} SET panel = $1 WHERE panel = ''`,
    // Only the newest row of a track comes back (rules.ts, mayRequeue); run under the track's lock.
    requeue: `UPDATE ${t} AS dead SET state = 'pending', attempts = 0, next_attempt_at = ${now('$2')}, lease_owner = NULL, lease_expires_at = NULL, updated_at = $2
      WHERE id = $1 AND state = 'dead' AND (remote_track_id IS NULL OR NOT EXISTS (
        SELECT 1 FROM ${t} AS newer WHERE newer.panel = dead.panel AND newer.remote_track_id = dead.remote_track_id AND newer.id > dead.id
          AND newer.history_of IS DISTINCT FROM dead.id))`,
    // Retention (rules.ts, mayPrune), one id range at a time so a pass never holds locks for long.
    // Cancelled rows go as dead ones do; a delivered row only once every feed read it ($5, the
    // lowest position a feed acknowledged; null when no feed holds rows).
    prune: `WITH examined AS (SELECT id FROM ${t} WHERE id > $1 ORDER BY id LIMIT $2),
      deleted AS (
        DELETE FROM ${t} AS old WHERE old.id IN (SELECT id FROM examined) AND (
          (old.state IN ('dead', 'cancelled') AND old.updated_at < $4)
          OR (old.state = 'delivered' AND old.updated_at < $3 AND ($5::bigint IS NULL OR old.feed_position <= $5)
            AND (old.remote_track_id IS NULL OR EXISTS (
            SELECT 1 FROM ${t} AS newer WHERE newer.panel = old.panel AND newer.remote_track_id = old.remote_track_id AND newer.state = 'delivered'
              AND (COALESCE(newer.delivered_seq, 0), newer.id) > (COALESCE(old.delivered_seq, 0), old.id)))))
        RETURNING 1)
      SELECT (SELECT MAX(id) FROM examined) AS last_id, (SELECT COUNT(*) FROM deleted) AS deleted, (SELECT MAX(id) FROM ${t}) AS highest_id`,
  };
}

export type Statements = ReturnType<typeof statements>;

/**
 * Counting and listing, which read a table at any version without migrating it: `panel` is the
 * column, or `''` for a table older than v4 (where no row has a panel yet).
 */
export function readStatements(t: string, panel: 'panel' | "''") {
  return {
    counts: `SELECT state, COUNT(*) AS n FROM ${t} WHERE ($1::text IS NULL OR ${panel} = $1) GROUP BY state`,
    oldestPending: `SELECT MIN(created_at) AS at FROM ${t} WHERE state = 'pending' AND ($1::text IS NULL OR ${panel} = $1)`,
    list: `SELECT * FROM ${t} WHERE ($1::text IS NULL OR state = $1) AND ($2::bigint IS NULL OR id = $2) AND ($4::text IS NULL OR ${panel} = $4)
        AND ($5::text IS NULL OR remote_track_id = $5) AND ($6::bigint IS NULL OR id > $6)
      ORDER BY id LIMIT $3`,
    panelCounts: `SELECT ${panel} AS panel, COUNT(*) FILTER (WHERE state = 'pending') AS pending, COUNT(*) FILTER (WHERE state = 'dead') AS dead,
        MIN(created_at) FILTER (WHERE state = 'pending') AS oldest_pending_at
      FROM ${t} WHERE state IN ('pending', 'dead') GROUP BY 1 ORDER BY pending DESC, dead DESC, 1 LIMIT $1`,
  };
}

export type ReadStatements = ReturnType<typeof readStatements>;
const HOT = [
  'trackRows',
  'replacePayload',
  'insertPending',
  'insertIfNew',
  'insertManyIfNew',
  'updateAsClaimed',
  'settleMany',
  'peek',
  'updateIfUnchanged',
  'claim',
  'claimFair',
  'recheck',
] as const;
export type HotStatements = Record<(typeof HOT)[number], Required<Omit<PgQueryConfig, 'values'>>>;

/**
 * The statements of every release's path, prepared once per connection (PostgreSQL parses and
 * plans them once, not for each release). Named per table and lease clock (`key`): several
 * stores may share a pool.
 */
export function preparedStatements(sql: Statements, key: string): HotStatements {
  const prefix = `plg_${createHash('sha256').update(key).digest('hex').slice(0, 12)}`;
  return Object.fromEntries(HOT.map((name) => [name, { name: `${prefix}_${name}`, text: sql[name] }])) as HotStatements;
}

/** What the enqueue and settle halves of the store share. */
export interface PgStoreContext {
  pool: PgPool;
  names: TableNames;
  sql: Statements;
  hot: HotStatements;
  /** Resolves once the table exists (migrating on first use). */
  ready(): Promise<void>;
  /** Runs `work` in a READ COMMITTED transaction of its own. */
  inTransaction<T>(work: (client: PgQueryable) => Promise<T>): Promise<T>;
}

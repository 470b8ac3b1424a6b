// The SQL of the SQLite outbox store (sqlite-store.ts): named parameters, one statement each.

// Deliveries of a track are numbered after those of rows without a panel too (stored before v3,
// maybe adopted later): their deliveries came first, so an adopted history stays in order.
const NEXT_DELIVERED_SEQ = `(SELECT COALESCE(MAX(seen.delivered_seq), 0) + 1 FROM release_outbox AS seen
  WHERE seen.panel IN (@panel, '') AND seen.remote_track_id = @remoteTrackId)`;
const IN_SCOPE = '(@panel IS NULL OR panel = @panel)';

/** The store's statements, prepared once when the file is opened. */
export const SQLITE_OUTBOX_SQL = {
  newestPending: `SELECT id, content_hash AS contentHash FROM release_outbox WHERE panel = ? AND remote_track_id = ? AND state = 'pending' ORDER BY id DESC LIMIT 1`,
  latestDelivered: `SELECT id, content_hash AS contentHash, release_id AS releaseId, history_of AS historyOf FROM release_outbox
    WHERE panel = ? AND remote_track_id = ? AND state = 'delivered' ORDER BY delivered_seq DESC, id DESC LIMIT 1`,
  newestDead: `SELECT MAX(id) AS id FROM release_outbox WHERE panel = ? AND remote_track_id = ? AND state = 'dead'`,
  replacePayload: 'UPDATE release_outbox SET body = @body, content_hash = @contentHash, trace_context = @traceContext, updated_at = @now WHERE id = @id',
  insertPending: `INSERT INTO release_outbox (panel, remote_track_id, body, content_hash, state, attempts, next_attempt_at, created_at, updated_at, trace_context)
    VALUES (@panel, @remoteTrackId, @body, @contentHash, 'pending', 0, @now, @now, @now, @traceContext)`,
  // The common enqueue in one statement: a track the panel has no row of yet is always a new row
  // (planEnqueue's 'insert'); any other track inserts nothing here and goes through planEnqueue.
  // It may be leased to the enqueuing outbox's worker at once (@owner, @until; both null otherwise).
  insertNewTrack: `INSERT INTO release_outbox (panel, remote_track_id, body, content_hash, state, attempts, next_attempt_at, created_at, updated_at, lease_owner, lease_expires_at, trace_context)
    SELECT @panel, @remoteTrackId, @body, @contentHash, 'pending', 0, @now, @now, @now, @owner, @until, @traceContext
    WHERE NOT EXISTS (SELECT 1 FROM release_outbox WHERE panel = @panel AND remote_track_id = @remoteTrackId)`,
  // A payload delivered after its row took a newer one; it keeps who recorded it (@owner).
  insertDelivered: `INSERT INTO release_outbox
    (panel, remote_track_id, body, content_hash, state, attempts, next_attempt_at, release_id, delivered_seq, history_of, delivered_at, created_at, updated_at, lease_owner)
    VALUES (@panel, @remoteTrackId, @body, @contentHash, 'delivered', @attempts, @now, @releaseId, ${NEXT_DELIVERED_SEQ}, @historyOf, @now, @now, @now, @owner)`,
  // Whether @owner already recorded that delivery (rules.ts, mayBeRecordedHistory).
  recordedHistory: `SELECT 1 FROM release_outbox WHERE panel = @panel AND remote_track_id = @remoteTrackId AND state = 'delivered'
    AND history_of = @historyOf AND content_hash = @contentHash AND lease_owner = @owner AND release_id IS @releaseId LIMIT 1`,
  // One panel's due rows, oldest due first; a track's newer pending row waits for its older one.
  due: `SELECT id, panel, remote_track_id AS remoteTrackId, body, content_hash AS contentHash, attempts, trace_context AS traceContext FROM release_outbox AS candidate
    WHERE state = 'pending' AND panel = @panel AND next_attempt_at <= @now AND (lease_expires_at IS NULL OR lease_expires_at <= @now)
      AND id NOT IN (SELECT value FROM json_each(@exclude))
      AND (remote_track_id IS NULL OR NOT EXISTS (
        SELECT 1 FROM release_outbox AS older
        WHERE older.panel = candidate.panel AND older.remote_track_id = candidate.remote_track_id AND older.state = 'pending' AND older.id < candidate.id))
    ORDER BY next_attempt_at, id LIMIT @limit`,
  // The next panel with pending rows (a seek on the due index, however many rows a panel has).
  nextPanel: `SELECT panel FROM release_outbox WHERE state = 'pending' AND panel > ? ORDER BY panel LIMIT 1`,
  lease: 'UPDATE release_outbox SET lease_owner = @owner, lease_expires_at = @until WHERE id IN (SELECT value FROM json_each(@ids))',
  snapshot: `SELECT state, content_hash AS contentHash, lease_owner AS leaseOwner, next_attempt_at AS nextAttemptAt, release_id AS releaseId
    FROM release_outbox WHERE id = ?`,
  update: `UPDATE release_outbox SET state = @state, attempts = @attempts, next_attempt_at = @nextAttemptAt, last_error = @lastError,
    release_id = @releaseId, delivered_at = @deliveredAt,
    delivered_seq = CASE WHEN @state = 'delivered' THEN ${NEXT_DELIVERED_SEQ} ELSE delivered_seq END,
    lease_owner = @leaseOwner, lease_expires_at = NULL, updated_at = @now WHERE id = @id`,
  // The common outcome in one statement, without reading the row first: delivered, and still the
  // pending payload that was claimed (planSettle's 'applied' case; any other row state falls back).
  // It keeps who recorded it (@owner), as planSettle's update does.
  settleDelivered: `UPDATE release_outbox SET state = 'delivered', attempts = @attempts, last_error = @lastError, release_id = @releaseId,
    delivered_at = @now, delivered_seq = ${NEXT_DELIVERED_SEQ}, lease_owner = @owner, lease_expires_at = NULL, updated_at = @now
    WHERE id = @id AND state = 'pending' AND content_hash = @contentHash`,
  // Rows a worker holds (@held: a JSON array of [id, content hash]) that are no longer as it
  // claimed them: their payload replaced, or no longer pending. One rowid lookup each.
  recheck: `SELECT held.id, held.state, held.body, held.content_hash AS contentHash
    FROM json_each(@held) AS claimed CROSS JOIN release_outbox AS held ON held.id = json_extract(claimed.value, '$[0]')
    WHERE held.state <> 'pending' OR held.content_hash <> json_extract(claimed.value, '$[1]')`,
  // Only the newest row of a track comes back (rules.ts, mayRequeue).
  requeue: `UPDATE release_outbox SET state = 'pending', attempts = 0, next_attempt_at = @now, lease_owner = NULL, lease_expires_at = NULL, updated_at = @now
    WHERE state = 'dead' AND (@id IS NULL OR id = @id) AND ${IN_SCOPE} AND (remote_track_id IS NULL OR NOT EXISTS (
      SELECT 1 FROM release_outbox AS newer WHERE newer.panel = release_outbox.panel AND newer.remote_track_id = release_outbox.remote_track_id
        AND newer.id > release_outbox.id AND newer.history_of IS NOT release_outbox.id))`,
  // Adoption: a pending row whose track the panel has stored since (pending or delivered) gives way to that newer content.
  adoptSuperseded: `UPDATE release_outbox SET state = 'dead', last_error = @error, lease_owner = NULL, lease_expires_at = NULL, updated_at = @now
    WHERE panel = '' AND state = 'pending' AND remote_track_id IS NOT NULL AND EXISTS (
      SELECT 1 FROM release_outbox AS theirs WHERE theirs.panel = @panel AND theirs.remote_track_id = release_outbox.remote_track_id
        AND theirs.id > release_outbox.id)`,
  adopt: `UPDATE release_outbox SET panel = @panel WHERE panel = ''`,
  // Retention (rules.ts, mayPrune), one id range at a time so a pass never holds the lock for long.
  pruneRange: `SELECT (SELECT MAX(id) FROM (SELECT id FROM release_outbox WHERE id > @afterId ORDER BY id LIMIT @limit)) AS lastId,
    (SELECT MAX(id) FROM release_outbox) AS highestId`,
  // The unary + keeps SQLite on the id range: through the state index it would scan every
  // delivered row of the table for each batch.
  // Cancelled rows go as dead ones do. With @feedHold, a delivered row goes only once every feed
  // has read past it (its position at most @feedHold; a row with no position yet is unread).
  prune: `DELETE FROM release_outbox WHERE id > @afterId AND id <= @lastId AND (
      (+state IN ('dead', 'cancelled') AND updated_at < @deadBefore)
      OR (+state = 'delivered' AND updated_at < @deliveredBefore AND (@feedHold IS NULL OR feed_position <= @feedHold) AND (remote_track_id IS NULL OR EXISTS (
        SELECT 1 FROM release_outbox AS newer WHERE newer.panel = release_outbox.panel AND newer.remote_track_id = release_outbox.remote_track_id
          AND newer.state = 'delivered' AND (COALESCE(newer.delivered_seq, 0), newer.id) > (COALESCE(release_outbox.delivered_seq, 0), release_outbox.id)))))`,
};

// The durable outbox store: one SQLite file (WAL; an enqueue resolves once on disk), rows leased in IMMEDIATE transactions.
import { optionError, positiveInteger, rejectUnknownOptions, shown } from '../options.js';
import { gatherHeads, panelRing, pickFairly } from './fair-claim.js';
import { ADOPTION_SUPERSEDED, enqueueResult, needsNewestDead, planEnqueue, planSettle } from './rules.js';
import type { SqliteStatement } from './sqlite-driver.js';
import { sqliteGroupCommit } from './sqlite-group-commit.js';
import { createReaders, orNull, orUndefined, readOnlyStore } from './sqlite-read.js';
import { openOutboxDatabase } from './sqlite-schema.js';
import {
  type ClaimedRow,
  type ClaimRequest,
  type DeliveryOutcome,
  type FairClaim,
  type FairClaimRequest,
  type OutboxState,
  type OutboxStore,
  type PruneRequest,
  type PruneResult,
  refuseTransaction,
  type SettleRequest,
} from './store.js';

export interface SqliteOutboxStoreOptions {
  /** Path of the SQLite file; its directory is created when missing. `':memory:'` for a throwaway database. */
  file: string;
  /** How long a write waits for another process's lock before failing, in milliseconds. @default 5000 */
  busyTimeoutMs?: number;
  /**
   * Open for reading only (listing, counts): works on a read-only file or a full disk. The file
   * must exist with the current schema; every write method throws. @default false
   */
  readonly?: boolean;
}

// Deliveries of a track are numbered after those of rows without a panel too (stored before v3,
// maybe adopted later): their deliveries came first, so an adopted history stays in order.
const NEXT_DELIVERED_SEQ = `(SELECT COALESCE(MAX(seen.delivered_seq), 0) + 1 FROM release_outbox AS seen
  WHERE seen.panel IN (@panel, '') AND seen.remote_track_id = @remoteTrackId)`;
const IN_SCOPE = '(@panel IS NULL OR panel = @panel)';

const SQL = {
  newestPending: `SELECT id, content_hash AS contentHash FROM release_outbox WHERE panel = ? AND remote_track_id = ? AND state = 'pending' ORDER BY id DESC LIMIT 1`,
  latestDelivered: `SELECT id, content_hash AS contentHash, release_id AS releaseId, history_of AS historyOf FROM release_outbox
    WHERE panel = ? AND remote_track_id = ? AND state = 'delivered' ORDER BY delivered_seq DESC, id DESC LIMIT 1`,
  newestDead: `SELECT MAX(id) AS id FROM release_outbox WHERE panel = ? AND remote_track_id = ? AND state = 'dead'`,
  replacePayload: 'UPDATE release_outbox SET body = @body, content_hash = @contentHash, updated_at = @now WHERE id = @id',
  insertPending: `INSERT INTO release_outbox (panel, remote_track_id, body, content_hash, state, attempts, next_attempt_at, created_at, updated_at)
    VALUES (@panel, @remoteTrackId, @body, @contentHash, 'pending', 0, @now, @now, @now)`,
  insertDelivered: `INSERT INTO release_outbox
    (panel, remote_track_id, body, content_hash, state, attempts, next_attempt_at, release_id, delivered_seq, history_of, delivered_at, created_at, updated_at)
    VALUES (@panel, @remoteTrackId, @body, @contentHash, 'delivered', @attempts, @now, @releaseId, ${NEXT_DELIVERED_SEQ}, @historyOf, @now, @now, @now)`,
  // One panel's due rows, oldest due first; a track's newer pending row waits for its older one.
  due: `SELECT id, panel, remote_track_id AS remoteTrackId, body, content_hash AS contentHash, attempts FROM release_outbox AS candidate
    WHERE state = 'pending' AND panel = @panel AND next_attempt_at <= @now AND (lease_expires_at IS NULL OR lease_expires_at <= @now)
      AND id NOT IN (SELECT value FROM json_each(@exclude))
      AND (remote_track_id IS NULL OR NOT EXISTS (
        SELECT 1 FROM release_outbox AS older
        WHERE older.panel = candidate.panel AND older.remote_track_id = candidate.remote_track_id AND older.state = 'pending' AND older.id < candidate.id))
    ORDER BY next_attempt_at, id LIMIT @limit`,
  // The next panel with pending rows (a seek on the due index, however many rows a panel has).
  nextPanel: `SELECT panel FROM release_outbox WHERE state = 'pending' AND panel > ? ORDER BY panel LIMIT 1`,
  lease: 'UPDATE release_outbox SET lease_owner = @owner, lease_expires_at = @until WHERE id IN (SELECT value FROM json_each(@ids))',
  snapshot: `SELECT state, content_hash AS contentHash, lease_owner AS leaseOwner, next_attempt_at AS nextAttemptAt FROM release_outbox WHERE id = ?`,
  update: `UPDATE release_outbox SET state = @state, attempts = @attempts, next_attempt_at = @nextAttemptAt, last_error = @lastError,
    release_id = @releaseId, delivered_at = @deliveredAt,
    delivered_seq = CASE WHEN @state = 'delivered' THEN ${NEXT_DELIVERED_SEQ} ELSE delivered_seq END,
    lease_owner = NULL, lease_expires_at = NULL, updated_at = @now WHERE id = @id`,
  // The common outcome in one statement, without reading the row first: delivered, and still the
  // pending payload that was claimed (planSettle's 'applied' case; any other row state falls back).
  settleDelivered: `UPDATE release_outbox SET state = 'delivered', attempts = @attempts, last_error = @lastError, release_id = @releaseId,
    delivered_at = @now, delivered_seq = ${NEXT_DELIVERED_SEQ}, lease_owner = NULL, lease_expires_at = NULL, updated_at = @now
    WHERE id = @id AND state = 'pending' AND content_hash = @contentHash`,
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
  prune: `DELETE FROM release_outbox WHERE id > @afterId AND id <= @lastId AND (
      (+state = 'dead' AND updated_at < @deadBefore)
      OR (+state = 'delivered' AND updated_at < @deliveredBefore AND (remote_track_id IS NULL OR EXISTS (
        SELECT 1 FROM release_outbox AS newer WHERE newer.panel = release_outbox.panel AND newer.remote_track_id = release_outbox.remote_track_id
          AND newer.state = 'delivered' AND (COALESCE(newer.delivered_seq, 0), newer.id) > (COALESCE(release_outbox.delivered_seq, 0), release_outbox.id)))))`,
};

/** Opens (creating if needed) a SQLite outbox file. Needs the optional peer dependency better-sqlite3. */
export function createSqliteOutboxStore(options: SqliteOutboxStoreOptions): OutboxStore {
  if (typeof options !== 'object' || options === null) throw optionError('options', 'must be an object', 'Pass { file: "./data/outbox.db" }.');
  rejectUnknownOptions('createSqliteOutboxStore', options, ['file', 'busyTimeoutMs', 'readonly']);
  const { file } = options;
  if (typeof file !== 'string' || file.trim() === '') throw optionError('file', 'must be a non-empty path', 'Pass a path such as "./data/outbox.db".');
  const busyTimeoutMs = positiveInteger('busyTimeoutMs', options.busyTimeoutMs, 5000);
  if (options.readonly !== undefined && typeof options.readonly !== 'boolean')
    throw optionError('readonly', `must be true or false, received ${shown(options.readonly)}`, 'Leave it out to open for writing.');
  const readonly = options.readonly === true;
  const db = openOutboxDatabase(file, busyTimeoutMs, readonly);
  if (readonly) return readOnlyStore(db, file);
  const readers = createReaders(db);
  const statements = Object.fromEntries(Object.entries(SQL).map(([name, sql]) => [name, db.prepare(sql)])) as Record<keyof typeof SQL, SqliteStatement>;

  // IMMEDIATE takes the write lock before reading, so two processes cannot both read a row as
  // unleased (or as the pending row to replace) and then both act on it.
  const enqueue = db.transaction((row: Parameters<OutboxStore['enqueue']>[0], now: number) => {
    const { panel, remoteTrackId: track } = row;
    const newestPending = track === undefined ? undefined : (statements.newestPending.get(panel, track) as { id: number; contentHash: string } | undefined);
    const delivered =
      track === undefined
        ? undefined
        : (statements.latestDelivered.get(panel, track) as { id: number; contentHash: string; releaseId: number | null; historyOf: number | null } | undefined);
    const latestDelivered = delivered && { ...delivered, releaseId: orUndefined(delivered.releaseId), historyOf: orUndefined(delivered.historyOf) };
    const newestDead = needsNewestDead(row, newestPending, latestDelivered) ? (statements.newestDead.get(panel, track) as { id: number | null }) : undefined;
    const plan = planEnqueue(row, newestPending, latestDelivered, orUndefined(newestDead?.id ?? null));
    if (plan.action === 'replace-pending') statements.replacePayload.run({ id: plan.id, body: row.body, contentHash: row.contentHash, now });
    const inserted =
      plan.action === 'insert'
        ? Number(statements.insertPending.run({ panel, remoteTrackId: orNull(track), body: row.body, contentHash: row.contentHash, now }).lastInsertRowid)
        : undefined;
    return enqueueResult(plan, inserted);
  });

  type DueRecord = Omit<ClaimedRow, 'remoteTrackId'> & { remoteTrackId: string | null };
  const dueOf = (panel: string, request: ClaimRequest | FairClaimRequest, limit: number) =>
    statements.due.all({ panel, now: request.nowMs, limit, exclude: JSON.stringify(request.exclude ?? []) }) as DueRecord[];
  const leaseRows = (rows: DueRecord[], request: ClaimRequest | FairClaimRequest): ClaimedRow[] => {
    if (rows.length === 0) return [];
    // One statement for the whole claim, not one per row.
    statements.lease.run({ ids: JSON.stringify(rows.map((row) => row.id)), owner: request.owner, until: request.nowMs + request.leaseMs });
    return rows.map(({ remoteTrackId, ...row }) => ({ ...row, remoteTrackId: orUndefined(remoteTrackId) }));
  };

  const claimDue = db.transaction((request: ClaimRequest) => leaseRows(dueOf(request.panel, request, request.limit), request));

  /** The first panel with pending rows after `cursor`: one index seek. */
  const nextPanel = (cursor: string) => (statements.nextPanel.get(cursor) as { panel: string } | undefined)?.panel;

  const claimFair = db.transaction((request: FairClaimRequest): FairClaim => {
    const { heads, resumeAfter } = gatherHeads(panelRing(nextPanel, request.after), request, (panel, limit) => dueOf(panel, request, limit));
    const { rows, lastPanel } = pickFairly(heads, request.limit, resumeAfter);
    return { rows: leaseRows(rows, request), lastPanel };
  });

  const settledAsDelivered = (claim: ClaimedRow, { releaseId, note }: Extract<DeliveryOutcome, { kind: 'delivered' }>, now: number): boolean =>
    statements.settleDelivered.run({
      id: claim.id,
      contentHash: claim.contentHash,
      panel: claim.panel,
      remoteTrackId: orNull(claim.remoteTrackId),
      attempts: claim.attempts + 1,
      lastError: orNull(note),
      releaseId: orNull(releaseId),
      now,
    }).changes === 1;
  const settleOne = (...[claim, owner, outcome, now]: Parameters<OutboxStore['settle']>) => {
    if (outcome.kind === 'delivered' && settledAsDelivered(claim, outcome, now)) return 'applied';
    const snapshot = statements.snapshot.get(claim.id) as
      | { state: OutboxState; contentHash: string; leaseOwner: string | null; nextAttemptAt: number }
      | undefined;
    const plan = planSettle(snapshot && { ...snapshot, leaseOwner: orUndefined(snapshot.leaseOwner) }, claim, owner, outcome, now);
    const remoteTrackId = orNull(claim.remoteTrackId);
    const { panel } = claim;
    if (plan.history)
      statements.insertDelivered.run({ ...plan.history, releaseId: orNull(plan.history.releaseId), panel, remoteTrackId, historyOf: claim.id, now });
    if (plan.update) {
      const { lastError, releaseId, deliveredAt, ...rest } = plan.update;
      statements.update.run({
        ...rest,
        lastError: orNull(lastError),
        releaseId: orNull(releaseId),
        deliveredAt: orNull(deliveredAt),
        panel,
        remoteTrackId,
        id: claim.id,
        now,
      });
    }
    return plan.result;
  };
  const settle = db.transaction(settleOne);
  // Several outcomes in one transaction: one commit (the costly part) for all of them.
  const settleMany = db.transaction((settles: readonly SettleRequest[], owner: string) =>
    settles.map(({ claim, outcome, nowMs }) => settleOne(claim, owner, outcome, nowMs)),
  );

  const adopt = db.transaction((panel: string, now: number) => {
    statements.adoptSuperseded.run({ panel, now, error: ADOPTION_SUPERSEDED });
    return statements.adopt.run({ panel }).changes;
  });

  const prune = db.transaction(({ deliveredBefore, deadBefore, afterId, limit }: PruneRequest): PruneResult => {
    const range = statements.pruneRange.get({ afterId, limit }) as { lastId: number | null; highestId: number | null };
    const [lastId, highestId] = [orUndefined(range.lastId), orUndefined(range.highestId)];
    if (lastId === undefined) return { deleted: 0, lastId, highestId };
    return { deleted: statements.prune.run({ afterId, lastId, deliveredBefore, deadBefore }).changes, lastId, highestId };
  });

  // An enqueue is the promise made to the caller, so it resolves only once on disk (below; rare
  // writes such as requeueDead commit with synchronous=FULL). Leases and delivery marks commit
  // with NORMAL and are not waited for: in WAL mode they still survive a process crash,
  // and only a power loss can drop the newest of them (the next enqueue's sync flushes them all).
  // Losing one means at worst that a release is sent again, which the at-least-once guarantee
  // already allows; paying an fsync for each would cut delivery throughput by two thirds.
  const syncFull = db.prepare('PRAGMA synchronous = FULL');
  const syncNormal = db.prepare('PRAGMA synchronous = NORMAL');
  function withFullSync<T>(write: () => T): T {
    syncFull.run();
    try {
      return write();
    } finally {
      syncNormal.run();
    }
  }
  syncNormal.run();

  const enqueues = sqliteGroupCommit(db, enqueue, withFullSync);

  return {
    enqueue: async (row, nowMs, options) => {
      refuseTransaction('SQLite', options);
      return enqueues.enqueue(row, nowMs);
    },
    claimDue: (request) => claimDue.immediate(request),
    claimFair: (request) => claimFair.immediate(request),
    settle: (claim, owner, outcome, nowMs) => settle.immediate(claim, owner, outcome, nowMs),
    settleMany: (settles, owner) => settleMany.immediate(settles, owner),
    ...readers,
    requeueDead: (id, nowMs, scope) => withFullSync(() => statements.requeue.run({ id: orNull(id), now: nowMs, panel: orNull(scope?.panel) }).changes),
    adoptUnassigned: (panel, nowMs) => withFullSync(() => adopt.immediate(panel, nowMs)),
    prune: (request) => prune.immediate(request),
    async close() {
      await enqueues.close();
      if (db.open) db.close();
    },
  };
}

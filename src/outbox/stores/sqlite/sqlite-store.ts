// The durable outbox store: one SQLite file (WAL; an enqueue resolves once on disk), rows leased in IMMEDIATE transactions;
// what operators do (cancel, controls, the delivery feed) in sqlite-operations.ts and sqlite-feed.ts.

import type { SqliteStatement } from '../../../db/sqlite-driver.js';
import { optionError, optionNames, positiveInteger, rejectUnknownOptions, shown } from '../../../options.js';
import { ADOPTION_SUPERSEDED, enqueueResult, mayBeRecordedHistory, needsNewestDead, planEnqueue, planSettle } from '../../rules.js';
import {
  type ChangedRow,
  type ClaimedRow,
  type ClaimRequest,
  type DeliveryOutcome,
  type EnqueueLease,
  type EnqueueResult,
  type FairClaim,
  type FairClaimRequest,
  type OutboxState,
  type OutboxStore,
  type PruneRequest,
  type PruneResult,
  refuseTransaction,
  type SettleRequest,
} from '../../store.js';
import { gatherHeads, panelRing, pickFairly } from '../shared/fair-claim.js';
import { createFeed } from './sqlite-feed.js';
import { sqliteGroupCommit, walSyncOf } from './sqlite-group-commit.js';
import { createOperations, durableWrites } from './sqlite-operations.js';
import { createReaders, orNull, orUndefined, readOnlyStore } from './sqlite-read.js';
import { openOutboxDatabase } from './sqlite-schema.js';
import { SQLITE_OUTBOX_SQL } from './sqlite-sql.js';

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

/** Opens (creating if needed) a SQLite outbox file. Needs the optional peer dependency better-sqlite3. */
export function sqliteOutboxStore(options: SqliteOutboxStoreOptions): OutboxStore {
  if (typeof options !== 'object' || options === null) throw optionError('options', 'must be an object', 'Pass { file: "./data/outbox.db" }.');
  rejectUnknownOptions('sqliteOutboxStore', options, optionNames<SqliteOutboxStoreOptions>({ file: true, busyTimeoutMs: true, readonly: true }));
  const { file } = options;
  if (typeof file !== 'string' || file.trim() === '') throw optionError('file', 'must be a non-empty path', 'Pass a path such as "./data/outbox.db".');
  const busyTimeoutMs = positiveInteger('busyTimeoutMs', options.busyTimeoutMs, 5000);
  if (options.readonly !== undefined && typeof options.readonly !== 'boolean')
    throw optionError('readonly', `must be true or false, received ${shown(options.readonly)}`, 'Leave it out to open for writing.');
  const readonly = options.readonly === true;
  const db = openOutboxDatabase(file, busyTimeoutMs, readonly);
  if (readonly) return readOnlyStore(db, file);
  const readers = createReaders(db);
  const statements = Object.fromEntries(Object.entries(SQLITE_OUTBOX_SQL).map(([name, sql]) => [name, db.prepare(sql)])) as Record<
    keyof typeof SQLITE_OUTBOX_SQL,
    SqliteStatement
  >;

  // Run inside the group commit's IMMEDIATE transaction: it takes the write lock before reading,
  // so two processes cannot both read a row as unleased (or as the pending row to replace) and
  // then both act on it.
  const enqueueRow = (row: Parameters<OutboxStore['enqueue']>[0], now: number, lease?: EnqueueLease): EnqueueResult => {
    const { panel, remoteTrackId: track } = row;
    if (track !== undefined) {
      const owner = lease?.owner ?? null;
      const until = lease === undefined ? null : now + lease.leaseMs;
      const { changes, lastInsertRowid } = statements.insertNewTrack.run({
        panel,
        remoteTrackId: track,
        body: row.body,
        contentHash: row.contentHash,
        now,
        owner,
        until,
        traceContext: orNull(row.traceContext),
      });
      if (changes === 1) {
        // Inside the batch's transaction: were it rolled back and written again, the last call counts.
        lease?.taken(Number(lastInsertRowid));
        return enqueueResult({ action: 'insert' }, Number(lastInsertRowid));
      }
    }
    const newestPending = track === undefined ? undefined : (statements.newestPending.get(panel, track) as { id: number; contentHash: string } | undefined);
    const delivered =
      track === undefined
        ? undefined
        : (statements.latestDelivered.get(panel, track) as { id: number; contentHash: string; releaseId: number | null; historyOf: number | null } | undefined);
    const latestDelivered = delivered && { ...delivered, releaseId: orUndefined(delivered.releaseId), historyOf: orUndefined(delivered.historyOf) };
    const newestDead = needsNewestDead(row, newestPending, latestDelivered) ? (statements.newestDead.get(panel, track) as { id: number | null }) : undefined;
    const plan = planEnqueue(row, newestPending, latestDelivered, orUndefined(newestDead?.id ?? null));
    const { body, contentHash } = row;
    const traceContext = orNull(row.traceContext);
    if (plan.action === 'replace-pending') statements.replacePayload.run({ id: plan.id, body, contentHash, traceContext, now });
    const inserted =
      plan.action === 'insert'
        ? Number(statements.insertPending.run({ panel, remoteTrackId: orNull(track), body, contentHash, traceContext, now }).lastInsertRowid)
        : undefined;
    return enqueueResult(plan, inserted);
  };

  type DueRecord = Omit<ClaimedRow, 'remoteTrackId' | 'traceContext'> & { remoteTrackId: string | null; traceContext: string | null };
  const dueOf = (panel: string, request: ClaimRequest | FairClaimRequest, limit: number) =>
    statements.due.all({ panel, now: request.nowMs, limit, exclude: JSON.stringify(request.exclude ?? []) }) as DueRecord[];
  const leaseRows = (rows: DueRecord[], request: ClaimRequest | FairClaimRequest): ClaimedRow[] => {
    if (rows.length === 0) return [];
    // One statement for the whole claim, not one per row.
    statements.lease.run({ ids: JSON.stringify(rows.map((row) => row.id)), owner: request.owner, until: request.nowMs + request.leaseMs });
    return rows.map(({ remoteTrackId, traceContext, ...row }) => ({
      ...row,
      remoteTrackId: orUndefined(remoteTrackId),
      traceContext: orUndefined(traceContext),
    }));
  };

  const claimDue = db.transaction((request: ClaimRequest) => leaseRows(dueOf(request.panel, request, request.limit), request));

  /** The first panel with pending rows after `cursor`: one index seek. */
  const nextPanel = (cursor: string) => (statements.nextPanel.get(cursor) as { panel: string } | undefined)?.panel;

  const claimFair = db.transaction((request: FairClaimRequest): FairClaim => {
    const { heads, resumeAfter } = gatherHeads(panelRing(nextPanel, request.after), request, (panel, limit) => dueOf(panel, request, limit));
    const { rows, lastPanel } = pickFairly(heads, request.limit, resumeAfter);
    return { rows: leaseRows(rows, request), lastPanel };
  });

  const settledAsDelivered = (claim: ClaimedRow, owner: string, { releaseId, note }: Extract<DeliveryOutcome, { kind: 'delivered' }>, now: number): boolean =>
    statements.settleDelivered.run({
      id: claim.id,
      owner,
      contentHash: claim.contentHash,
      panel: claim.panel,
      remoteTrackId: orNull(claim.remoteTrackId),
      attempts: claim.attempts + 1,
      lastError: orNull(note),
      releaseId: orNull(releaseId),
      now,
    }).changes === 1;
  const settleOne = (...[claim, owner, outcome, now]: Parameters<OutboxStore['settle']>) => {
    if (outcome.kind === 'delivered' && settledAsDelivered(claim, owner, outcome, now)) return 'applied';
    const snapshot = statements.snapshot.get(claim.id) as
      | { state: OutboxState; contentHash: string; leaseOwner: string | null; nextAttemptAt: number; releaseId: number | null }
      | undefined;
    const current = snapshot && { ...snapshot, leaseOwner: orUndefined(snapshot.leaseOwner), releaseId: orUndefined(snapshot.releaseId) };
    const remoteTrackId = orNull(claim.remoteTrackId);
    const { panel } = claim;
    const recorded =
      mayBeRecordedHistory(current, claim, owner, outcome) &&
      statements.recordedHistory.get({
        panel,
        remoteTrackId,
        historyOf: claim.id,
        contentHash: claim.contentHash,
        owner,
        releaseId: orNull(outcome.releaseId),
      }) !== undefined;
    const plan = planSettle(current, claim, owner, outcome, now, recorded);
    if (plan.history)
      statements.insertDelivered.run({ ...plan.history, releaseId: orNull(plan.history.releaseId), panel, remoteTrackId, historyOf: claim.id, now, owner });
    if (plan.update) {
      const { lastError, releaseId, deliveredAt, leaseOwner, ...rest } = plan.update;
      statements.update.run({
        ...rest,
        lastError: orNull(lastError),
        releaseId: orNull(releaseId),
        deliveredAt: orNull(deliveredAt),
        leaseOwner: orNull(leaseOwner),
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

  const prune = db.transaction(({ deliveredBefore, deadBefore, feedHold, afterId, limit }: PruneRequest): PruneResult => {
    const range = statements.pruneRange.get({ afterId, limit }) as { lastId: number | null; highestId: number | null };
    const [lastId, highestId] = [orUndefined(range.lastId), orUndefined(range.highestId)];
    if (lastId === undefined) return { deleted: 0, lastId, highestId };
    const deleted = statements.prune.run({ afterId, lastId, deliveredBefore, deadBefore, feedHold: orNull(feedHold) }).changes;
    return { deleted, lastId, highestId };
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

  // One WAL sync for the file: enqueues, cancels, controls and the feed share it (and its failure).
  const wal = walSyncOf(db);
  const enqueues = sqliteGroupCommit(db, enqueueRow, withFullSync, wal);
  const operations = createOperations(db, durableWrites(wal, withFullSync));

  return {
    enqueue: async (row, nowMs, options, lease) => {
      refuseTransaction('SQLite', options);
      return enqueues.enqueue(row, nowMs, lease);
    },
    claimDue: (request) => claimDue.immediate(request),
    claimFair: (request) => claimFair.immediate(request),
    settle: (claim, owner, outcome, nowMs) => settle.immediate(claim, owner, outcome, nowMs),
    settleMany: (settles, owner) => settleMany.immediate(settles, owner),
    recheck: (held) => statements.recheck.all({ held: JSON.stringify(held.map(({ id, contentHash }) => [id, contentHash])) }) as ChangedRow[],
    ...readers,
    requeueDead: (id, nowMs, scope) => withFullSync(() => statements.requeue.run({ id: orNull(id), now: nowMs, panel: orNull(scope?.panel) }).changes),
    adoptUnassigned: (panel, nowMs) => withFullSync(() => adopt.immediate(panel, nowMs)),
    prune: (request) => prune.immediate(request),
    ...operations,
    deliveries: createFeed(db, wal),
    async close() {
      await enqueues.close();
      if (db.open) db.close();
    },
  };
}

/** @deprecated Renamed {@link sqliteOutboxStore}, now from `panel-license-guard/sqlite` (one naming scheme for every store: `<backend>OutboxStore`); this name goes in the next minor version. */
export const createSqliteOutboxStore = sqliteOutboxStore;

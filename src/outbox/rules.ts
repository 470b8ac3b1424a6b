// The row rules every outbox store applies: de-duplication on enqueue, and settling an attempt.
import type { ClaimedRow, DeliveryOutcome, EnqueueResult, NewOutboxRow, OutboxState, PruneRequest, SettleResult } from './store.js';

/** What an enqueue does, given the rows already stored for its `remote_track_id`. */
export type EnqueuePlan =
  | { action: 'insert' }
  | { action: 'replace-pending'; id: number }
  | { action: 'keep-pending'; id: number }
  | { action: 'already-delivered'; id: number; releaseId: number | undefined };

interface ContentOf {
  id: number;
  contentHash: string;
}

/**
 * - No `remote_track_id`: always a new row (we cannot tell two such releases apart).
 * - A pending row for the track: it takes the new payload and keeps its id and place in line;
 *   sending the older payload first would only be overwritten a moment later.
 * - Otherwise, if the latest delivery for the track carried the same bytes, and no release of
 *   the track died after it: nothing to do.
 * - Otherwise (never sent, changed since, or a later release died): a new row, sent as an update.
 *   A release that died after the latest delivery may have reached the mother all the same (an
 *   attempt whose answer was lost before the refusal), so the mother may no longer hold what was
 *   delivered; and the new row keeps the dead one from being retried over the panel's last word.
 */
export function planEnqueue(
  row: NewOutboxRow,
  newestPending: ContentOf | undefined,
  latestDelivered: (ContentOf & { releaseId: number | undefined; historyOf?: number | undefined }) | undefined,
  newestDeadId?: number | undefined,
): EnqueuePlan {
  if (row.remoteTrackId === undefined) return { action: 'insert' };
  if (newestPending) {
    const action = newestPending.contentHash === row.contentHash ? 'keep-pending' : 'replace-pending';
    return { action, id: newestPending.id };
  }
  if (latestDelivered && latestDelivered.contentHash === row.contentHash && !diedSince(newestDeadId, latestDelivered)) {
    return { action: 'already-delivered', id: latestDelivered.id, releaseId: latestDelivered.releaseId };
  }
  return { action: 'insert' };
}

/**
 * Whether the track's newest dead row was uploaded after the content of its latest delivery.
 * Rows are numbered in upload order, but for one exception: a history row (a payload delivered
 * after its row took a newer one) is numbered when it is recorded, so its content dates from its
 * row's id — and that row, carrying the newer payload, may be the dead one.
 */
function diedSince(newestDeadId: number | undefined, delivered: { id: number; historyOf?: number | undefined }): boolean {
  if (newestDeadId === undefined) return false;
  return newestDeadId > delivered.id || (delivered.historyOf !== undefined && newestDeadId >= delivered.historyOf);
}

/** Whether planEnqueue needs the track's newest dead row (only to confirm 'already-delivered'). */
export function needsNewestDead(row: NewOutboxRow, newestPending: ContentOf | undefined, latestDelivered: ContentOf | undefined): boolean {
  return row.remoteTrackId !== undefined && newestPending === undefined && latestDelivered?.contentHash === row.contentHash;
}

export function enqueueResult(plan: EnqueuePlan, insertedId: number | undefined): EnqueueResult {
  switch (plan.action) {
    case 'already-delivered':
      return { id: plan.id, state: 'delivered', releaseId: plan.releaseId, deduplicated: 'already-delivered' };
    case 'replace-pending':
    case 'keep-pending':
      return { id: plan.id, state: 'pending', releaseId: undefined, deduplicated: 'replaced-pending' };
    case 'insert':
      if (insertedId === undefined) throw new Error('enqueueResult: an inserted row needs its id');
      return { id: insertedId, state: 'pending', releaseId: undefined, deduplicated: undefined };
  }
}

/** The fields of the stored row the settle rules look at. */
export interface RowSnapshot {
  state: OutboxState;
  contentHash: string;
  /** The lease's holder while pending; on a delivered or dead row, who recorded it (RowUpdate). */
  leaseOwner: string | undefined;
  nextAttemptAt: number;
  releaseId: number | undefined;
}

/**
 * New values of a row's mutable fields. Applying an update always ends the lease (its expiry
 * cleared); `leaseOwner` is what `lease_owner` becomes.
 */
export interface RowUpdate {
  state: OutboxState;
  attempts: number;
  nextAttemptAt: number;
  lastError: string | undefined;
  releaseId: number | undefined;
  deliveredAt: number | undefined;
  /**
   * Undefined for a pending row. A delivered or dead row keeps the owner that recorded it: the
   * same owner recording the same outcome again (a settle retried because its answer was lost
   * after the commit) is then told 'applied', not 'stale', and its worker emits the event it owes.
   */
  leaseOwner: string | undefined;
}

/** A delivered payload that is no longer the row's payload, kept so de-duplication knows it. */
export interface DeliveredHistory {
  body: string;
  contentHash: string;
  releaseId: number | undefined;
  attempts: number;
}

export interface SettlePlan {
  result: SettleResult;
  update: RowUpdate | undefined;
  history: DeliveredHistory | undefined;
}

const STALE: SettlePlan = { result: 'stale', update: undefined, history: undefined };
/** The outcome was already recorded so, by this owner: nothing to write. */
const RECORDED: SettlePlan = { result: 'applied', update: undefined, history: undefined };

/**
 * Whether the row already holds this very outcome, recorded by `owner` for the same content: its
 * earlier settle committed, but the answer was lost. Only that can look so: an owner (one outbox
 * instance) holds a row once at a time, records again only while it still holds it, and a
 * delivered row never becomes pending again (a dead one only by a requeue, after its record).
 */
function recordedBefore(current: RowSnapshot, claim: ClaimedRow, owner: string, outcome: DeliveryOutcome): boolean {
  if (current.leaseOwner !== owner || current.contentHash !== claim.contentHash || current.state !== outcome.kind) return false;
  return outcome.kind !== 'delivered' || current.releaseId === outcome.releaseId;
}

/**
 * Whether settling `outcome` must first learn if `owner` already recorded this claim's delivery as
 * a history row: a delivery of a payload replaced in flight, on a row this owner no longer holds
 * (recording it once cleared the lease; or another worker delivered the newer payload since). Only
 * then can that record be a retry whose answer was lost; the store looks for a delivered row
 * with `history_of` = the claim's id, the claim's content, `lease_owner` = owner and the outcome's
 * `release_id`, and passes whether it found one to planSettle.
 */
export function mayBeRecordedHistory(
  current: RowSnapshot | undefined,
  claim: ClaimedRow,
  owner: string,
  outcome: DeliveryOutcome,
): outcome is Extract<DeliveryOutcome, { kind: 'delivered' }> {
  return outcome.kind === 'delivered' && current !== undefined && current.contentHash !== claim.contentHash && current.leaseOwner !== owner;
}

/** The delivery was recorded as history before, by this owner: nothing to write, and it is told as it was then. */
const RECORDED_AS_HISTORY: SettlePlan = { result: 'superseded', update: undefined, history: undefined };

/**
 * Decides how an attempt's outcome changes its row. The interesting case is a payload replaced
 * while the older one was in flight (`contentHash` differs from the claim's): the newer payload
 * must still reach the mother, so the row stays pending rather than taking the older outcome.
 */
export function planSettle(
  current: RowSnapshot | undefined,
  claim: ClaimedRow,
  owner: string,
  outcome: DeliveryOutcome,
  nowMs: number,
  /** When mayBeRecordedHistory: whether the store found that history row. */
  recordedAsHistory = false,
): SettlePlan {
  if (current === undefined) return STALE;
  if (recordedAsHistory && mayBeRecordedHistory(current, claim, owner, outcome)) return RECORDED_AS_HISTORY;
  if (current.state !== 'pending') return recordedBefore(current, claim, owner, outcome) ? RECORDED : STALE;
  const sameContent = current.contentHash === claim.contentHash;
  const ours = current.leaseOwner === owner;
  const attempts = outcome.kind === 'retry' && outcome.notSent === true ? claim.attempts : claim.attempts + 1;
  const sendNewerPayloadNow: RowUpdate = {
    state: 'pending',
    attempts: 0,
    nextAttemptAt: nowMs,
    lastError: undefined,
    releaseId: undefined,
    deliveredAt: undefined,
    leaseOwner: undefined,
  };

  if (outcome.kind === 'delivered') {
    // Recorded even if our lease lapsed and another worker re-sent it: the mother has it either way.
    if (sameContent) {
      const update: RowUpdate = {
        state: 'delivered',
        attempts,
        nextAttemptAt: current.nextAttemptAt,
        lastError: outcome.note,
        releaseId: outcome.releaseId,
        deliveredAt: nowMs,
        leaseOwner: owner,
      };
      return { result: 'applied', update, history: undefined };
    }
    const history: DeliveredHistory = { body: claim.body, contentHash: claim.contentHash, releaseId: outcome.releaseId, attempts };
    return { result: 'superseded', update: ours ? sendNewerPayloadNow : undefined, history };
  }
  // A failure reported after our lease was taken over says nothing about the new holder's attempt.
  if (!ours) return STALE;
  if (outcome.kind === 'retry') {
    const update: RowUpdate = {
      state: 'pending',
      attempts,
      nextAttemptAt: outcome.nextAttemptAt,
      lastError: outcome.error,
      releaseId: undefined,
      deliveredAt: undefined,
      leaseOwner: undefined,
    };
    return { result: sameContent ? 'applied' : 'superseded', update, history: undefined };
  }
  if (sameContent) {
    const update: RowUpdate = {
      state: 'dead',
      attempts,
      nextAttemptAt: current.nextAttemptAt,
      lastError: outcome.error,
      releaseId: undefined,
      deliveredAt: undefined,
      leaseOwner: owner,
    };
    return { result: 'applied', update, history: undefined };
  }
  // The refused payload was replaced: the replacement deserves its own chance.
  return { result: 'superseded', update: { ...sendNewerPayloadNow, lastError: outcome.error }, history: undefined };
}

/**
 * Requeueing a dead row: only the newest payload of its `remote_track_id` comes back. A dead
 * payload followed by a newer enqueue of the track (a row with a higher id, pending, delivered or
 * dead) was superseded: sending it now would put older content at the mother after newer content,
 * and give the track two pending rows. The one exception is the row's own history (an older
 * payload of the same row, delivered while it was being replaced): that is older content.
 */
export interface TrackRow {
  id: number;
  /** Tracks are per panel: two panels' `remote_track_id`s never meet. */
  panel: string;
  remoteTrackId: string | undefined;
  /** For a delivered payload kept as history (replaced in flight), the row that carries the newer payload. */
  historyOf: number | undefined;
}

export function mayRequeue(dead: TrackRow, rows: Iterable<TrackRow>): boolean {
  if (dead.remoteTrackId === undefined) return true;
  for (const other of rows)
    if (other.panel === dead.panel && other.remoteTrackId === dead.remoteTrackId && other.id > dead.id && other.historyOf !== dead.id) return false;
  return true;
}

/**
 * Retention: a delivered row may be deleted once it is older than `deliveredBefore`, unless it is
 * the latest delivery of its `remote_track_id` (the one de-duplication compares with: kept for as
 * long as the track has no newer delivery). A dead row may be deleted once older than
 * `deadBefore`, and so may a cancelled one. Pending rows are never deleted. Age is `updated_at`:
 * when the row was delivered, refused or cancelled. While a feed of deliveries is read
 * (`feedHold` defined), a delivered row also waits until it has a feed position no higher than
 * `feedHold`: every feed has read past it.
 */
export interface RetainedRow extends TrackRow {
  state: OutboxState;
  updatedAt: number;
  /** Order of deliveries (the highest per track is the latest); ties broken by id. */
  deliveredSeq: number | undefined;
  /** Its place in the feed of deliveries, once a feed read gave it one. */
  feedPosition: number | undefined;
}

export function mayPrune(
  row: RetainedRow,
  latestDeliveredOfTrack: RetainedRow | undefined,
  { deliveredBefore, deadBefore, feedHold }: Pick<PruneRequest, 'deliveredBefore' | 'deadBefore' | 'feedHold'>,
): boolean {
  if (row.state === 'dead' || row.state === 'cancelled') return row.updatedAt < deadBefore;
  if (row.state !== 'delivered' || row.updatedAt >= deliveredBefore) return false;
  if (feedHold !== undefined && (row.feedPosition === undefined || row.feedPosition > feedHold)) return false;
  return row.remoteTrackId === undefined || (latestDeliveredOfTrack !== undefined && latestDeliveredOfTrack.id !== row.id);
}

/** Why an unassigned pending row was not adopted: its panel already queues newer content of the track. */
export const ADOPTION_SUPERSEDED =
  'Superseded when rows without a panel were adopted: the panel had stored a newer release of this track since (only the newest is sent).';

// The storage contract of the release outbox: durable rows, leases, atomic de-duplication.

/**
 * `pending` until the mother accepts the release (`delivered`) or refuses it for good (`dead`),
 * unless an operator cancels it first (`cancelled`: never sent; kept like a dead row).
 */
export type OutboxState = 'pending' | 'delivered' | 'dead' | 'cancelled';

export const OUTBOX_STATES: readonly OutboxState[] = ['pending', 'delivered', 'dead', 'cancelled'];

/** Stores may answer synchronously (SQLite, memory) or asynchronously (a network database). */
export type Awaitable<T> = T | Promise<T>;

/**
 * The panel a row belongs to: a single-panel outbox's `client.panelId` (a hash of base URL and
 * key), or your own id of the panel with `panels`. `''` marks a row stored before rows recorded
 * their panel (schema upgrades): no worker sends it until it is adopted (`adoptUnassigned`).
 */
export const UNASSIGNED_PANEL = '';

/** Which rows a read or a requeue looks at: one panel's, or (undefined) every row of the store. */
export interface PanelScope {
  panel?: string | undefined;
}

/** What `enqueue` asks the store to keep. */
export interface NewOutboxRow {
  /** The panel whose credentials (and mother) the release must go out with. */
  panel: string;
  remoteTrackId: string | undefined;
  /** The exact JSON that will be signed and sent (`serializeRelease` output). */
  body: string;
  /** SHA-256 (hex) of `body`: equal hashes mean identical content. */
  contentHash: string;
  /**
   * The enqueuing caller's trace context (W3C `traceparent`, then a space and `tracestate` when
   * there is one), for the delivery span to link to; undefined when tracing is off or nothing was
   * traced. Stores keep it with the row (a replaced payload takes the newer one) and hand it back
   * on claims. Optional for custom stores: one that drops it only loses the link.
   */
  traceContext?: string | undefined;
}

import type { EnqueueOptions } from './enqueue-options.js';
import type { OperatorStore, PanelCounts } from './store-operations.js';

export type { EnqueueOptions, TransactionQuery } from './enqueue-options.js';
export { refuseTransaction } from './enqueue-options.js';
export type { CancelAnswer, CancelRequest, FeedRequest, FeedRow, OperatorStore, PanelCounts } from './store-operations.js';

/**
 * The outbox's own worker would take the new row now (it has room, and its last claim found no
 * more due rows): a store may insert it leased to `owner` (until its now plus `leaseMs`, on the
 * clock its claims use) and call `taken(id)`, sparing a claim. Only for a row it inserts as the
 * only pending row of its track, and never in a caller's transaction. Stores may ignore it: the
 * row is then claimed as usual.
 */
export interface EnqueueLease {
  owner: string;
  leaseMs: number;
  /**
   * The row `id` was inserted leased to `owner`. Call it before `enqueue` settles (a later call
   * is not seen, and the row waits out its lease); the last call counts, should a write be redone.
   */
  taken(id: number): void;
}

/** How an enqueue was folded into an existing row, if it was. */
export type Deduplication = 'replaced-pending' | 'already-delivered';

export interface EnqueueResult {
  /** The row that will carry (or carried) this release. Stable: a replaced payload keeps its id. */
  id: number;
  state: 'pending' | 'delivered';
  /** The mother's `release_id`, when this exact content was already delivered. */
  releaseId: number | undefined;
  /**
   * `replaced-pending`: a release with this `remote_track_id` was still waiting; it now carries
   * this payload and keeps its place. `already-delivered`: the mother already has this exact
   * content for this `remote_track_id`; nothing was queued. `undefined`: a new row was queued.
   */
  deduplicated: Deduplication | undefined;
}

/** A due row leased to one worker; only that worker sends it until the lease expires. */
export interface ClaimedRow {
  id: number;
  /** The panel the row was stored for: the worker sends it with that panel's credentials only. */
  panel: string;
  remoteTrackId: string | undefined;
  body: string;
  contentHash: string;
  /** Attempts made before this one. */
  attempts: number;
  /** What the row's enqueue recorded (NewOutboxRow.traceContext), if anything. */
  traceContext?: string | undefined;
}

export interface ClaimRequest {
  /** Identifies the worker holding the lease (unique per outbox instance). */
  owner: string;
  /** Only rows of this panel (a single-panel outbox never sees another panel's rows). */
  panel: string;
  /** Claim at most this many rows: the worker's free delivery slots. */
  limit: number;
  nowMs: number;
  /** The lease ends at `nowMs + leaseMs`; after that another worker may claim the row. */
  leaseMs: number;
  /**
   * Rows this worker is sending right now: never leased again while in flight (a row whose
   * payload was replaced mid-flight is due at once, but its next send waits for this one).
   */
  exclude?: readonly number[];
}

/**
 * A claim across panels, shared fairly: panels are visited in id order from after `after`, and
 * rows are taken round-robin (every visited panel's first due row, then every panel's second…),
 * so one panel's backlog never holds back another panel's release by more than about one row.
 */
export interface FairClaimRequest extends Omit<ClaimRequest, 'panel'> {
  /** Visit panels whose id sorts after this one (`''`: from the first). */
  after: string;
  /** Visit at most this many panels with pending rows in one claim (bounds the work of a claim). */
  maxPanels: number;
  /** Panels backing off: never claimed from. */
  skipPanels: readonly string[];
  /** Panels probing after a back-off: at most one row each. */
  probePanels: readonly string[];
}

export interface FairClaim {
  rows: ClaimedRow[];
  /**
   * The last panel visited; the next claim goes on after it. Undefined when the visit reached the
   * last panel with pending rows (the next claim starts from the first again).
   */
  lastPanel: string | undefined;
}

/**
 * One step of a retention pass: examine the rows with `id > afterId`, in id order, at most
 * `limit` of them, and delete those the retention rules let go (see `rules.ts`).
 */
export interface PruneRequest {
  /** Delivered rows last changed before this epoch ms may go, unless they are the latest delivery of their track. */
  deliveredBefore: number;
  /** Dead and cancelled rows last changed before this epoch ms may go. */
  deadBefore: number;
  /**
   * A feed of deliveries is being read (`outbox.deliveries`): a delivered row may go only once it
   * has a feed position no higher than this one (the lowest position a feed acknowledged), so no
   * feed misses it. Undefined: no feed holds rows.
   */
  feedHold?: number | undefined;
  afterId: number;
  limit: number;
}

export interface PruneResult {
  deleted: number;
  /** The highest id examined (the next step's `afterId`); undefined when no row was left to examine. */
  lastId: number | undefined;
  /**
   * The highest id in the store when the step ran. A pass ends once it has examined up to the
   * first step's `highestId`: rows added since are too new to go, and chasing them would never end.
   */
  highestId: number | undefined;
}

/** What happened to one attempt, as the worker reports it to the store. */
export type DeliveryOutcome =
  /**
   * The mother accepted the release. `releaseId` is undefined when it answered 2xx with a body
   * we could not read; `note` then says why (kept as the row's `lastError`).
   */
  | { kind: 'delivered'; releaseId: number | undefined; note?: string }
  /** `notSent`: put back without a push (its mother is held): the attempt is not counted. */
  | { kind: 'retry'; nextAttemptAt: number; error: string; notSent?: boolean }
  | { kind: 'dead'; error: string };

/**
 * `applied`: recorded as reported, or found already recorded so by the same owner (a delivered
 * or dead row keeps who recorded it): a settle repeated because its answer was lost after the
 * commit must not read as `stale`, or its worker would never emit the event it owes.
 * `superseded`: the payload was replaced while in flight; the row stays pending with the newer
 * payload (a delivered older payload is kept as its own row). `stale`: the row is no longer this
 * worker's (lease taken over, settled by another, or with another outcome); left alone.
 */
export type SettleResult = 'applied' | 'superseded' | 'stale';

/** A row a worker holds, as it claimed it: what `recheck` compares the stored row with. */
export type HeldRow = Pick<ClaimedRow, 'id' | 'contentHash'>;

/** A held row as it is now, when it is no longer as claimed (see `recheck`). */
export type ChangedRow = Pick<StoredRow, 'id' | 'state' | 'body' | 'contentHash'>;

/** One outcome to record: what `settle` takes, for `settleMany`. */
export interface SettleRequest {
  claim: ClaimedRow;
  outcome: DeliveryOutcome;
  nowMs: number;
}

/** One row as stored; what `list` returns. Times are epoch milliseconds. */
export interface StoredRow {
  id: number;
  /** `''` (UNASSIGNED_PANEL) for a row stored before rows recorded their panel. */
  panel: string;
  state: OutboxState;
  remoteTrackId: string | undefined;
  body: string;
  contentHash: string;
  attempts: number;
  nextAttemptAt: number;
  lastError: string | undefined;
  releaseId: number | undefined;
  /** The lease's holder while pending; on a delivered or dead row, the owner that recorded it. */
  leaseOwner: string | undefined;
  leaseExpiresAt: number | undefined;
  createdAt: number;
  updatedAt: number;
  deliveredAt: number | undefined;
}

/**
 * Where the outbox keeps its rows (in the spirit of express-rate-limit's `Store`). Every method
 * is atomic on its own; the worker never needs a transaction spanning two calls, so a store
 * shared by several processes or hosts can be added without touching the worker.
 * The row rules every store must follow live in `rules.ts`.
 */
export interface OutboxStore extends OperatorStore {
  /**
   * Stores a release, applying the de-duplication rules. Resolves once the row is durable.
   * `lease` (optional to honour): see EnqueueLease.
   */
  enqueue(row: NewOutboxRow, nowMs: number, options?: EnqueueOptions, lease?: EnqueueLease): Awaitable<EnqueueResult>;
  /**
   * Leases up to `limit` pending rows that are due and not leased, oldest due first. A row whose
   * `remote_track_id` has an older pending row waits for it, so updates reach the mother in order.
   */
  claimDue(request: ClaimRequest): Awaitable<ClaimedRow[]>;
  /** Leases due rows of any panel but `''`, shared fairly between panels (`panels` mode needs it). */
  claimFair?(request: FairClaimRequest): Awaitable<FairClaim>;
  /** Records the outcome of an attempt on a claimed row. */
  settle(claim: ClaimedRow, owner: string, outcome: DeliveryOutcome, nowMs: number): Awaitable<SettleResult>;
  /**
   * Records several outcomes at once (one round trip, one commit), each exactly as `settle` would;
   * results in the same order. Optional: without it the worker settles one row at a time. When
   * only some were recorded, throw a PartialSettleError saying which (any other error means none
   * was): the worker then records again only the others.
   */
  settleMany?(settles: readonly SettleRequest[], owner: string): Awaitable<SettleResult[]>;
  /**
   * Of the rows a worker holds (`held`, as it claimed them), those whose payload an enqueue has
   * replaced since (another `contentHash`) or that are no longer pending, each as it is now; rows
   * left out are unchanged. One read, no lock. The worker asks before it sends rows it claimed
   * ahead (or was handed) and that waited for a slot, so that a release replaced while it waited
   * goes out with its newest content only. Optional: without it such a row is sent as claimed,
   * and its newer content follows (`superseded`).
   */
  recheck?(held: readonly HeldRow[]): Awaitable<ChangedRow[]>;
  /** Number of rows per state (of one panel, or of all). */
  counts(scope?: PanelScope): Awaitable<Record<OutboxState, number>>;
  /** When the oldest pending row was stored (epoch ms), or undefined when none is pending. Optional for custom stores. */
  oldestPending?(scope?: PanelScope): Awaitable<number | undefined>;
  /**
   * Rows in id order, optionally of one state, one `id`, one `panel`, one `track` (its
   * `remote_track_id`) and only those after id `afterId` (stores must honour all five), at most
   * `limit` of them.
   */
  list(query: {
    state: OutboxState | undefined;
    limit: number;
    id?: number | undefined;
    panel?: string | undefined;
    track?: string | undefined;
    afterId?: number | undefined;
  }): Awaitable<StoredRow[]>;
  /**
   * Moves one dead row (`id`) or every dead row (`id` undefined) of the scope back to pending;
   * returns how many. A dead row with a newer row for its panel's `remote_track_id` stays dead (see `rules.ts`).
   */
  requeueDead(id: number | undefined, nowMs: number, scope?: PanelScope): Awaitable<number>;
  /**
   * Gives every row stored before rows recorded their panel (`''`) to `panel`; returns how many.
   * A pending one whose track already has a pending row in `panel` is marked dead (the newer wins).
   */
  adoptUnassigned?(panel: string, nowMs: number): Awaitable<number>;
  /** Pending and dead counts of the panels that have any, most pending first, at most `limit` panels. */
  panelCounts?(limit: number): Awaitable<PanelCounts[]>;
  /** One bounded step of retention. Optional: without it, `retention` has nothing to call. */
  prune?(request: PruneRequest): Awaitable<PruneResult>;
  close(): Awaitable<void>;
}

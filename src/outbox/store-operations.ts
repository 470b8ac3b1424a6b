// The store contract of what operators do to an outbox: cancel a release, pause delivery (shared
// by every process through the store), and read the feed of deliveries in the order they committed.

import type { OutboxState } from './store.js';

/** Which release `cancel` stops: one row by id, or the pending row of one panel's track. */
export interface CancelRequest {
  /** The row's id. With it, `panel` (when given) must be the row's panel, or it is not found. */
  id?: number | undefined;
  /** The panel whose `track` is meant (with `track`), or the only panel `id` may belong to. */
  panel?: string | undefined;
  /** A `remote_track_id`: its pending row is cancelled (there is at most one per panel). */
  track?: string | undefined;
  nowMs: number;
  /** Kept as the row's `lastError`, so a list says why it stopped. */
  note: string;
}

/**
 * What `cancel` did. `cancelled`: the row was pending and no worker held it; it is now
 * `cancelled` and never sent. `in-flight`: a worker holds its lease (an attempt may be at the
 * mother right now); nothing was changed — ask again after `leaseExpiresAt` or once the attempt
 * ends. `not-pending`: the row was already delivered, dead or cancelled (`state`, and the
 * mother's `releaseId` when delivered); for a track, its newest row. `not-found`: no such row.
 */
export interface CancelAnswer {
  result: 'cancelled' | 'in-flight' | 'not-pending' | 'not-found';
  id: number | undefined;
  state: OutboxState | undefined;
  /** When the holder's lease ends (epoch ms), for `in-flight`. */
  leaseExpiresAt?: number | undefined;
  releaseId?: number | undefined;
}

/**
 * One delivery as the feed gives it. `position` is the feed's own order: a delivery is given a
 * position only once it has committed, positions are handed out under one lock, so a reader that
 * resumes after position P never misses a delivery that committed later (ids can commit out of
 * order; positions cannot).
 */
export interface FeedRow {
  position: number;
  id: number;
  panel: string;
  remoteTrackId: string | undefined;
  /** The mother's `release_id` (undefined when its 2xx answer could not be read). */
  releaseId: number | undefined;
  contentHash: string;
  deliveredAt: number;
}

export interface FeedRequest {
  /** Deliveries with a position above this one (0: from the first). */
  after: number;
  limit: number;
  /** Only this panel's deliveries (a single-panel outbox); undefined: every panel's. */
  panel?: string | undefined;
}

/**
 * Names of the values kept with `setControl`: `pause` (the whole outbox; value `'1'`),
 * `pause:<panel>` (one panel), `feed:<name>` (a feed's acknowledged position, decimal).
 * Names are at most 220 characters (a panel id is at most 200); values at most 64.
 */
export const CONTROL_NAME_MAX = 220;

/** What a store implements for operators (the four built-in stores do; custom stores may not). */
export interface OperatorStore {
  /**
   * Cancels one pending release that no worker holds (see CancelAnswer). Atomic: a worker's claim
   * either takes the row first (`in-flight`) or never sees it pending again.
   */
  cancel?(request: CancelRequest): Awaitable<CancelAnswer>;
  /** Every control value (a few: pauses and feed positions), read in one statement. */
  controls?(): Awaitable<Record<string, string>>;
  /** Sets (or with `undefined`, removes) one control value; durable once it resolves. */
  setControl?(name: string, value: string | undefined, nowMs: number): Awaitable<void>;
  /**
   * Gives every delivered row that has no position yet one (above every position given so far,
   * in delivery time then id order, under a lock so two readers never interleave), then returns
   * the deliveries after `after` in position order, at most `limit`.
   */
  deliveries?(request: FeedRequest): Awaitable<FeedRow[]>;
}

/** One panel's waiting releases, as `panelCounts` ranks them (which panels are backed up). */
export interface PanelCounts {
  panel: string;
  pending: number;
  dead: number;
  /** When its oldest pending row was stored (epoch ms). */
  oldestPendingAt: number | undefined;
}

type Awaitable<T> = T | Promise<T>;

// What createReleaseOutbox() gives its caller: the outbox's methods, and what they take and answer.
import type { Release } from '../release.js';
import type { OutboxEventName, OutboxListener } from './events.js';
import type { DeliveriesQuery, DeliveryPage } from './operations/delivery-feed.js';
import type { CancelOptions, CancelResult } from './operations/operator-api.js';
import type { PausedNow } from './operations/pauses.js';

export type { DeliveriesQuery, Delivery, DeliveryPage } from './operations/delivery-feed.js';
export type { CancelOptions, CancelResult } from './operations/operator-api.js';
export type { PausedNow } from './operations/pauses.js';

import type { EnqueueOptions, EnqueueResult, OutboxState, PanelCounts, StoredRow } from './store.js';

export interface OutboxStats {
  /** The counts are of this panel (a single-panel outbox's own, or the one asked for); undefined: every panel. */
  panel: string | undefined;
  pending: number;
  delivered: number;
  dead: number;
  /** Releases an operator cancelled before they were sent (kept like dead ones, then pruned). */
  cancelled: number;
  /**
   * Deliveries this instance has under way: pushes (at most `concurrency`) and outcomes still
   * being recorded (at most `max(concurrency, 8)` more).
   */
  inFlight: number;
  /**
   * An operator paused delivery (`pause()`) of the whole outbox or of this panel, as this process
   * last read it (at most a second old): releases wait, nothing is lost.
   */
  paused: boolean;
  /** Epoch ms until which this worker holds off after failures (mother down, 401, Retry-After). */
  pausedUntil: number | undefined;
  /** When the oldest pending release was stored (epoch ms); undefined when none is pending (or a custom store cannot tell). */
  oldestPendingAt: number | undefined;
  /** Panels this instance is holding back after failures (their mother down, their key refused, unknown to the resolver). */
  failingPanels: number;
}

/** One stored release, as `list()` shows it. Times are epoch milliseconds. */
export interface OutboxEntry {
  id: number;
  /** The panel it was stored for; `''` for a row stored before rows recorded their panel (see `adoptUnassigned`). */
  panel: string;
  state: OutboxState;
  remoteTrackId: string | undefined;
  /** The release exactly as it is (or was) sent. */
  release: Release;
  attempts: number;
  nextAttemptAt: number;
  /** Why the last attempt failed; for a dead release, the mother's refusal. */
  lastError: string | undefined;
  /** The mother's `release_id`, once delivered. */
  releaseId: number | undefined;
  /** True while some worker holds an unexpired lease on it (a push is in flight). */
  leased: boolean;
  createdAt: number;
  updatedAt: number;
  deliveredAt: number | undefined;
}

/** Per-call options of `enqueue`. */
export interface OutboxEnqueueOptions extends EnqueueOptions {
  /** With `panels`: your id of the panel the release belongs to (required then; refused otherwise). */
  panel?: string;
}

/** Which panel a read or a retry is about. With `panels`, leaving it out means every panel. */
export interface PanelQuery {
  /** Your id of one panel (with `panels`); a single-panel outbox only ever sees its own panel. */
  panel?: string;
}

export interface ReleaseOutbox {
  /**
   * Validates, then stores the release durably; resolves once it is committed. Delivery follows in
   * the background. With the PostgreSQL or MySQL store, `{ transaction }` (your driver's connection
   * inside BEGIN, or a Knex, Kysely or Drizzle transaction) stores it in your open transaction
   * instead: it is sent once you commit (at the worker's next poll), never if you roll back. With
   * `panels`, `{ panel }` says whose release it is.
   */
  enqueue(release: Release, options?: OutboxEnqueueOptions): Promise<EnqueueResult>;
  stats(query?: PanelQuery): Promise<OutboxStats>;
  /**
   * Stored releases in queue order: of one state, of one track (`track`: its `remote_track_id`),
   * after id `after` (the last id of the previous page). @default limit 100 (at most 1000)
   */
  list(query?: { state?: OutboxState; limit?: number; track?: string; after?: number } & PanelQuery): Promise<OutboxEntry[]>;
  /** One stored release by id, or undefined when there is none. */
  get(id: number): Promise<OutboxEntry | undefined>;
  /** Moves a dead release back to pending. Resolves false when `id` is not a dead release. */
  retry(id: number): Promise<boolean>;
  /** Moves every dead release (of one panel, with `panels` and `{ panel }`) back to pending; resolves with how many. */
  retryAllDead(query?: PanelQuery): Promise<number>;
  /**
   * Pending and dead counts of the panels that have any, most pending first (at most `limit`,
   * default 100): which panels are backed up. Needs a store with `panelCounts()` (all built-in ones).
   */
  panelStats(limit?: number): Promise<PanelCounts[]>;
  /**
   * Takes in the rows stored before rows recorded their panel (tables written by versions before
   * 0.2): they become this outbox's panel's (or `panel`'s, with `panels`) and are delivered.
   * Call it only from the panel that stored them: no worker sends such rows until then.
   * Resolves with how many rows were adopted.
   */
  adoptUnassigned(panel?: string): Promise<number>;
  /**
   * Runs a retention pass now (they also run every `retention.intervalMs`); resolves with the
   * rows deleted. Resolves 0 with `retention: false`.
   */
  prune(): Promise<number>;
  /** Starts the worker (only needed with `autoStart: false`). */
  start(): void;
  /**
   * Resolves when nothing is pending any more (every release delivered or dead), keeping the
   * process alive meanwhile. Pass `AbortSignal.timeout(ms)` to give up: a down mother never drains.
   */
  drain(options?: { signal?: AbortSignal }): Promise<OutboxStats>;
  /** Stops the worker, waits for pushes in flight to be recorded, and closes the store it opened. */
  close(): Promise<void>;
  /**
   * Cancels a pending release: it is never sent (`cancelled`), or says why not — `delivered` (too
   * late: the mother has it, `releaseId`), `dead`, `already-cancelled`, `not-found`. A release a
   * worker is sending right now is waited for (that attempt, at most its lease), then cancelled if
   * it did not reach the mother; `{ wait: false }` answers `in-flight` at once instead.
   */
  cancel(id: number, options?: CancelOptions): Promise<CancelResult>;
  /** Cancels the pending release of one track (`remote_track_id`): an artist deleted it. Same answers as `cancel`. */
  cancelTrack(remoteTrackId: string, options?: CancelOptions): Promise<CancelResult>;
  /**
   * Pauses delivery of the whole outbox (with `panels`; a single-panel outbox pauses its panel) or
   * of one panel (`{ panel }`). Kept in the store: every process sharing it stops claiming within
   * a second, and so does a restart. Releases keep being stored and wait; pushes already in flight
   * finish. Resolves once the pause is stored.
   */
  pause(query?: PanelQuery): Promise<void>;
  /** Ends a pause set by `pause` (with the same `panel`); delivery goes on at once. */
  resume(query?: PanelQuery): Promise<void>;
  /** What is paused now, read from the store. */
  paused(): Promise<PausedNow>;
  /**
   * Every delivery in the order the store recorded it, after the position `after` (see
   * docs/outbox.md, "Learning every delivery"): keep `cursor` in your own database with what
   * you did with the page, and no crash loses or repeats a delivery.
   */
  deliveries(query?: DeliveriesQuery): Promise<DeliveryPage>;
  /** Stops a named feed (read for `panel`, when it was) holding back retention. */
  forgetFeed(name: string, query?: PanelQuery): Promise<void>;
  on<E extends OutboxEventName>(event: E, listener: OutboxListener<E>): ReleaseOutbox;
  off<E extends OutboxEventName>(event: E, listener: OutboxListener<E>): ReleaseOutbox;
}

/** Stored rows as `list()` shows them: the release parsed back, whether a worker holds it now. */
export function entriesOf(rows: StoredRow[], nowMs: number): OutboxEntry[] {
  return rows.map(({ body, contentHash: _hash, leaseOwner: _owner, leaseExpiresAt, ...row }) => ({
    ...row,
    release: (JSON.parse(body) as { release: Release }).release,
    leased: row.state === 'pending' && leaseExpiresAt !== undefined && leaseExpiresAt > nowMs,
  }));
}

// What the delivery worker (worker.ts) takes from the outbox, and what it offers it.
import type { OutboxEmitter } from '../events.js';
import type { Pauses } from '../operations/pauses.js';
import type { ResolvedOutboxConfig } from '../options.js';
import type { PanelRouting } from '../panels/panel-routing.js';
import type { ClaimedRow, EnqueueLease, OutboxStore } from '../store.js';
import type { MotherRate } from './mother-rate.js';

/** The resolved outbox options the worker uses, plus what the outbox wires in. */
export type WorkerConfig = Pick<
  ResolvedOutboxConfig,
  | 'concurrency'
  | 'baseDelayMs'
  | 'maxDelayMs'
  | 'authRetryDelayMs'
  | 'leaseMs'
  | 'pushTimeoutMs'
  | 'pollIntervalMs'
  | 'now'
  | 'random'
  | 'unresolvedRetryMs'
  | 'tracing'
> & {
  /** With `maxPerSecond`: the turns at each mother (the outbox stops it before the worker). */
  rate?: MotherRate | undefined;
  store: OutboxStore;
  /** Which rows to claim, and whose credentials send each. */
  routing: PanelRouting;
  events: OutboxEmitter;
  /** What operators paused (read from the store): nothing of a paused panel is claimed or sent. */
  pauses: Pauses;
  /** Lease owner name, unique per outbox instance. */
  owner: string;
  /** Called after every recorded attempt and every poll tick; drain() checks the counts there. */
  onProgress: () => void;
};

/** A lease given for an enqueue's row; `since`: when it was given (monotonic ms), the start of its wait for a slot. */
export type WorkerLease = Omit<EnqueueLease, 'taken'> & { since: number };

export interface DeliveryWorker {
  start(): void;
  /**
   * Look for due rows now (after an enqueue or a requeue) instead of at the next poll.
   * `mayHaveDue` false: nothing new may be due in the store (a row was only handed to this worker).
   */
  kick(mayHaveDue?: boolean): void;
  /**
   * A lease for the row an enqueue is about to insert, when this worker would take it now (see
   * EnqueueLease); every lease given must be answered with handedOff().
   */
  leaseFor(panel: string): WorkerLease | undefined;
  /** The enqueue given `lease` ended: with the row it inserted leased to this worker, or without. */
  handedOff(lease: WorkerLease, row: ClaimedRow | undefined): void;
  /** An enqueue of this process (outside a caller's transaction) replaced pending row `id`'s payload. */
  replaced(id: number): void;
  /** Takes row `id` out of the rows waiting for a slot, if it waits there (not being sent). */
  takeBack(id: number): ClaimedRow | undefined;
  /** Gives a row taken back to the store unsent (due at once, no attempt counted). */
  handBack(row: ClaimedRow): Promise<void>;
  /** Stops claiming rows; resolves once every push in flight has been recorded. */
  stop(): Promise<void>;
  /** While true, the poll timer keeps the process alive (someone awaits drain()). */
  setKeepAlive(on: boolean): void;
  isRunning(): boolean;
  inFlight(): number;
  /** Rows this worker holds: being sent, recorded, or claimed ahead (each a pending row). */
  holding(): number;
  /** Epoch ms until which a single-panel worker holds off after failures, if it does. */
  pausedUntil(): number | undefined;
  /** Panels backing off after failures (with `panels`; 0 or 1 for a single panel). */
  failingPanels(): number;
  /** Up to `limit` of those panels' ids. */
  failingPanelIds(limit: number): string[];
}

// How many rows the worker claims ahead of its free slots, so a slot that frees up starts its next
// push at once, without a round trip to the store: as many as the slots send in half the time a
// row may wait for one, within bounds, from the recent pushes' duration.
import { LEASE_MARGIN_MS } from '../options.js';
import type { WorkerConfig } from './worker-contract.js';

/** Rows claimed ahead, at least (a single slot still gets a few, so claims come in batches). */
export const MIN_CLAIM_AHEAD = 8;
/**
 * Rows claimed ahead, at most, while pushes are quick. Claims then come in batches of about 48
 * (see REFILL_BELOW): a claim's cost is mostly fixed (its transaction and commit, the rows this
 * worker holds stepped over), so on SQLite at concurrency 1 one claim of 48 took 12.9 µs of the
 * event loop per release where claims of 16 took 24.8.
 */
const MAX_CLAIM_AHEAD = 64;
/** A claim for rows ahead is made once those left fall below this share of `ahead`. */
export const REFILL_BELOW = 1 / 4;

export class ClaimAhead {
  /**
   * How long a row claimed ahead may wait for a slot: its push must still start with a whole push
   * and the time to record it left on its lease.
   */
  readonly maxWaitMs: number;
  /**
   * Whether rows are claimed ahead at all: not where the lease leaves no such room, nor with many
   * panels (rows waiting in a queue of ours would defeat the panels' shares of the slots: a
   * hanging tenant's rows would take each slot as it frees up), nor under `maxPerSecond` (rows
   * claimed ahead would wait out their leases for turns, and a claim per turn costs little).
   */
  readonly enabled: boolean;
  /** Recent pushes' duration, smoothed (ms); undefined before the first answer. */
  private pushMs: number | undefined;

  constructor(config: Pick<WorkerConfig, 'leaseMs' | 'pushTimeoutMs' | 'concurrency' | 'rate'>, singlePanel: boolean) {
    this.concurrency = config.concurrency;
    this.maxWaitMs = config.leaseMs - LEASE_MARGIN_MS - (config.pushTimeoutMs ?? config.leaseMs / 2);
    this.enabled = this.maxWaitMs > 0 && singlePanel && config.rate === undefined;
  }

  private readonly concurrency: number;

  /** A push was answered after `durationMs`. */
  pushed(durationMs: number): void {
    this.pushMs = this.pushMs === undefined ? durationMs : this.pushMs * 0.8 + durationMs * 0.2;
  }

  /**
   * Rows to claim ahead: between max(8, concurrency) and max(64, concurrency). A slow mother's rows
   * are not claimed so far ahead that they wait out their lease and go back unsent (which costs a
   * write and a claim each).
   */
  count(): number {
    if (!this.enabled) return 0;
    const least = Math.max(MIN_CLAIM_AHEAD, this.concurrency);
    if (this.pushMs === undefined) return least;
    const sendable = Math.floor((this.concurrency * this.maxWaitMs) / 2 / Math.max(this.pushMs, 0.001));
    return Math.min(Math.max(MAX_CLAIM_AHEAD, this.concurrency), Math.max(least, sendable));
  }

  /** Whether a row claimed at `claimedAt` (monotonic ms) waited too long to be sent now. */
  waitedTooLong(claimedAt: number): boolean {
    return this.enabled && performance.now() - claimedAt > this.maxWaitMs;
  }
}

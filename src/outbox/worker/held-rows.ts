// Rows claimed ahead (or handed off) waiting for a free slot, kept current: an enqueue may replace
// a waiting row's payload, and the row must then go out with the newest content only, not with
// the content it was claimed with followed by the newer one.
import type { ClaimedRow, OutboxStore } from '../store.js';

/**
 * A waiting row last read from the store longer ago than this is read again before it is sent
 * (with every row waiting, in one statement). Rows claimed for a free slot start within a claim's
 * round trip of being read, and rows that wait no longer than this are treated the same: a
 * replacement committed in those last moments is one made while the row was being sent (it
 * follows, `superseded`). Longer waits, which come with every slot busy, cost one read per this
 * many ms at most (READ_AHEAD_MS: in practice one per 15 ms, one per ~21 releases at the 1,400
 * releases/s of the benchmark's mother).
 */
export const FRESH_MS = 20;
/**
 * How long before a waiting row's FRESH_MS run out its recheck starts: a read that answers in
 * that time (one round trip) holds up no push. The rows are then read at most once per 15 ms.
 */
const READ_AHEAD_MS = 5;
/** After a failed read, how long before the next try (the rows wait meanwhile, or go back unsent). */
export const RECHECK_RETRY_MS = 1000;

interface Waiting {
  row: ClaimedRow;
  /** When it was claimed or handed off (monotonic ms): the start of its wait for a slot. */
  claimedAt: number;
  /** When the store was last read for it (monotonic ms): its claim's start, or a recheck's. */
  seenAt: number;
}

export interface HeldRowsHooks {
  /** The store's `recheck`; without it, rows are sent as claimed (as before it existed). */
  recheck: OutboxStore['recheck'];
  /** The row is no longer pending (settled by another worker): let it go, unsent and unsettled. */
  gone(row: ClaimedRow): void;
  /** A recheck ended: start what may start now. With `error`, it failed (tried again after RECHECK_RETRY_MS). */
  checked(error?: unknown): void;
}

/** The queue of rows waiting for a slot, oldest first. */
export class HeldRows {
  private queue: Waiting[] = [];
  /** When this process last replaced the payload of a row that may be waiting here (monotonic ms). */
  private replacedAt = Number.NEGATIVE_INFINITY;
  /** The recheck under way, if any. */
  private checking: Promise<void> | undefined;
  private retryAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly hooks: HeldRowsHooks) {}

  get length(): number {
    return this.queue.length;
  }

  /** `seenAt`: when the store was read for it, at the latest (a claim's start, a hand-off's lease). */
  push(row: ClaimedRow, claimedAt: number, seenAt = claimedAt): void {
    this.queue.push({ row, claimedAt, seenAt });
  }

  has(id: number): boolean {
    return this.queue.some((waiting) => waiting.row.id === id);
  }

  /**
   * An enqueue of this process replaced a pending row's payload that is (or may be about to be)
   * waiting here: every row read before now is read again before it is sent.
   */
  replaced(): void {
    this.replacedAt = performance.now();
  }

  /** The oldest waiting row, or undefined when none waits. */
  first(): Waiting | undefined {
    return this.queue[0];
  }

  /**
   * Whether `waiting` (the first row) may be sent as held. When not, a recheck of every waiting
   * row is started (unless one is under way, or failed a moment ago); `checked` says when it ends.
   * It starts a little ahead of time too (READ_AHEAD_MS), so that in a steady stream of releases
   * no row waits for it.
   */
  current(waiting: Waiting): boolean {
    const { recheck } = this.hooks;
    // A release without remote_track_id is never replaced: each enqueue of one is a row of its own.
    if (recheck === undefined || waiting.row.remoteTrackId === undefined) return true;
    const at = performance.now();
    const age = at - waiting.seenAt;
    const fresh = waiting.seenAt >= this.replacedAt && age <= FRESH_MS;
    if (this.checking === undefined && at >= this.retryAt && (!fresh || age > FRESH_MS - READ_AHEAD_MS)) {
      this.checking = this.check(recheck, at).then((failure) => {
        this.checking = undefined;
        this.hooks.checked(failure);
      });
    }
    return fresh;
  }

  /** Resolves once no recheck is under way (the worker stops: its store may be closed next). */
  async settled(): Promise<void> {
    await this.checking;
  }

  /** Takes the first row out (to send it, or to hand it back). */
  shift(): Waiting | undefined {
    return this.queue.shift();
  }

  /** Takes row `id` out, if it waits here (a cancel wants it back unsent). */
  take(id: number): Waiting | undefined {
    const at = this.queue.findIndex((waiting) => waiting.row.id === id);
    return at < 0 ? undefined : this.queue.splice(at, 1)[0];
  }

  /** Takes every row out (the worker stops). */
  takeAll(): Waiting[] {
    return this.queue.splice(0);
  }

  /** Reads the waiting rows again and applies what changed; resolves with the error, if it failed. */
  private async check(recheck: NonNullable<OutboxStore['recheck']>, startedAt: number): Promise<unknown> {
    const read = this.queue.filter(({ row }) => row.remoteTrackId !== undefined);
    try {
      const changed = new Map((await recheck(read.map(({ row }) => row))).map((row) => [row.id, row]));
      for (const waiting of read) {
        const now = changed.get(waiting.row.id);
        waiting.seenAt = startedAt;
        if (now === undefined) continue;
        if (now.state === 'pending') {
          // Replaced while it waited: it goes out with the newest content, in its place.
          waiting.row = { ...waiting.row, body: now.body, contentHash: now.contentHash };
        } else if (this.queue.includes(waiting)) {
          this.queue.splice(this.queue.indexOf(waiting), 1);
          this.hooks.gone(waiting.row);
        }
      }
    } catch (error) {
      this.retryAt = performance.now() + RECHECK_RETRY_MS;
      return error;
    }
    return undefined;
  }
}

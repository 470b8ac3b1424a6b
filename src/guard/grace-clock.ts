// Measures how much grace is left in a way that a clock set back cannot stretch.
import { performance } from 'node:perf_hooks';
import { parseIsoDate } from '../text.js';

/** A wall clock that went back by more than this (across a restart) is treated as tampering. */
export const CLOCK_TOLERANCE_MS = 5 * 60_000;
const DAY_MS = 24 * 60 * 60 * 1000;
/** One function for every clock (a default written inline would be a closure per panel). */
const monotonicNow = () => performance.now();

export interface GraceInput {
  /** Local wall time (ms) the last verified verdict arrived. */
  lastSuccessAt: number;
  gracePeriodMs: number;
  /** The mother's `server_time` (seconds) in that verdict, if it sent one. */
  serverTime: number | null;
  /** The license's `expires_at` (`YYYY-MM-DD`), if any. */
  expiresAt: string | undefined;
}

/**
 * Grace used to be `lastSuccessAt + gracePeriodMs` compared with the wall clock, so setting the
 * clock back 30 days gave 30 more days of grace. Now:
 * - elapsed time is the largest of the monotonic time since the verdict (immune to clock
 *   changes within a process), the wall time since it, and the latest wall time ever seen
 *   since it (the state file carries that high-water mark across restarts);
 * - `expires_at` is compared with the best estimate of the mother's time: our latest reading
 *   plus the measured offset, or the verdict's `server_time` plus the elapsed time.
 * A clock that jumps forward only makes grace end sooner: the safe side.
 */
export class GraceClock {
  private highWater = Number.NEGATIVE_INFINITY;
  /** The monotonic reading that corresponds to `lastSuccessAt` of the current verdict. */
  private successMono: number | null = null;

  constructor(
    private readonly wall: () => number,
    /** The mother's clock minus ours (the panel's client, which measures it). */
    private readonly offset: { clockOffsetMs(): number },
    private readonly monotonic: () => number = monotonicNow,
  ) {}

  /** Reads the wall clock and remembers the latest reading ever seen. */
  now(): number {
    const now = this.wall();
    if (now > this.highWater) this.highWater = now;
    return now;
  }

  /** The latest wall time ever seen, persisted so a restart cannot forget it. */
  latestSeen(): number {
    return Math.max(this.highWater, this.wall());
  }

  /** Raises the high-water mark from a persisted value. */
  seen(at: number): void {
    if (at > this.highWater) this.highWater = at;
  }

  /** How far the wall clock is behind the latest time seen (0 when it never went back). */
  rolledBackMs(): number {
    return Math.max(0, this.highWater - this.wall());
  }

  /** Anchors the monotonic clock to a verdict received (or restored) with this `lastSuccessAt`. */
  anchor(lastSuccessAt: number): void {
    this.successMono = this.monotonic() - Math.max(0, this.now() - lastSuccessAt);
  }

  /** Anchors the monotonic clock so that `elapsedMs` have passed since the last success (a restored panel). */
  anchorElapsed(elapsedMs: number): void {
    this.successMono = this.monotonic() - Math.max(0, elapsedMs);
  }

  elapsedSince(lastSuccessAt: number): number {
    this.now();
    const byWall = this.highWater - lastSuccessAt;
    const byMonotonic = this.successMono === null ? 0 : this.monotonic() - this.successMono;
    return Math.max(byWall, byMonotonic);
  }

  /** Milliseconds of grace left (≤ 0 when it has run out). */
  remainingMs({ lastSuccessAt, gracePeriodMs, serverTime, expiresAt }: GraceInput): number {
    const byGrace = gracePeriodMs - this.elapsedSince(lastSuccessAt);
    const expiryDay = parseIsoDate(expiresAt);
    if (expiryDay === null) return byGrace;
    return Math.min(byGrace, expiryDay + DAY_MS - this.motherNow(serverTime, lastSuccessAt));
  }

  /**
   * The best estimate of the mother's time (ms): our latest reading plus the measured offset, or
   * the verdict's `server_time` plus the time elapsed since, whichever is later (a clock set back
   * cannot make a license last longer, nor its warnings come later).
   */
  motherNow(serverTime: number | null, lastSuccessAt: number): number {
    const elapsed = this.elapsedSince(lastSuccessAt);
    return Math.max(this.highWater + this.offset.clockOffsetMs(), serverTime === null ? Number.NEGATIVE_INFINITY : serverTime * 1000 + elapsed);
  }
}

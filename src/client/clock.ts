// Clock-skew correction: the offset between the local clock and the mother's (after the AWS SDK).

/** A skew beyond this is not believed: a clock a day off needs a human, not a silent fix. */
export const MAX_SKEW_MS = 24 * 60 * 60 * 1000;
/** A 401 whose Date differs from ours by more than this is worth one retry with a corrected clock. */
export const RETRY_SKEW_MS = 30 * 1000;

const clamp = (value: number) => Math.max(-MAX_SKEW_MS, Math.min(MAX_SKEW_MS, value));

/**
 * One panel's learned offset (mother minus local, in ms). A class, not closures: `panels` mode
 * keeps one per panel, and its methods live once on the prototype.
 */
export class SkewClock {
  private offset = 0;

  constructor(private readonly localNowMs: () => number) {}

  /** Local time plus the learned offset, in whole Unix seconds: the value sent as X-Timestamp. */
  nowSeconds(): number {
    return Math.floor((this.localNowMs() + this.offset) / 1000);
  }

  /** Current offset in milliseconds (mother minus local). */
  offsetMs(): number {
    return this.offset;
  }

  /** Learns from `server_time` of a successful answer, taking the round trip's midpoint. */
  fromServerTime(serverTimeSeconds: number, sentAtMs: number, receivedAtMs: number): void {
    const midpoint = (sentAtMs + receivedAtMs) / 2;
    // server_time is truncated to whole seconds; add half a second to centre the estimate.
    const measured = serverTimeSeconds * 1000 + 500 - midpoint;
    // Sub-second differences are noise at whole-second resolution; keep the old offset then.
    if (Math.abs(measured - this.offset) >= 1000) this.offset = clamp(measured);
  }

  /** Learns from the HTTP `Date` of a 401. Returns true when the offset moved enough to retry. */
  fromDateHeader(dateHeader: string | null, sentAtMs: number, receivedAtMs: number): boolean {
    if (!dateHeader) return false;
    const serverMs = Date.parse(dateHeader);
    if (!Number.isFinite(serverMs)) return false;
    const measured = clamp(serverMs + 500 - (sentAtMs + receivedAtMs) / 2);
    if (Math.abs(measured - this.offset) < RETRY_SKEW_MS) return false;
    this.offset = measured;
    return true;
  }
}

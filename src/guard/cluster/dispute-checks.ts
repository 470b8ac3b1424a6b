// A record whose verdict contradicts ours and that the mother's clock cannot place (a replay, or
// a mother whose clock stepped back: apply-shared.ts) is settled by our own check, since our own
// answer always applies. At most one a minute, so replaying records cannot make an instance call
// the mother more than that; one asked for within the minute is made when it is up, so a replay
// spending the minute just before a genuine unlock cannot leave the instance locked.

/** How often a disputed record may make this instance check the mother itself (ms). */
const DISPUTE_CHECK_EVERY_MS = 60_000;

export class DisputeChecks {
  private last = Number.NEGATIVE_INFINITY;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly checkNow: () => void) {}

  /** A disputed record arrived: check now, or when the minute since the last such check is up. */
  ask(): void {
    if (this.closed || this.timer !== undefined) return;
    const wait = this.last + DISPUTE_CHECK_EVERY_MS - performance.now();
    if (wait <= 0) {
      this.check();
      return;
    }
    this.timer = setTimeout(() => this.check(), wait);
    this.timer.unref();
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
  }

  private check(): void {
    this.timer = undefined;
    if (this.closed) return;
    this.last = performance.now();
    this.checkNow();
  }
}

// The worker's one timer for everything (the poll, a retry's due time, a back-off's end): set to
// the earliest time asked for, and unref'd unless someone awaits drain(), so it never keeps a
// process alive on its own.

export class WakeTimer {
  private timer: NodeJS.Timeout | undefined;
  private at = Number.POSITIVE_INFINITY;
  private keepAlive = false;

  constructor(
    private readonly now: () => number,
    private readonly onWake: () => void,
  ) {}

  /** Wakes at `atMs` (epoch ms, the outbox's clock) unless already set to wake earlier. */
  wakeAt(atMs: number): void {
    if (this.timer !== undefined && this.at <= atMs) return;
    clearTimeout(this.timer);
    this.at = atMs;
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.at = Number.POSITIVE_INFINITY;
        this.onWake();
      },
      Math.max(0, atMs - this.now()),
    );
    if (!this.keepAlive) this.timer.unref();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.at = Number.POSITIVE_INFINITY;
  }

  /** While on, the timer keeps the process alive. */
  setKeepAlive(on: boolean): void {
    this.keepAlive = on;
    if (on) this.timer?.ref();
    else this.timer?.unref();
  }
}

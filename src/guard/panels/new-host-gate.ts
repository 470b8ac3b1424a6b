// The process-wide bound on resolver calls for hosts not known yet. "Once per host per TTL" is
// per host, so random `Host` headers would otherwise drive the tenants database at the
// attacker's rate: first calls take a token from a bucket (a rate with a burst) and a place among
// a few concurrent ones; a host that finds neither gets 503 with Retry-After, and nothing is kept
// for it. Known hosts never come here.

export interface NewHostGateOptions {
  /** Tokens added per second. */
  perSecond: number;
  /** Tokens the bucket holds: first calls that may start at once (a deploy's restart). */
  burst: number;
  /** First calls under way at most. */
  concurrency: number;
  /** A monotonic clock in ms (the guard's clock may be set back; a rate must not). */
  monotonic?: () => number;
}

export class NewHostGate {
  #tokens: number;
  #refilledAt: number;
  #running = 0;
  readonly #monotonic: () => number;

  constructor(private readonly options: NewHostGateOptions) {
    this.#monotonic = options.monotonic ?? (() => performance.now());
    this.#tokens = options.burst;
    this.#refilledAt = this.#monotonic();
  }

  /** Takes a token and a place for one first call; false when either is missing (answer 503). */
  tryStart(): boolean {
    if (this.#running >= this.options.concurrency) return false;
    this.#refill();
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    this.#running++;
    return true;
  }

  /** Takes a token only (the caller bounds how many run at once itself); false when there is none. */
  tryTakeToken(): boolean {
    this.#refill();
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }

  /** A first call started by `tryStart()` is over (answered, failed or timed out). */
  finished(): void {
    this.#running = Math.max(0, this.#running - 1);
  }

  /** Whole seconds until a refused host is worth trying again (for `Retry-After`), at least 1. */
  retryAfterSeconds(): number {
    this.#refill();
    const missing = Math.max(0, 1 - this.#tokens);
    return Math.max(1, Math.ceil(missing / this.options.perSecond));
  }

  #refill(): void {
    const now = this.#monotonic();
    const earned = ((now - this.#refilledAt) / 1000) * this.options.perSecond;
    this.#tokens = Math.min(this.options.burst, this.#tokens + earned);
    this.#refilledAt = now;
  }
}

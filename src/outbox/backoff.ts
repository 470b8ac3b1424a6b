// Retry delay of the release outbox: exponential backoff with full jitter, capped, honouring Retry-After.

export interface RetryDelayInput {
  /** How many attempts have failed so far (1 after the first failure). */
  attempt: number;
  /** Ceiling of the first delay, doubled after every failure. */
  baseDelayMs: number;
  /** No delay, Retry-After included, exceeds this. */
  maxDelayMs: number;
  /** Uniform in [0, 1); injected so tests can pin the jitter. */
  random: () => number;
  /** What the mother asked for through `Retry-After`, if anything. */
  retryAfterMs?: number | undefined;
}

/**
 * "Full jitter" (AWS Architecture Blog, 2015): a uniform delay between 0 and
 * `min(maxDelayMs, baseDelayMs * 2^(attempt-1))`. Spreading retries over the whole window keeps
 * many panels (or many queued rows) from hammering a recovering mother in lock-step.
 *
 * A `Retry-After` is a floor: we never come back sooner than the mother asked, but a proxy's
 * absurd value (a day, a year) is cut to `maxDelayMs` so the queue is never parked indefinitely.
 */
export function retryDelayMs(input: RetryDelayInput): number {
  const exponent = Math.max(0, Math.floor(input.attempt) - 1);
  // 2 ** 1100 is Infinity and Math.min handles it, so no overflow guard is needed.
  const ceiling = Math.min(input.maxDelayMs, input.baseDelayMs * 2 ** exponent);
  const unit = Math.min(Math.max(input.random(), 0), 1);
  const jittered = Math.min(Math.floor(unit * ceiling), ceiling);
  const { retryAfterMs } = input;
  if (retryAfterMs === undefined || !Number.isFinite(retryAfterMs) || retryAfterMs <= 0) return jittered;
  return Math.max(jittered, Math.min(Math.ceil(retryAfterMs), input.maxDelayMs));
}

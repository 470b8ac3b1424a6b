// The shared store interface behind cluster mode: what several instances of one panel share.

/**
 * Where the instances of a panel share its license verdict and elect who checks. A store sees
 * opaque strings only: the guard seals every value with an HMAC keyed from the panel's API
 * secret and verifies what it reads, so a store (or anyone who can write to it) cannot forge a
 * verdict. Keys are relative names (`<panel id>:verdict`); the store adds its own prefix.
 *
 * Every method may reject (the store is down, slow or refusing): the guard then falls back to
 * checking the mother itself, so an implementation should fail fast rather than queue.
 * `redisLicenseStore()` (subpath `panel-license-guard/redis`) is the implementation shipped.
 */
export interface LicenseStore {
  /** Short name used in `status()` and messages, e.g. `'redis'`. */
  readonly kind: string;
  /** The value stored under `key`, or null when there is none. */
  get(key: string): Promise<string | null>;
  /** Stores `value` under `key` for `ttlMs`, then announces it to every subscriber of `key`. */
  publish(key: string, value: string, ttlMs: number): Promise<void>;
  /**
   * Calls `listener` with each value published under `key` by any instance (this one too).
   * Delivery may be lost (the guard also re-reads the key periodically). Resolves with a
   * function that stops the subscription.
   */
  subscribe(key: string, listener: (value: string) => void): Promise<() => Promise<void>>;
  /** Takes the lease `key` for `ttlMs` when nobody holds it; resolves true when this call took it. */
  acquire(key: string, ttlMs: number): Promise<boolean>;
}

/** What `status().store` says: no store, a store answering, or a store failing (instances check on their own). */
export type StoreHealth = 'none' | 'ok' | 'unavailable';

const METHODS = ['get', 'publish', 'subscribe', 'acquire'] as const;

/** True when `value` has every method of the interface (checked at construction). */
export function isLicenseStore(value: unknown): value is LicenseStore {
  if (typeof value !== 'object' || value === null) return false;
  const candidate = value as Record<string, unknown>;
  return typeof candidate.kind === 'string' && METHODS.every((name) => typeof candidate[name] === 'function');
}

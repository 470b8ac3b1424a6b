// The shared store interface behind cluster mode: what several instances of one panel share.

/**
 * Where the instances of a panel share its license verdict and elect who checks. A store sees
 * opaque strings only: the guard seals every value (verdicts and lease holders) with an HMAC keyed
 * from the panel's API secret and verifies what it reads, so a store, or anyone who can write to
 * it, cannot forge a verdict or a lease. Keys are relative (`<panel id>:verdict`); the store adds
 * its own prefix.
 *
 * Every method may reject (the store is down, slow or refusing): the guard then checks the mother
 * itself, so an implementation should fail fast rather than queue. The guard also bounds every
 * call with a timeout of its own. `redisLicenseStore()` (subpath `panel-license-guard/redis`) is
 * the implementation shipped.
 */
export interface LicenseStore {
  /** Short name used in `status()` and messages, e.g. `'redis'`. */
  readonly kind: string;
  /** The value stored under `key`, or null when there is none; more than `maxBytes` may be cut (the guard refuses it). */
  get(key: string, maxBytes: number): Promise<string | null>;
  /** Stores `value` under `key` for `ttlMs`, then announces it to every subscriber of `key`. */
  publish(key: string, value: string, ttlMs: number): Promise<void>;
  /**
   * Calls `listener` with each value published under `key` by any instance (this one too).
   * Delivery may be lost (the guard also re-reads the key). Returns at once; `ready` settles when
   * the subscription is in place (rejects when it cannot be), `close()` ends it.
   */
  subscribe(key: string, listener: (value: string) => void): StoreSubscription;
  /**
   * Sets `key` to `value` for `ttlMs` unless it exists: resolves null when this call set it, or
   * the value that holds the key (so the guard can verify that the holder is genuine), of which
   * more than `maxBytes` may be cut: read it capped in the store, since lease key names are
   * predictable and anyone who can write to the store can plant a huge value there.
   */
  acquire(key: string, value: string, ttlMs: number, maxBytes: number): Promise<string | null>;
}

export interface StoreSubscription {
  readonly ready: Promise<void>;
  close(): Promise<void>;
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

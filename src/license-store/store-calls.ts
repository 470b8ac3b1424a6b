// Calls into a LicenseStore, bounded and isolated, and the sealed lease values of cluster mode.
import { timingSafeEqual } from 'node:crypto';
import type { Mac } from './sealed-json.js';

/** Longest any store call may take, whatever the store does (its own timeout is usually shorter). */
const STORE_CALL_TIMEOUT_MS = 2000;

/** The longest lease holder read back from the store (a genuine one is ~50 characters). */
export const LEASE_MAX_BYTES = 200;

/**
 * Runs one store call: a store that throws synchronously, rejects, or never settles becomes a
 * rejection within STORE_CALL_TIMEOUT_MS, so a custom store can never hang start() or close().
 */
export function callStore<T>(call: () => Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${STORE_CALL_TIMEOUT_MS} ms`)), STORE_CALL_TIMEOUT_MS);
    timer.unref();
  });
  let result: Promise<T>;
  try {
    result = Promise.resolve(call());
  } catch (error) {
    result = Promise.reject(error);
  }
  return Promise.race([result, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Lease values are `<instance>.<mac>` with the MAC over panel, lease key and instance: a peer can
 * tell a genuine holder from a value written by someone without the secret (who would otherwise
 * stop every check by holding the leases), and a genuine value copied to another key fails.
 */
export class LeaseSeal {
  constructor(
    private readonly panelId: string,
    private readonly instance: string,
    private readonly mac: Mac,
  ) {}

  value(key: string): string {
    return `${this.instance}.${this.sign(key, this.instance)}`;
  }

  isGenuine(key: string, holder: unknown): boolean {
    if (typeof holder !== 'string' || holder.length > LEASE_MAX_BYTES) return false;
    const [instance = '', given = ''] = holder.split('.');
    if (!/^[0-9a-f]{16}$/.test(instance)) return false;
    const expected = this.sign(key, instance);
    return given.length === expected.length && timingSafeEqual(Buffer.from(given), Buffer.from(expected));
  }

  private sign(key: string, instance: string): string {
    return this.mac(`lease\n${this.panelId}\n${key}\n${instance}`);
  }
}

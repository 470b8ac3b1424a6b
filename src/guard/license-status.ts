// What `guard.status()` reports of one panel: read by the status handler, metrics and events.

import type { StoreHealth } from '../license-store/license-store.js';
import type { LicenseState } from '../serve/license-state.js';

export interface LicenseStatus {
  state: LicenseState;
  reason: string | null;
  /** Local time (ms) of the last check, successful or not. */
  lastCheckAt: number | null;
  /** Local time (ms) of the last verified verdict. */
  lastSuccessAt: number | null;
  /** When the next check is due (schedule or retry), before jitter. */
  nextCheckAt: number | null;
  consecutiveFailures: number;
  /** While in `grace`: when the panel locks unless a check succeeds. */
  graceEndsAt: number | null;
  /** The mother's clock minus ours, in ms. */
  clockOffsetMs: number;
  /** Code of the last failure (e.g. 'TIMEOUT'), null after a success. */
  lastError: string | null;
  /**
   * Cluster mode: `'ok'` while the shared store answers, `'unavailable'` while it fails (this
   * instance then checks the mother on its own); `'none'` without a store.
   */
  store: StoreHealth;
  /** Who ran the last check: this instance, a peer through the store (cluster mode), or nobody yet. */
  lastCheckBy: 'self' | 'peer' | null;
  /** `panels` mode: the panel's id (derived from its key, never the key itself), as events name it. */
  panel?: string;
}

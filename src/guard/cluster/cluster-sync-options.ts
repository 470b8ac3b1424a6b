// What a ClusterSync (cluster-sync.ts) is given: the store, the panel's monitor and seal, its
// timings, and what it calls back when a peer's record is applied or its own check is due.
import type { LicenseStore } from '../../license-store/license-store.js';
import type { Mac } from '../../license-store/sealed-json.js';
import type { LicenseMonitor } from '../license-monitor.js';
import type { SharedVerdict } from './shared-verdict.js';

export interface ClusterSyncOptions {
  store: LicenseStore;
  panelId: string;
  mac: Mac;
  monitor: LicenseMonitor;
  now: () => number;
  /** How often the record is re-read, in case a published change was missed; 0 for never. */
  syncIntervalMs: number;
  /** How long a record stays in the store after its last write. */
  recordTtlMs: number;
  /** A record counts as current until its `nextCheckAt` plus this much. */
  staleAfterMs: number;
  /** The longest one license check can take. */
  checkTimeoutMs: number;
  /** After a skipped slot, how long to wait for the elected peer's record before checking ourselves. */
  fallbackMs: number;
  /** A peer's newer record was applied: it ran the last check (and owns any retries). */
  onPeerRecord: (record: SharedVerdict) => void;
  /** Run our own check now (the elected peer's record never came). */
  checkNow: () => void;
  /** Whether an outage of the store may be reported now. @default always */
  mayReportOutage?: () => boolean;
}

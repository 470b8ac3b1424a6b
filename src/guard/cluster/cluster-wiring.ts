// Builds cluster mode's pieces from the guard's config: the sync and the record a check publishes.
import { errorCodeOf } from '../../errors.js';
import type { GuardConfig } from '../guard-options.js';
import type { LicenseMonitor } from '../license-monitor.js';
import type { Poller } from '../poller.js';
import { ClusterSync, type ClusterSyncOptions } from './cluster-sync.js';
import type { SharedVerdict } from './shared-verdict.js';

const DAY_MS = 24 * 60 * 60 * 1000;

/** What the sync of one panel and of `panels` mode share: where, whose, and how long records live. */
function commonOptions(config: GuardConfig, store: NonNullable<GuardConfig['store']>, monitor: LicenseMonitor) {
  return {
    store,
    panelId: config.panelKey,
    mac: config.storeMac,
    monitor,
    now: config.now,
    checkTimeoutMs: config.client.timeoutMs,
    // A retired panel's record expires on its own.
    recordTtlMs: recordTtlMs(config),
  };
}

/** The sync of cluster mode, or undefined without a store. `poller` is read lazily (it is built after). */
export function createClusterSync(config: GuardConfig, monitor: LicenseMonitor, poller: () => Poller): ClusterSync | undefined {
  if (!config.store) return undefined;
  const checkTimeoutMs = config.client.timeoutMs;
  return claiming(
    monitor,
    new ClusterSync({
      ...commonOptions(config, config.store, monitor),
      syncIntervalMs: config.syncIntervalMs,
      staleAfterMs: config.jitterMs + checkTimeoutMs + 30_000,
      // The elected peer waits up to jitterMs, then takes up to timeoutMs; then its record is due.
      fallbackMs: config.jitterMs + checkTimeoutMs + 5000,
      onPeerRecord: (record) => {
        // The peer ran the newest check: it owns the retries, and its count of failures is ours.
        poller().cancelRetry();
        poller().seedFailures(record.failures);
      },
      checkNow: () => void poller().refresh(),
    }),
  );
}

/** The monitor's expiry warnings are claimed through the sync's leases: one instance fires each. */
function claiming(monitor: LicenseMonitor, sync: ClusterSync): ClusterSync {
  monitor.claims = sync;
  return sync;
}

/**
 * The sync of one panel in `panels` mode, or undefined without a store. Checks are elected per
 * panel slot by the panel runtime itself (no node-cron task per panel), and the record is re-read
 * at each slot this instance skips rather than on a timer per panel.
 */
export function createPanelSync(
  config: GuardConfig,
  monitor: LicenseMonitor,
  hooks: Pick<ClusterSyncOptions, 'onPeerRecord' | 'checkNow'>,
): ClusterSync | undefined {
  if (!config.store) return undefined;
  const checkTimeoutMs = config.client.timeoutMs;
  return claiming(
    monitor,
    new ClusterSync({
      ...commonOptions(config, config.store, monitor),
      syncIntervalMs: 0,
      staleAfterMs: checkTimeoutMs + 30_000,
      // The elected instance may start its check a few seconds late under the per-second cap.
      fallbackMs: checkTimeoutMs + 10_000,
      mayReportOutage: outageGateOf(config.store),
      ...hooks,
    }),
  );
}

const OUTAGE_REPORT_INTERVAL_MS = 60_000;
const outageGates = new WeakMap<object, () => boolean>();

/** One gate per store: its outage is reported once a minute however many panels notice it. */
function outageGateOf(store: object): () => boolean {
  let gate = outageGates.get(store);
  if (!gate) {
    let lastAt = Number.NEGATIVE_INFINITY;
    gate = () => {
      const at = performance.now();
      if (at - lastAt < OUTAGE_REPORT_INTERVAL_MS) return false;
      lastAt = at;
      return true;
    };
    outageGates.set(store, gate);
  }
  return gate;
}

/** Kept while the panel runs (every check rewrites it) and long enough to carry a verdict through any grace period. */
function recordTtlMs(config: GuardConfig): number {
  return Math.min(2 ** 31 - 1, Math.max(30 * DAY_MS, 2 * config.gracePeriodMs));
}

/**
 * What this instance's check tells the others: the verdict it now holds, and whether this check
 * failed. The poller counts the failure only after the check resolves, hence `+ 1`.
 */
export function sharedRecordOf(monitor: LicenseMonitor, failure: unknown, poller: Pick<Poller, 'consecutiveFailures' | 'nextCheckAt'>): SharedVerdict {
  const { verdict, lastSuccessAt } = monitor.entry;
  const next = poller.nextCheckAt();
  return {
    order: monitor.lastOrder,
    successOrder: verdict === undefined || monitor.successOrder.stamp === 0 ? null : monitor.successOrder,
    basis: verdict === undefined ? null : monitor.heldBasis,
    checkedAt: Math.floor(monitor.lastCheckAt ?? monitor.clock.now()),
    verdict: verdict ?? null,
    lastSuccessAt: lastSuccessAt === null ? null : Math.floor(lastSuccessAt),
    failure: failure === null ? null : errorCodeOf(failure).slice(0, 64),
    failures: failure === null ? 0 : poller.consecutiveFailures() + 1,
    nextCheckAt: next === null ? null : Math.floor(next),
    savedAt: Math.floor(monitor.clock.now()),
    warned: monitor.warned,
  };
}

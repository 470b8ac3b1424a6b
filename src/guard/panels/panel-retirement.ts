// What an evicted panel of `panels` mode leaves behind, and how it comes back: enough to resume it
// as a state file would (inactive stays locked, active gets the grace left, on the clock it had),
// never trusted beyond its grace; and a panel back after idling past its grace, no longer trusted.
import type { LicenseResponse } from '../../client/license-response.js';
import type { WarnedThrough } from '../expiry-warnings.js';
import type { LicenseMonitor } from '../license-monitor.js';

/** An evicted panel's last verified verdict. */
export interface Retired {
  verdict: LicenseResponse;
  lastSuccessAt: number;
  /** The clock's protections, carried over: the latest wall time seen, and grace elapsed (monotonic). */
  latestSeen: number;
  elapsedMs: number;
  retiredAtMono: number;
  /** The expiry warnings fired for its `expires_at`. */
  warned: WarnedThrough | null;
}

/** What survives eviction, or undefined when the panel never had a verified verdict. */
export function retire(monitor: LicenseMonitor): Retired | undefined {
  const { verdict, lastSuccessAt } = monitor.entry;
  if (verdict === undefined || lastSuccessAt === null) return undefined;
  const { clock } = monitor;
  const elapsedMs = clock.elapsedSince(lastSuccessAt);
  return { verdict, lastSuccessAt, latestSeen: clock.latestSeen(), elapsedMs, retiredAtMono: performance.now(), warned: monitor.warned };
}

/**
 * Resumes an evicted panel as a state file would: inactive stays locked, active gets the grace
 * left, counted on the clock it had (a clock set back meanwhile extends nothing). Returns false
 * when nothing could be resumed (the panel is pending and must be checked).
 */
export function restore(monitor: LicenseMonitor, { verdict, lastSuccessAt, latestSeen, elapsedMs, retiredAtMono, warned }: Retired): boolean {
  const { clock } = monitor;
  monitor.warned = warned;
  clock.seen(latestSeen);
  clock.anchorElapsed(elapsedMs + (performance.now() - retiredAtMono));
  if (!verdict.active) {
    monitor.move('verified-inactive', verdict, lastSuccessAt, verdict.reason ?? 'The license is inactive.');
    return true;
  }
  if (monitor.remainingFor(verdict, lastSuccessAt) <= 0) return false;
  monitor.move('restored-active', verdict, lastSuccessAt, null);
  monitor.checkGraceEnd();
  return true;
}

/**
 * Back after idling past its grace: the old verdict is no longer trusted. The panel counts as
 * failing since its last success (so it locks, its grace being over) until the check that
 * follows answers.
 */
export function distrust(monitor: LicenseMonitor): void {
  const { verdict, lastSuccessAt, reason } = monitor.entry;
  monitor.move('check-failed', verdict, lastSuccessAt, reason);
  monitor.checkGraceEnd();
}

// How long a panel's verdict may be served as it is, by the routes' fast path: not pending, not
// stale (idle past its grace, or its grace clock run out), and for no longer than a clock offset
// learnt from another panel's check could move its expiry.
import type { LicenseMonitor } from '../license-monitor.js';

/**
 * The longest a verdict is judged servable before it is worked out again: how late a clock offset
 * learnt from another panel's check (same mother) can move an `expires_at` day's end. A day-long
 * expiry seen a minute late; the grace timer locks on time regardless.
 */
const SERVABLE_RECKON_MS = 60_000;

/**
 * Until when (the guard's clock) a request may be served from the current verdict as it is: not
 * pending, not stale (what the full path would decide); 0 when it may not. At most
 * `SERVABLE_RECKON_MS` ahead, which bounds how late a new clock offset is seen (the grace timer
 * locks on time regardless).
 */
export function servableUntil(monitor: LicenseMonitor, gracePeriodMs: number, now: number): number {
  const { entry } = monitor;
  if (entry.state === 'pending' || isStale(monitor, gracePeriodMs, now)) return 0;
  let span = SERVABLE_RECKON_MS;
  const { lastSuccessAt } = entry;
  // Both bounds of isStale(): the wall clock's grace, and the grace clock's (monotonic, expiry).
  if (lastSuccessAt !== null) span = Math.min(span, lastSuccessAt + gracePeriodMs - now, monitor.remainingFor(entry.verdict, lastSuccessAt));
  return span > 0 ? now + span : 0;
}

/** The verdict is too old to trust without asking again (idle past its grace). */
export function isStale(monitor: LicenseMonitor, gracePeriodMs: number, now: number): boolean {
  const { lastSuccessAt, verdict } = monitor.entry;
  if (lastSuccessAt === null) return false;
  // The grace clock, not the wall clock alone: a clock set back does not make an old verdict fresh.
  return now - lastSuccessAt > gracePeriodMs || monitor.remainingFor(verdict, lastSuccessAt) <= 0;
}

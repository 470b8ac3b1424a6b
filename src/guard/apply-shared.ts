// Cluster mode: how a peer's record from the license store changes this instance's verdict.
import { performance } from 'node:perf_hooks';
import type { LicenseResponse } from '../client/license-response.js';
import { isAfter } from './check-order.js';
import type { LicenseMonitor } from './license-monitor.js';
import type { SharedVerdict } from './shared-verdict.js';

/**
 * Cluster mode: applies a record a peer wrote to the license store when it orders after what
 * this instance holds (by check order, not by wall clock). Its verdict is adopted only when newer
 * than ours, so a peer's failed check never overrides a lock this instance verified; a
 * peer's failure is otherwise the same as a failed check of our own. A record that is not
 * `current` (its writer's next check is overdue) is trusted like a restored state file: an
 * active verdict gives grace for what is left of it, never `active`. Returns true when applied.
 */
export function applySharedVerdict(monitor: LicenseMonitor, record: SharedVerdict, current: boolean): boolean {
  if (monitor.isClosed) return false;
  if (!isAfter(record.order, monitor.lastOrder)) {
    adoptLaterLock(monitor, record);
    return false;
  }
  monitor.lastOrder = record.order;
  monitor.lastAppliedMono = performance.now();
  monitor.lastCheckAt = record.checkedAt;
  monitor.lastCheckBy = 'peer';
  monitor.peerFailures = record.failures;
  monitor.lastFailure = record.failure === null ? null : { code: record.failure };
  const { verdict, lastSuccessAt, successOrder } = record;
  if (verdict !== null && lastSuccessAt !== null && successOrder !== null && isAfter(successOrder, monitor.successOrder) && !olderThanOwn(monitor, verdict)) {
    monitor.successOrder = successOrder;
    monitor.heldBasis = record.basis ?? null;
    monitor.clock.anchor(lastSuccessAt);
    if (!verdict.active) monitor.move('verified-inactive', verdict, lastSuccessAt, verdict.reason ?? 'The license is inactive.');
    else if (record.failure === null && current) monitor.move('verified-active', verdict, lastSuccessAt, null);
    else if (monitor.remainingFor(verdict, lastSuccessAt) > 0) monitor.move('shared-failing', verdict, lastSuccessAt, null);
    else monitor.move('shared-expired', verdict, lastSuccessAt, `The license could not be verified since ${new Date(lastSuccessAt).toISOString()}.`);
  } else if (record.failure !== null) {
    const { verdict: held, lastSuccessAt: since, reason } = monitor.entry;
    monitor.move('check-failed', held, since, reason);
  }
  monitor.checkGraceEnd();
  return true;
}

/**
 * An active verdict the mother answered before the last answer this instance got itself, or
 * before the lock it holds (verified itself or taken from a peer) — by the mother's
 * `server_time`, not the hosts' clocks: a replay of a record captured before a revocation, whose
 * check stamp a host clock running ahead can put after the lock's. Within the same second of the
 * mother's clock the check order decides, as before; an active verdict without `server_time`
 * cannot be placed and is not adopted over one that has it. A lock is always adopted: locking is
 * the safe side, and mother servers whose clocks disagree (or a clock stepped back) must not keep
 * a revoked panel open.
 */
function olderThanOwn(monitor: LicenseMonitor, verdict: LicenseResponse): boolean {
  if (!verdict.active) return false;
  const held = monitor.entry.verdict;
  const lockedAt = held !== undefined && !held.active ? (held.server_time ?? 0) : 0;
  const since = Math.max(monitor.ownServerTime, lockedAt);
  if (since === 0) return false;
  return verdict.server_time === undefined || verdict.server_time < since;
}

/**
 * A lock ordered before what this instance holds (its writer's clock is behind ours, so its check
 * stamp is smaller) that the mother answered no earlier than the active verdict held here: taken.
 * The hosts' clocks disagree; the mother's `server_time` does not, and locking is the safe side.
 * (An old lock replayed after a re-activation is refused: the mother answered it earlier. So are
 * the lock the check behind our active verdict started from and every lock before it — answered
 * before that check, maybe in the same second — whether a read begun before that verdict's
 * announcement brings it late or someone replays it.)
 */
function adoptLaterLock(monitor: LicenseMonitor, record: SharedVerdict): void {
  const { verdict, lastSuccessAt, successOrder } = record;
  const held = monitor.entry.verdict;
  if (verdict === null || verdict.active || lastSuccessAt === null || held === undefined || !held.active) return;
  if (verdict.server_time === undefined || held.server_time === undefined || verdict.server_time < held.server_time) return;
  if (successOrder !== null && monitor.heldBasis !== null && !isAfter(successOrder, monitor.heldBasis)) return;
  monitor.clock.anchor(lastSuccessAt);
  monitor.move('verified-inactive', verdict, lastSuccessAt, verdict.reason ?? 'The license is inactive.');
  monitor.checkGraceEnd();
}

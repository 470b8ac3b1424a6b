// Cluster mode: how a peer's record from the license store changes this instance's verdict.
import { performance } from 'node:perf_hooks';
import type { LicenseResponse } from '../../client/license-response.js';
import { isAfter } from '../check-order.js';
import { mergeWarned } from '../expiry-warnings.js';
import type { LicenseMonitor } from '../license-monitor.js';
import type { SharedVerdict } from './shared-verdict.js';

/**
 * What became of a peer's record. `disputed`: its verdict contradicts the one held here and the
 * mother's clock cannot say which came last (an unlock answered before the held lock, or a lock
 * from the same second as the check behind the held unlock): a replay, or a mother whose clock
 * stepped back or whose servers disagree. The mother settles it: the instance checks it itself
 * (ClusterSync, at most once a minute per panel), since its own answer always applies.
 */
export type SharedVerdictOutcome = 'applied' | 'ignored' | 'disputed';

/**
 * Cluster mode: applies a record a peer wrote to the license store when it orders after what
 * this instance holds (by check order, not by wall clock). Its verdict is adopted only when newer
 * than ours, so a peer's failed check never overrides a lock this instance verified; a
 * peer's failure is otherwise the same as a failed check of our own. A record that is not
 * `current` (its writer's next check is overdue) is trusted like a restored state file: an
 * active verdict gives grace for what is left of it, never `active`. Returns true when applied.
 */
export function applySharedVerdict(monitor: LicenseMonitor, record: SharedVerdict, current: boolean): SharedVerdictOutcome {
  if (monitor.isClosed) return 'ignored';
  if (!isAfter(record.order, monitor.lastOrder)) return adoptLaterLock(monitor, record);
  monitor.lastOrder = record.order;
  monitor.lastAppliedMono = performance.now();
  monitor.lastCheckAt = record.checkedAt;
  monitor.lastCheckBy = 'peer';
  monitor.peerFailures = record.failures;
  monitor.lastFailure = record.failure === null ? null : { code: record.failure };
  const { verdict, lastSuccessAt, successOrder } = record;
  const disputed = verdict !== null && olderThanOwn(monitor, verdict);
  if (verdict !== null && lastSuccessAt !== null && successOrder !== null && isAfter(successOrder, monitor.successOrder) && !disputed) {
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
  // The warnings any instance fired for the verdict now held are fired (expiry-warnings.ts).
  monitor.warned = mergeWarned(monitor.warned, record.warned, monitor.entry.verdict?.panel.expires_at);
  monitor.checkGraceEnd();
  return disputed ? 'disputed' : 'applied';
}

/**
 * An active verdict the mother answered before the last answer this instance got itself, or
 * before the lock it holds (verified itself or taken from a peer) — by the mother's
 * `server_time`, not the hosts' clocks. It may be a replay of a record captured before a
 * revocation (a host clock running ahead can stamp its check after the lock's), or a genuine
 * unlock from a mother whose clock stepped back or whose servers disagree: not adopted, and
 * disputed, so the instance asks the mother itself. Within the same second of the mother's clock
 * the check order decides, as before; an active verdict without `server_time` cannot be placed.
 * A lock is never disputed here: locking is the safe side.
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
 * (An old lock replayed after a re-activation is refused: the mother answered it earlier. A lock
 * from the same second as the held verdict whose check is not after the one that verdict's
 * check started from — that very lock or an older one, brought late by a read begun before the
 * announcement, or replayed — is disputed: the mother decides. A lock answered in a later
 * second is taken whatever its check's stamp: a host clock running ahead may have stamped the
 * basis.)
 */
function adoptLaterLock(monitor: LicenseMonitor, record: SharedVerdict): SharedVerdictOutcome {
  const { verdict, lastSuccessAt, successOrder } = record;
  const held = monitor.entry.verdict;
  if (verdict === null || verdict.active || lastSuccessAt === null || held === undefined || !held.active) return 'ignored';
  if (verdict.server_time === undefined || held.server_time === undefined || verdict.server_time < held.server_time) return 'ignored';
  // In the same second of the mother's clock, a lock whose check is not after the one the held
  // unlock started from was known to that check (or is a replay of it): the mother decides.
  if (verdict.server_time === held.server_time && successOrder !== null && monitor.heldBasis !== null && !isAfter(successOrder, monitor.heldBasis))
    return 'disputed';
  monitor.clock.anchor(lastSuccessAt);
  monitor.move('verified-inactive', verdict, lastSuccessAt, verdict.reason ?? 'The license is inactive.');
  monitor.checkGraceEnd();
  return 'applied';
}

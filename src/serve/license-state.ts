// License states and their transitions: one pure function over an explicit table (after node-cron).
import { parseIsoDate } from '../text.js';

/** `pending`: no verdict yet · `active` · `grace`: checks failing, last good verdict active · `locked`. */
export type LicenseState = 'pending' | 'active' | 'grace' | 'locked';
export const LICENSE_STATES: readonly LicenseState[] = ['pending', 'active', 'grace', 'locked'];

/**
 * What can happen to a panel's license:
 * - `verified-active` / `verified-inactive`: a check returned a schema-valid verdict;
 * - `check-failed`: timeout, network error, 5xx, 401, malformed answer — not a verdict;
 * - `grace-ended`: the grace period (or `expires_at`) passed while checks were failing;
 * - `restored-active`: an active verdict read back from `stateFile` at start-up, not yet re-verified;
 * - `shared-failing` / `shared-expired`: cluster mode adopted a newer active verdict from the
 *   license store whose checks have failed since (grace left / grace run out).
 */
export type LicenseEvent = 'verified-active' | 'verified-inactive' | 'check-failed' | 'grace-ended' | 'restored-active' | 'shared-failing' | 'shared-expired';

const SHARED = { 'shared-failing': 'grace', 'shared-expired': 'locked' } as const;

const TRANSITIONS: Readonly<Record<LicenseState, Readonly<Record<LicenseEvent, LicenseState>>>> = {
  // A restored verdict is the last good one, not a current one: the panel serves in grace.
  // The shared events carry a verified verdict newer than this instance's own (see
  // LicenseMonitor.applyShared): it replaces whatever this instance concluded from older news.
  pending: {
    ...SHARED,
    'verified-active': 'active',
    'verified-inactive': 'locked',
    'check-failed': 'pending',
    'grace-ended': 'pending',
    'restored-active': 'grace',
  },
  active: {
    ...SHARED,
    'verified-active': 'active',
    'verified-inactive': 'locked',
    'check-failed': 'grace',
    'grace-ended': 'locked',
    'restored-active': 'active',
  },
  grace: {
    ...SHARED,
    'verified-active': 'active',
    'verified-inactive': 'locked',
    'check-failed': 'grace',
    'grace-ended': 'locked',
    'restored-active': 'grace',
  },
  // A failed check never unlocks: only a verified `active: true` does (or, in cluster mode, a
  // newer verified `active: true` from a peer whose checks failed afterwards: grace).
  locked: {
    ...SHARED,
    'verified-active': 'active',
    'verified-inactive': 'locked',
    'check-failed': 'locked',
    'grace-ended': 'locked',
    'restored-active': 'locked',
  },
};

export function transition(state: LicenseState, event: LicenseEvent): LicenseState {
  return TRANSITIONS[state][event];
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** Whole days from `now` until the end of `expiresAt` (UTC), or null when unknown. */
export function daysLeft(expiresAt: string | undefined, now: number): number | null {
  const expiryDay = parseIsoDate(expiresAt);
  if (expiryDay === null) return null;
  return Math.max(0, Math.ceil((expiryDay + DAY_MS - now) / DAY_MS) - 1);
}

/** The smallest expiry warning (`thresholds` ascending, in days) that `left` days have reached, or null. */
export function reachedThreshold(thresholds: readonly number[], left: number | null): number | null {
  if (left === null) return null;
  return thresholds.find((days) => days >= left) ?? null;
}

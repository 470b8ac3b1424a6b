// License states and their transitions: one pure function over an explicit table (after node-cron).

/** `pending`: no verdict yet · `active` · `grace`: checks failing, last good verdict active · `locked`. */
export type LicenseState = 'pending' | 'active' | 'grace' | 'locked';

/**
 * What can happen to a panel's license:
 * - `verified-active` / `verified-inactive`: a check returned a schema-valid verdict;
 * - `check-failed`: timeout, network error, 5xx, 401, malformed answer — not a verdict;
 * - `grace-ended`: the grace period (or `expires_at`) passed while checks were failing.
 */
export type LicenseEvent = 'verified-active' | 'verified-inactive' | 'check-failed' | 'grace-ended';

const TRANSITIONS: Readonly<Record<LicenseState, Readonly<Record<LicenseEvent, LicenseState>>>> = {
  pending: { 'verified-active': 'active', 'verified-inactive': 'locked', 'check-failed': 'pending', 'grace-ended': 'pending' },
  active: { 'verified-active': 'active', 'verified-inactive': 'locked', 'check-failed': 'grace', 'grace-ended': 'locked' },
  grace: { 'verified-active': 'active', 'verified-inactive': 'locked', 'check-failed': 'grace', 'grace-ended': 'locked' },
  // A failed check never unlocks: only a verified `active: true` does.
  locked: { 'verified-active': 'active', 'verified-inactive': 'locked', 'check-failed': 'locked', 'grace-ended': 'locked' },
};

export function transition(state: LicenseState, event: LicenseEvent): LicenseState {
  return TRANSITIONS[state][event];
}

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * When the last good verdict stops standing: `gracePeriodMs` after the last successful check,
 * and never past the end (UTC) of the license's `expires_at` day.
 */
export function graceDeadline(lastSuccessAt: number, gracePeriodMs: number, expiresAt: string | undefined): number {
  const byGrace = lastSuccessAt + gracePeriodMs;
  const match = expiresAt ? /^(\d{4})-(\d{2})-(\d{2})$/.exec(expiresAt) : null;
  if (!match) return byGrace;
  const endOfExpiryDay = Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3])) + DAY_MS;
  return Number.isFinite(endOfExpiryDay) ? Math.min(byGrace, endOfExpiryDay) : byGrace;
}

/** Whole days from `now` until the end of `expiresAt` (UTC), or null when unknown. */
export function daysLeft(expiresAt: string | undefined, now: number): number | null {
  const match = expiresAt ? /^(\d{4})-(\d{2})-(\d{2})$/.exec(expiresAt) : null;
  if (!match) return null;
  const end = Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3])) + DAY_MS;
  return Math.max(0, Math.ceil((end - now) / DAY_MS) - 1);
}

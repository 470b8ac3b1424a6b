// Expiry warnings: which of the user's thresholds (days before `expires_at`) a license has reached,
// which have fired already, and the 'expiring' event, once per threshold per panel. What has fired
// is kept with the verdict (state file, shared record, an evicted panel's leftovers), so a restart
// or another instance does not fire it again; in cluster mode a sealed lease in the store makes
// the one instance that fires a threshold, should two reach it at once.
import { z } from 'zod';
import type { LicenseResponse } from '../client/license-response.js';
import { optionError, shown } from '../options.js';
import { daysLeft, type LicenseState, reachedThreshold } from '../serve/license-state.js';
import { parseIsoDate } from '../text.js';

export const DEFAULT_EXPIRY_WARNINGS: readonly number[] = [30, 14, 7, 3, 1];
const MAX_THRESHOLDS = 20;
const MAX_DAYS = 3650;
const DAY_MS = 24 * 60 * 60 * 1000;
/** A claim outlives the expiry day by a day; a date years ahead is claimed for a year at most (it fires within 10). */
const MAX_CLAIM_MS = 400 * DAY_MS;

/** What an 'expiring' listener gets. */
export interface ExpiringEvent {
  /** The threshold reached, in days: one of `expiryWarnings` (the smallest reached, when several were at once). */
  threshold: number;
  /** Whole days left on the mother's clock, as `res.locals.license.daysLeft` says it: 0 on the last day, and after it. */
  daysLeft: number;
  /** The license's `expires_at` (`YYYY-MM-DD`); the license runs to the end of that day (UTC). */
  expiresAt: string;
  /** Seconds to the end of that day on the mother's clock; negative once it has passed (an active license the mother still answers for). */
  expiresInSeconds: number;
  /** `panels` mode: the panel's id (a hash of base URL and key, never the key). */
  panel?: string;
  /** `panels` mode: the hosts this instance knows for the panel (up to 100). */
  hosts?: string[];
}

/**
 * What has fired for one `expires_at`: every threshold of `days` or more. One number, since a
 * threshold fires only after the larger ones. It still holds when the mother moves the date
 * earlier; a renewal (a later date) starts afresh.
 */
export interface WarnedThrough {
  expiresAt: string;
  days: number;
}

export const warnedSchema = z.object({ expiresAt: z.string().max(10), days: z.number().int().min(0).max(MAX_DAYS) });

/** Validates `expiryWarnings`: whole days, 0 (the last day) to 3650, each once; `[]` turns warnings off. Sorted ascending. */
export function validExpiryWarnings(value: unknown): readonly number[] {
  if (value === undefined) return [...DEFAULT_EXPIRY_WARNINGS].sort((a, b) => a - b);
  const fix = 'Pass whole days before `expires_at`, e.g. [30, 14, 7, 3, 1] (the default), or [] for no warnings.';
  if (!Array.isArray(value) || value.length > MAX_THRESHOLDS)
    throw optionError('expiryWarnings', `must be an array of at most ${MAX_THRESHOLDS} numbers of days, received ${shown(value)}`, fix);
  const bad = value.find((days) => !Number.isInteger(days) || days < 0 || days > MAX_DAYS);
  if (bad !== undefined) throw optionError('expiryWarnings', `must hold whole days from 0 to ${MAX_DAYS}, received ${shown(bad)}`, fix);
  if (new Set(value).size !== value.length) throw optionError('expiryWarnings', `names a threshold twice (${value.join(', ')})`, fix);
  return [...(value as number[])].sort((a, b) => a - b);
}

/** Milliseconds from `motherNow` to the end of the verdict's `expires_at` (UTC); null when it names none or is inactive. */
export function expiresInMs(verdict: LicenseResponse | undefined, motherNow: number): number | null {
  const expiryDay = verdict?.active ? parseIsoDate(verdict.panel.expires_at) : null;
  return expiryDay === null ? null : expiryDay + DAY_MS - motherNow;
}

/** What of `warned` holds for a license expiring on `expiresAt` (`YYYY-MM-DD`, which sorts as it reads): null after a renewal. */
function holding(warned: WarnedThrough | null | undefined, expiresAt: string | undefined): WarnedThrough | null {
  return warned != null && expiresAt !== undefined && warned.expiresAt >= expiresAt ? warned : null;
}

/** The warnings known to have fired for `expiresAt`, from two sources (ours and a peer's record, say). */
export function mergeWarned(a: WarnedThrough | null | undefined, b: WarnedThrough | null | undefined, expiresAt: string | undefined): WarnedThrough | null {
  const mine = holding(a, expiresAt);
  const theirs = holding(b, expiresAt);
  if (mine && theirs) return mine.days <= theirs.days ? mine : theirs;
  return mine ?? theirs ?? a ?? null;
}

/** Cluster mode: the store's sealed leases (ClusterSync.acquire); true when this instance is to fire. */
export interface WarningClaims {
  acquire(name: string, ttlMs: number): Promise<boolean>;
}

/** What of a LicenseMonitor the mother's time is read from. */
export interface MotherClocked {
  readonly entry: { readonly verdict: LicenseResponse | undefined; readonly lastSuccessAt: number | null; readonly serverTime: number | null };
  readonly config: { now(): number; readonly client: { clockOffsetMs(): number } };
  readonly clock: { motherNow(serverTime: number | null, lastSuccessAt: number): number };
}

/** The best estimate of the mother's time now (grace-clock.ts), what expiry is measured on: the host's clock corrected by the offset the client measured. */
export function motherNow({ entry, config, clock }: MotherClocked): number {
  const { lastSuccessAt, serverTime } = entry;
  return lastSuccessAt === null ? config.now() + config.client.clockOffsetMs() : clock.motherNow(serverTime, lastSuccessAt);
}

/** What of a LicenseMonitor the warnings read and write. */
export interface WarnedPanel extends MotherClocked {
  readonly entry: MotherClocked['entry'] & { readonly state: LicenseState };
  readonly config: MotherClocked['config'] & { readonly expiryWarnings: readonly number[] };
  readonly isClosed: boolean;
  warned: WarnedThrough | null;
  claims: WarningClaims | undefined;
  emit(event: 'expiring', payload: ExpiringEvent): void;
}

/**
 * After a check this instance ran: fires the threshold the license has newly reached, if any. A
 * locked panel (or an inactive verdict) warns of nothing; an active verdict held in grace still
 * does. The threshold counts as fired at once (the record and the state file written after this
 * check carry it); with a store, the instance that takes its lease fires it, or any instance
 * while the store fails: twice rather than never.
 */
export function warnIfExpiring(panel: WarnedPanel): void {
  const { verdict, state } = panel.entry;
  if (verdict === undefined || (state !== 'active' && state !== 'grace')) return;
  const now = motherNow(panel);
  const inMs = expiresInMs(verdict, now);
  const expiresAt = verdict.panel.expires_at;
  if (inMs === null || expiresAt === undefined) return;
  const left = daysLeft(expiresAt, now) ?? 0;
  const threshold = reachedThreshold(panel.config.expiryWarnings, left);
  const warned = holding(panel.warned, expiresAt);
  if (threshold === null || (warned !== null && threshold >= warned.days)) return;
  panel.warned = { expiresAt, days: threshold };
  const event: ExpiringEvent = { threshold, daysLeft: left, expiresAt, expiresInSeconds: Math.round(inMs / 1000) };
  const { claims } = panel;
  if (claims === undefined) {
    panel.emit('expiring', event);
    return;
  }
  const ttlMs = Math.min(MAX_CLAIM_MS, Math.max(0, inMs) + DAY_MS);
  void claims.acquire(`expiring:${expiresAt}:${threshold}`, ttlMs).then(
    (mine) => {
      if (mine && !panel.isClosed) panel.emit('expiring', event);
    },
    () => {
      if (!panel.isClosed) panel.emit('expiring', event);
    },
  );
}

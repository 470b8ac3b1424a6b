// The per-verdict view of a license: locals for templates and pre-rendered lock responses.
import type { LicenseResponse } from '../client/license-response.js';
import { cleanText } from '../text.js';
import { type Branding, brandingFrom } from './branding.js';
import { daysLeft, type LicenseState, reachedThreshold } from './license-state.js';
import { lockPageCsp, renderLockPage } from './lock-page.js';
import type { ServeConfig } from './serve-config.js';

/** What templates get as `res.locals.license`. */
export interface LicenseLocals {
  readonly state: LicenseState;
  /** True while the panel serves normally (`active` or `grace`). */
  readonly active: boolean;
  readonly reason: string | null;
  readonly status: string | null;
  readonly billingType: string | null;
  readonly expiresAt: string | null;
  readonly daysLeft: number | null;
  /**
   * The expiry warning reached, in days (the smallest of `expiryWarnings` at or above `daysLeft`),
   * while the panel serves; null otherwise (no `expires_at`, further off than every threshold,
   * locked or pending). Show a renewal banner when it is not null.
   */
  readonly expiryWarning: number | null;
}

/**
 * Everything the request path needs, computed once when the verdict or state changes, so that
 * serving a request is a cache read and a few property assignments.
 */
export interface GuardSnapshot {
  readonly state: LicenseState;
  readonly branding: Branding;
  readonly license: LicenseLocals;
  /** Lock responses, present only when the state locks requests (`locked`, `pending`). */
  readonly lock: LockBodies | undefined;
}

export interface LockBodies {
  /** Operator-facing: the mother's reason, or the guard's. Passed to `lockView` as `reason`. */
  readonly reason: string;
  /** User-facing: what the page and the JSON say (`publicMessage`). */
  readonly message: string;
  readonly htmlBytes: Buffer;
  readonly jsonBytes: Buffer;
  readonly csp: string;
  /** The host app's `lockView`, rendered on first use for this verdict and then reused. */
  renderedView?: string;
  /** Set when `lockView` failed to render for this verdict: the built-in page is served instead. */
  viewFailed?: boolean;
}

export const REASON_MAX = 300;

/** Distinct license locals kept for sharing; past this the table starts over. */
const MAX_SHARED_LICENSES = 4096;
const licenses = new Map<string, LicenseLocals>();

/**
 * One frozen object per distinct value: in `panels` mode most panels' locals are alike (same
 * state, status, billing and expiry), and 100,000 copies would cost 8 MB for nothing.
 */
function sharedLicense(license: LicenseLocals): LicenseLocals {
  const key = JSON.stringify(license);
  const known = licenses.get(key);
  if (known !== undefined) return known;
  if (licenses.size >= MAX_SHARED_LICENSES) licenses.clear();
  const frozen = Object.freeze(license);
  licenses.set(key, frozen);
  return frozen;
}

export function buildSnapshot(
  config: ServeConfig,
  state: LicenseState,
  verdict: LicenseResponse | undefined,
  reason: string | null,
  now: number,
): GuardSnapshot {
  const panel = verdict?.panel;
  const branding = brandingFrom(panel, config.defaults);
  const cleanReason = reason === null ? null : (cleanText(reason, REASON_MAX) ?? null);
  const expiresAt = cleanText(panel?.expires_at, 10);
  const active = state === 'active' || state === 'grace';
  const left = daysLeft(expiresAt ?? undefined, now);
  const license = sharedLicense({
    state,
    active,
    reason: cleanReason,
    status: cleanText(panel?.status, 40),
    billingType: cleanText(panel?.billing_type, 40),
    expiresAt,
    daysLeft: left,
    expiryWarning: active && verdict?.active === true ? reachedThreshold(config.expiryWarnings, left) : null,
  });
  let lock: LockBodies | undefined;
  if (state === 'locked' || state === 'pending') {
    const operatorReason = cleanReason ?? (state === 'pending' ? 'License not verified yet' : 'This panel is locked.');
    const message = config.publicMessage({ state, reason: cleanReason, status: license.status, billingType: license.billingType });
    const html = renderLockPage({ branding, message, supportContact: config.supportContact, retryAfterSeconds: config.retryAfterSeconds });
    const error = state === 'pending' ? 'license_pending' : 'panel_locked';
    lock = {
      reason: operatorReason,
      message,
      htmlBytes: Buffer.from(html, 'utf8'),
      jsonBytes: Buffer.from(JSON.stringify({ ok: false, error, message }), 'utf8'),
      csp: lockPageCsp(branding),
    };
  }
  return Object.freeze({ state, branding, license, lock });
}

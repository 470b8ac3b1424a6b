// Branding from the mother is remote input bound for HTML and CSS: validate, trim, cap, default.
import type { PanelRecord } from '../client/license-response.js';
import { cleanText, safeHttpUrl } from '../text.js';

/** What templates get as `res.locals.branding`. Every value is safe to place in HTML once escaped. */
export interface Branding {
  /** Display name of the panel, trimmed, control characters removed, at most 80 characters. */
  readonly name: string;
  /** Logo URL: absolute `https:` or `http:`, or null. */
  readonly logoUrl: string | null;
  /** Brand colour, always `#rrggbb`. */
  readonly color: string;
  readonly subdomain: string | null;
  readonly customDomain: string | null;
}

export const NAME_MAX = 80;
const COLOR = /^#[0-9a-fA-F]{6}$/;
const HOST_LABELS = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/i;

export function safeColor(value: string | undefined, fallback: string): string {
  return typeof value === 'string' && COLOR.test(value) ? value.toLowerCase() : fallback;
}

export function safeHostname(value: string | undefined): string | null {
  if (typeof value !== 'string') return null;
  const trimmed = value.trim().toLowerCase();
  return HOST_LABELS.test(trimmed) ? trimmed : null;
}

export interface BrandingDefaults {
  name: string;
  color: string;
}

export function brandingFrom(panel: Partial<PanelRecord> | undefined, defaults: BrandingDefaults): Branding {
  return Object.freeze({
    name: cleanText(panel?.name, NAME_MAX) ?? defaults.name,
    logoUrl: safeHttpUrl(panel?.brand_logo_url),
    color: safeColor(panel?.brand_color, defaults.color),
    subdomain: safeHostname(panel?.subdomain),
    customDomain: safeHostname(panel?.custom_domain),
  });
}

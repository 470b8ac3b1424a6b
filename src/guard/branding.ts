// Branding from the mother is remote input bound for HTML and CSS: validate, trim, cap, default.
import type { PanelRecord } from '../client/license-response.js';

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
const URL_MAX = 2048;
const COLOR = /^#[0-9a-fA-F]{6}$/;
const HOST_LABELS = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/i;
// C0/C1 controls, bidi overrides and zero-width characters: invisible in a page, useful for spoofing.
// biome-ignore lint/suspicious/noControlCharactersInRegex: these are exactly the characters to strip.
const INVISIBLE = /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]/g;

export function cleanText(value: string | undefined, max: number): string | null {
  if (typeof value !== 'string') return null;
  const cleaned = value.replace(INVISIBLE, '').trim();
  if (cleaned === '') return null;
  return [...cleaned].slice(0, max).join('');
}

export function safeColor(value: string | undefined, fallback: string): string {
  return typeof value === 'string' && COLOR.test(value) ? value.toLowerCase() : fallback;
}

/** Accepts only what `new URL` parses as http(s), as sent: no leading/trailing spaces, no other schemes. */
export function safeHttpUrl(value: string | undefined): string | null {
  if (typeof value !== 'string' || value.length === 0 || value.length > URL_MAX || value !== value.trim()) return null;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return null;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return null;
  if (url.username || url.password) return null;
  return url.href;
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

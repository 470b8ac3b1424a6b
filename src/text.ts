// Small validators for untrusted text, URLs and dates, shared by the client, guard and CLI.

// C0/C1 controls, bidi overrides and zero-width characters: invisible in a page or terminal,
// useful for spoofing and log or ANSI injection.
// biome-ignore lint/suspicious/noControlCharactersInRegex: these are exactly the characters to strip.
const INVISIBLE = /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]/g;

/** Strips invisible characters, trims, caps at `max` code points; null when nothing is left. */
export function cleanText(value: unknown, max: number): string | null {
  if (typeof value !== 'string') return null;
  const cleaned = value.replace(INVISIBLE, '').trim();
  if (cleaned === '') return null;
  return [...cleaned].slice(0, max).join('');
}

export const URL_MAX = 2048;
const HOSTNAME = /^(?:[a-z0-9-]+\.)*[a-z0-9-]+$|^\[[0-9a-f:.]+\]$/i;

/**
 * Accepts only what `new URL` parses as http(s), exactly as given: no surrounding spaces, no
 * credentials, and a plain hostname (a `;` or `'` in the host would leak into a CSP header).
 * Returns the normalized href, or null.
 */
export function safeHttpUrl(value: unknown): string | null {
  if (typeof value !== 'string' || value.length === 0 || value.length > URL_MAX || value !== value.trim()) return null;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return null;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return null;
  if (url.username || url.password || !HOSTNAME.test(url.hostname)) return null;
  return url.href;
}

/** Parses a real calendar date `YYYY-MM-DD` to the epoch ms of its start (UTC), or null. */
export function parseIsoDate(value: unknown): number | null {
  const match = typeof value === 'string' ? /^(\d{4})-(\d{2})-(\d{2})$/.exec(value) : null;
  if (!match) return null;
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
  const date = new Date(Date.UTC(year, month - 1, day));
  const real = date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
  return real ? date.getTime() : null;
}

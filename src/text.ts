// Small validators for untrusted text, URLs and dates, shared by the client, guard and CLI.

// Invisible or layout-changing characters, by Unicode property rather than a hand list (which
// missed U+2060, U+061C, U+00AD, tag characters and U+2028): controls (Cc), format characters
// (Cf: zero-width, bidi overrides, soft hyphen, tags), line/paragraph separators (Zl, Zp),
// private-use (Co) and lone surrogates (Cs), every Default_Ignorable_Code_Point (variation
// selectors, the combining grapheme joiner, Hangul fillers, unassigned ignorables), and the
// braille blank, a symbol that renders as nothing.
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cs}\p{Default_Ignorable_Code_Point}\u2800]/gu;
const WHITESPACE_RUN = /\s+/g;
/** Whitespace that collapsing would change: a run, or one that is not a plain space. */
const UNTIDY_SPACE = /\s\s|[^\S ]/;

/**
 * Strips invisible characters, collapses whitespace runs to one space, trims, and caps at `max`
 * code points; null when nothing is left.
 */
export function cleanText(value: unknown, max: number): string | null {
  if (typeof value !== 'string') return null;
  const visible = value.replace(INVISIBLE, '');
  // Replaced only where it changes something: a clean value stays the very string given.
  const cleaned = (UNTIDY_SPACE.test(visible) ? visible.replace(WHITESPACE_RUN, ' ') : visible).trim();
  if (cleaned === '') return null;
  // Unchanged and short enough (code units bound code points): the same string, not a copy.
  if (cleaned.length <= max) return cleaned;
  return [...cleaned].slice(0, max).join('');
}

// A surrogate without its pair: what `text.slice(0, n)` leaves when it cuts an emoji in two. No
// UTF-8 encoder can write one, so each driver substitutes U+FFFD (PostgreSQL, MySQL, Redis) or
// three of them (SQLite): two such ids would become one on the way into a store.
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, 'g');

/** Whether `value` is well-formed Unicode (no lone surrogate): text every store and the wire keep byte for byte. */
export function isWellFormedText(value: string): boolean {
  return !LONE_SURROGATE.test(value);
}

/** `value` with each lone surrogate named (`[lone surrogate U+D800]`): a message then says what was wrong (cleanText would drop it). */
export function showLoneSurrogates(value: string): string {
  return value.replace(LONE_SURROGATES, (char) => `[lone surrogate U+${char.charCodeAt(0).toString(16).toUpperCase()}]`);
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
  // Already normalized: keep the given string rather than a copy.
  return url.href === value ? value : url.href;
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

// What a terminal may interpret: C0/C1 controls (ESC sequences, OSC 52 clipboard writes, BEL),
// format characters (bidi overrides reorder what is shown) and line separators.
const TERMINAL_UNSAFE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu;

function visibleEscape(char: string): string {
  const code = char.codePointAt(0) ?? 0;
  return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u{${code.toString(16)}}`;
}

/** Makes text safe for one terminal line: every control or format character becomes a visible `\xNN`/`\u{…}`. */
export function escapeControls(value: string): string {
  return value.replace(TERMINAL_UNSAFE, visibleEscape);
}

/** Like escapeControls, but keeps newlines and tabs (multi-line output such as usage text). */
export function escapeControlsKeepLines(value: string): string {
  return value.replace(TERMINAL_UNSAFE, (char) => (char === '\n' || char === '\t' ? char : visibleEscape(char)));
}

/**
 * JSON for one terminal line: what escapeControls would turn into `\x..` (invalid JSON) is
 * written as JSON `\uXXXX` escapes instead, so the output parses and a terminal shows it inert.
 */
export function jsonLine(value: unknown): string {
  return JSON.stringify(value).replace(TERMINAL_UNSAFE, (char) =>
    [...Array(char.length).keys()].map((i) => `\\u${char.charCodeAt(i).toString(16).padStart(4, '0')}`).join(''),
  );
}

// The release record of the partner API (docs/partner-api.md), validated locally before anything is queued or sent.
import { z } from 'zod';
import { InvalidReleaseError } from './errors.js';
import { escapeControls, isWellFormedText, parseIsoDate, safeHttpUrl, URL_MAX } from './text.js';

/** Text fields are capped so a runaway form cannot queue megabytes (the contract names no limit). */
export const MAX_TEXT_LENGTH = 500;

// C0/C1 controls other than tab and newline: no text field needs them, and they end up in
// terminals (the CLI), logs and the mother's review screens.
// biome-ignore lint/suspicious/noControlCharactersInRegex: these are exactly the characters to refuse.
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

const text = z
  .string()
  .max(MAX_TEXT_LENGTH, `must be at most ${MAX_TEXT_LENGTH} characters`)
  .refine((v) => !CONTROL.test(v), 'must not contain control characters (only tab and newline are allowed)')
  // A lone surrogate cannot be encoded as UTF-8: the mother would receive U+FFFD instead.
  .refine(isWellFormedText, 'must be valid Unicode text (it has a lone surrogate)');

// ISRC: country (2 letters), registrant (3 alphanumerics), year (2 digits), designation (5 digits).
const ISRC = /^[A-Z]{2}[A-Z0-9]{3}\d{2}\d{5}$/;

const releaseSchema = z.strictObject({
  title: z
    .string()
    .refine((v) => v.trim().length > 0, 'Missing release title.')
    .pipe(text),
  album: text.optional(),
  primary_artist: text.optional(),
  singer: text.optional(),
  music_director: text.optional(),
  lyricist: text.optional(),
  genre: text.optional(),
  language: text.optional(),
  label: text.optional(),
  isrc: z
    .string()
    .transform((v) => v.replaceAll('-', '').toUpperCase())
    .refine((v) => ISRC.test(v), 'must be an ISRC: 12 characters CCXXXYYNNNNN (hyphens allowed), e.g. US-RC1-76-07839')
    .optional(),
  upc_code: z
    .string()
    .regex(/^\d{12,13}$/, 'must be 12 or 13 digits')
    .optional(),
  release_date: z
    .string()
    .refine((v) => parseIsoDate(v) !== null, 'must be a real calendar date YYYY-MM-DD')
    .optional(),
  remote_track_id: text.refine((v) => v.length > 0, 'must not be empty').optional(),
  audio_url: z
    .string()
    .max(URL_MAX)
    .refine((v) => safeHttpUrl(v) !== null, 'must be an absolute http(s) URL')
    .optional(),
  cover_url: z
    .string()
    .max(URL_MAX)
    .refine((v) => safeHttpUrl(v) !== null, 'must be an absolute http(s) URL')
    .optional(),
});

/**
 * The most UTF-8 bytes `serializeRelease()` can produce for a valid release: at most 3 bytes per
 * UTF-16 code unit of its text and URL fields (a 3-byte character is one unit, a 4-byte one two
 * units, an escaped quote or tab two bytes for one unit; other controls are refused), plus the
 * short fields, the names and the punctuation. What the console reads a slice at a time by.
 */
export const MAX_RELEASE_BYTES = 3 * (10 * MAX_TEXT_LENGTH + 2 * URL_MAX) + 1024;

/** A release as accepted by `pushRelease` and `outbox.enqueue` (all strings; docs/partner-api.md). */
export type Release = z.input<typeof releaseSchema>;

/** Field names of the release record, in contract order. */
export const RELEASE_FIELDS = Object.keys(releaseSchema.shape) as (keyof Release)[];

/**
 * Validates a release and returns its normalized form (ISRC upper-cased, hyphens removed).
 * Throws InvalidReleaseError naming the first offending field.
 */
export function validateRelease(input: unknown): Release {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new InvalidReleaseError('release', 'A release must be an object with at least a title.');
  }
  const result = releaseSchema.safeParse(input);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  if (!issue) throw new InvalidReleaseError('release', 'Invalid release.');
  if (issue.code === 'unrecognized_keys') {
    // The key comes from the caller's data: shown escaped and shortened.
    const key = escapeControls([...(issue.keys[0] ?? 'unknown')].slice(0, 60).join(''));
    throw new InvalidReleaseError(key, `Unknown release field "${key}". Allowed fields: ${RELEASE_FIELDS.join(', ')}.`);
  }
  const field = String(issue.path[0] ?? 'release');
  if (field === 'title' && (issue.code === 'invalid_type' || issue.message === 'Missing release title.')) {
    throw new InvalidReleaseError('title', 'Missing release title.');
  }
  if (issue.code === 'invalid_type') throw new InvalidReleaseError(field, `Release field "${field}" must be a string.`);
  throw new InvalidReleaseError(field, `Release field "${field}" ${issue.message}.`);
}

/** Serializes a validated release once; these exact bytes are signed and sent. */
export function serializeRelease(release: Release): string {
  return JSON.stringify({ release });
}

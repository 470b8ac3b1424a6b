import { describe, expect, it } from 'vitest';
import { InvalidReleaseError } from '../src/errors.js';
import { serializeRelease, validateRelease } from '../src/release.js';

function fieldOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    if (error instanceof InvalidReleaseError) return `${error.field}: ${error.message}`;
    throw error;
  }
  throw new Error('expected an InvalidReleaseError');
}

describe('validateRelease()', () => {
  it('accepts a full release and normalizes the ISRC', () => {
    const release = validateRelease({
      title: 'Song',
      album: 'Album',
      isrc: 'us-rc1-76-07839',
      upc_code: '012345678905',
      release_date: '2024-02-29',
      remote_track_id: 't-1',
      audio_url: 'https://cdn.example/a.mp3',
      cover_url: 'http://cdn.example/c.jpg',
    });
    expect(release.isrc).toBe('USRC17607839');
  });

  it('uses the contract words for a missing title', () => {
    expect(fieldOf(() => validateRelease({}))).toBe('title: Missing release title.');
    expect(fieldOf(() => validateRelease({ title: '   ' }))).toBe('title: Missing release title.');
  });

  it('names the field of each failure', () => {
    expect(fieldOf(() => validateRelease({ title: 'x', album: 5 }))).toBe('album: Release field "album" must be a string.');
    expect(fieldOf(() => validateRelease({ title: 'x', artist: 'y' }))).toMatch(/^artist: Unknown release field "artist"/);
    expect(fieldOf(() => validateRelease({ title: 'x', release_date: '2023-02-29' }))).toMatch(/^release_date: .*real calendar date/);
    expect(fieldOf(() => validateRelease({ title: 'x', release_date: '2023-2-01' }))).toMatch(/^release_date:/);
    expect(fieldOf(() => validateRelease({ title: 'x', isrc: 'USRC1760783' }))).toMatch(/^isrc: .*ISRC/);
    expect(fieldOf(() => validateRelease({ title: 'x', isrc: 'U1RC17607839' }))).toMatch(/^isrc:/);
    expect(fieldOf(() => validateRelease({ title: 'x', upc_code: '12345' }))).toMatch(/^upc_code: .*12 or 13 digits/);
    expect(fieldOf(() => validateRelease({ title: 'x', upc_code: '01234567890a' }))).toMatch(/^upc_code:/);
    expect(fieldOf(() => validateRelease({ title: 'x', audio_url: 'javascript:alert(1)' }))).toMatch(/^audio_url: .*http\(s\) URL/);
    expect(fieldOf(() => validateRelease({ title: 'x', cover_url: '/relative.jpg' }))).toMatch(/^cover_url:/);
    expect(fieldOf(() => validateRelease({ title: 'x'.repeat(501) }))).toMatch(/^title: .*at most 500/);
    expect(fieldOf(() => validateRelease(null))).toMatch(/^release:/);
    expect(fieldOf(() => validateRelease(['x']))).toMatch(/^release:/);
  });

  it('refuses control characters other than tab and newline in text fields', () => {
    for (const bad of ['\u001b[2J', '\u001b]52;c;aGk=\u0007', 'a\u0000b', 'a\u009bb', 'a\rb']) {
      expect(
        fieldOf(() => validateRelease({ title: bad })),
        JSON.stringify(bad),
      ).toMatch(/^title: .*control characters/);
      expect(fieldOf(() => validateRelease({ title: 'x', remote_track_id: bad }))).toMatch(/^remote_track_id: .*control characters/);
    }
    expect(validateRelease({ title: 'Line one\nline two\tend' }).title).toBe('Line one\nline two\tend');
    expect(fieldOf(() => validateRelease({ title: 'half \ud83c' }))).toMatch(/^title: .*lone surrogate/);
    expect(validateRelease({ title: 'Song 🎵' }).title).toBe('Song 🎵');
  });

  it('names an unknown field escaped, so it cannot reach a terminal raw', () => {
    const message = fieldOf(() => validateRelease({ title: 'x', '\u001b[2Jevil': 'y' }));
    expect(message).not.toContain('\u001b');
    expect(message).toContain('\\x1b[2Jevil');
  });

  it('serializes to the exact body shape of the contract', () => {
    expect(serializeRelease(validateRelease({ title: 'Café 🎵' }))).toBe('{"release":{"title":"Café 🎵"}}');
  });
});

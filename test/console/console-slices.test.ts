import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_SEARCHES, SLICE_ROWS } from '../../src/console/slices.js';
import { findByTitle } from '../../src/console/title-search.js';
import { licenseConsole } from '../../src/console.js';
import { createReleaseOutbox, type Release, type ReleaseOutbox } from '../../src/index.js';
import { MAX_RELEASE_BYTES, serializeRelease } from '../../src/release.js';
import type { MotherEmulator } from '../../src/testing.js';
import { clientFor, listenLocal, longestBlock, startEmulator } from '../support/helpers.js';

// The console runs inside the panel's own app: a page must never hold its event loop for more
// than a few milliseconds, whatever the store and the data. Here the worst data enqueue() takes
// (10,000 releases of the largest size, in SQLite, whose reads are synchronous), searched by a
// title found nowhere over real HTTP, once and five times at once, while the event loop's delay
// is measured. Before pages read in slices, one such search held the loop for 1.6 to 4 s.
const RELEASES = 10_000;
/** Far above a slice (a few ms) on a loaded 2-core machine, far below what one unsliced search held. */
const LONGEST_BLOCK_MS = 250;

const dir = mkdtempSync(join(tmpdir(), 'console-slices-'));
let mother: MotherEmulator;
let outbox: ReleaseOutbox;
let server: Server;
let origin: string;

/** A release with every field at its largest, in 3-byte characters: the most bytes a release can be. */
function largest(i: number): Release {
  const text = (prefix = '') => `${prefix}${'界'.repeat(500 - prefix.length)}`;
  const url = `https://cdn.example/${'界'.repeat(2048 - 'https://cdn.example/'.length)}`;
  return {
    ...Object.fromEntries(['title', 'album', 'primary_artist', 'singer', 'music_director', 'lyricist', 'genre', 'language', 'label'].map((f) => [f, text()])),
    title: text(`Song ${i} `),
    remote_track_id: text(`t${i}-`),
    isrc: 'USRC17607839',
    upc_code: '1234567890123',
    release_date: '2024-01-01',
    audio_url: url,
    cover_url: url,
  } as Release;
}

const page = async (path: string) => {
  const response = await fetch(`${origin}/ops${path}`);
  return { status: response.status, retryAfter: response.headers.get('retry-after'), text: await response.text() };
};

beforeAll(async () => {
  mother = await startEmulator();
  outbox = createReleaseOutbox({ client: clientFor(mother), file: join(dir, 'outbox.db'), autoStart: false });
  for (let i = 1; i <= RELEASES; i += 200) await Promise.all(Array.from({ length: Math.min(200, RELEASES + 1 - i) }, (_, k) => outbox.enqueue(largest(i + k))));
  const app = express().use('/ops', licenseConsole({ outbox, authorize: () => true }));
  ({ server, origin } = await listenLocal(app));
}, 120_000);
afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await outbox?.close();
  await mother?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('licenseConsole() on a SQLite outbox of the largest releases', () => {
  it('reads a slice of at most SLICE_ROWS releases of the largest size at a time', () => {
    expect(Buffer.byteLength(serializeRelease(largest(1)))).toBeLessThanOrEqual(MAX_RELEASE_BYTES);
    expect(SLICE_ROWS * MAX_RELEASE_BYTES).toBeLessThanOrEqual(256 * 1024);
    expect(SLICE_ROWS).toBeGreaterThanOrEqual(1);
  });

  it('searches a title found nowhere without holding the event loop, and stops within its budget offering to read on', async () => {
    const { ms, result } = await longestBlock(() => page('/releases?state=pending&title=nomatch'));
    expect(result.status).toBe(200);
    expect(ms).toBeLessThan(LONGEST_BLOCK_MS);
    // Bounded in rows (10,000) and in time (1 s of reading): it says how far it read, and reads on from there.
    const [, read, upTo] = /this page read ([\d,]+) releases \(up to #(\d+)\)/.exec(result.text) ?? [];
    expect(Number(read?.replaceAll(',', ''))).toBe(Number(upTo));
    expect(Number(upTo)).toBeLessThanOrEqual(10_000);
    const further = /href="([^"]+)">Search further/.exec(result.text)?.[1]?.replaceAll('&amp;', '&');
    expect(further).toBe(`/ops/releases?state=pending&title=nomatch&after=${upTo}`);
  });

  it(`runs ${MAX_SEARCHES} title searches at once, taking turns, and answers the others 503 with Retry-After`, async () => {
    const { ms, result } = await longestBlock(() => Promise.all(Array.from({ length: 5 }, () => page('/releases?state=pending&title=nomatch'))));
    expect(ms).toBeLessThan(LONGEST_BLOCK_MS);
    expect(result.map((answer) => answer.status).sort()).toEqual([200, 200, 503, 503, 503]);
    const refused = result.find((answer) => answer.status === 503);
    expect(refused?.retryAfter).toBe('5');
    expect(refused?.text).toContain('title searches are running on this instance already');
    // Once they are done, a search runs again.
    expect((await page('/releases?state=pending&title=nomatch')).status).toBe(200);
  });

  it('lists 50 of the largest releases a page, and shows one, without holding the event loop', async () => {
    const { ms, result } = await longestBlock(async () => [await page('/releases?state=pending'), await page('/releases'), await page('/releases/5000')]);
    expect(result.map((answer) => answer.status)).toEqual([200, 200, 200]);
    expect(result[0]?.text).toContain('Next page');
    expect(ms).toBeLessThan(LONGEST_BLOCK_MS);
  });

  it('stops a search after its time budget, and reads the rows of one slice at least', async () => {
    const query = { state: 'pending' as const, panel: undefined, title: 'nomatch', after: 100 };
    const matches = await findByTitle(outbox, query, 50, undefined, { rows: 10_000, ms: 1e-6 });
    expect(matches).toEqual({ found: [], next: 100 + SLICE_ROWS, stoppedEarly: true, read: SLICE_ROWS });
    // Aborted (the browser went away): it stops reading.
    await expect(findByTitle(outbox, query, 50, AbortSignal.abort(new Error('gone')))).rejects.toThrow('gone');
  });
});

import type { Server } from 'node:http';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { licenseConsole } from '../../src/console.js';
import { type LicenseGuard, licenseGuard } from '../../src/index.js';
import { listenLocal, longestBlock } from '../support/helpers.js';

// The panels pages with many panels in memory (panels.max goes up to a million): a page must
// never hold the app's event loop for long however many there are. 20,000 panels, each with
// its own host (their mother refuses connections: every panel is pending), then the panels list,
// a filter (every panel is read), a deep page and a panel's page over HTTP, measuring the event
// loop. Before, a filtered list read every panel in full at once, and each row looked for its
// hosts among every host remembered (a second here).
const PANELS = 20_000;
const LONGEST_BLOCK_MS = 250;

let guard: LicenseGuard;
let server: Server;
let origin: string;
const hostOf = (i: number) => `p${i}.scale.example`;

const page = async (path: string) => {
  const response = await fetch(`${origin}/ops${path}`);
  return { status: response.status, text: await response.text() };
};

beforeAll(async () => {
  guard = licenseGuard({
    baseUrl: 'http://127.0.0.1:9',
    logger: { warn: () => {}, error: () => {} },
    panels: {
      resolve: (host) => {
        const i = Number(/^p(\d+)\./.exec(host)?.[1]);
        return Number.isInteger(i) ? { apiKey: `pk_scale_${i}`, apiSecret: `sk_scale_${i}_0123456789abcdef` } : null;
      },
      max: PANELS,
      resolvePerSecond: 1_000_000,
      resolveBurst: 1_000_000,
      resolveConcurrency: 100_000,
    },
  });
  const requestFor = (host: string) => ({ url: '/', originalUrl: '/', method: 'GET', headers: { host }, hostname: host });
  const visit = (host: string) =>
    new Promise<void>((resolve) =>
      guard(requestFor(host) as never, { locals: {}, setHeader() {}, status() {}, end: () => resolve(), send: () => resolve() } as never, () => resolve()),
    );
  for (let i = 0; i < PANELS; i += 500) await Promise.all(Array.from({ length: 500 }, (_, k) => visit(hostOf(i + k))));
  const app = express().use('/ops', licenseConsole({ guard, authorize: () => true }));
  ({ server, origin } = await listenLocal(app));
}, 120_000);
afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await guard?.close();
});

describe(`licenseConsole() with ${PANELS.toLocaleString('en')} panels`, () => {
  it('lists, filters and pages the panels without holding the event loop', async () => {
    const { ms, result } = await longestBlock(async () => [await page('/'), await page('/?state=pending'), await page('/?state=pending&page=300')]);
    expect(result.map((answer) => answer.status)).toEqual([200, 200, 200]);
    expect(ms).toBeLessThan(LONGEST_BLOCK_MS);
    const [first, filtered, deep] = result;
    expect(first?.text).toContain(`<b>${PANELS}</b><span>pending</span>`);
    for (const listed of [first, filtered]) expect([...(listed?.text ?? '').matchAll(/<tr><td><a href="\/ops\/panels\//g)]).toHaveLength(50);
    expect(filtered?.text).toContain('Next page');
    // Page 300 of 50 a page: panels 15,001 to 15,050, and more after them.
    expect([...(deep?.text ?? '').matchAll(/<tr><td><a href="\/ops\/panels\//g)]).toHaveLength(50);
    expect(deep?.text).toContain('Next page');
  });

  it("shows a panel's page, with its host, without holding the event loop", async () => {
    const panel = guard.status(hostOf(12_345))?.panel as string;
    const { ms, result } = await longestBlock(() => page(`/panels/${encodeURIComponent(panel)}`));
    expect(result.status).toBe(200);
    expect(result.text).toContain(hostOf(12_345));
    expect(ms).toBeLessThan(LONGEST_BLOCK_MS);
  });
});

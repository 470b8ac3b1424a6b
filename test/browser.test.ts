// A real browser: headless Chromium (Debian's package) opens the example panel active and locked.
import { existsSync, mkdirSync } from 'node:fs';
import type { Server } from 'node:http';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../src/testing.js';
import { silentLogger } from './support/guard-app.js';
import { API_KEY, API_SECRET, startEmulator } from './support/helpers.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const hasChromium = existsSync(CHROMIUM);
const artifacts = resolve(import.meta.dirname, 'artifacts');
// The browser's own global, used inside page functions (this suite is typed without the DOM lib).
declare const getComputedStyle: (element: unknown) => { backgroundColor: string; color: string };
const BACKGROUND = (element: unknown) => getComputedStyle(element).backgroundColor;

if (!hasChromium) {
  console.warn(`SKIPPED browser test: no Chromium at ${CHROMIUM}. Install it with 'apt-get install -y chromium' (.ci/run does).`);
}

describe.skipIf(!hasChromium)('the example panel in headless Chromium', () => {
  let emulator: MotherEmulator;
  let server: Server;
  let origin: string;
  let panel: { guard: { refresh(): Promise<string> }; start(): Promise<string>; close(): Promise<void> };
  let browser: import('playwright-core').Browser;

  beforeAll(async () => {
    mkdirSync(artifacts, { recursive: true });
    const { chromium } = await import('playwright-core');
    // The example app imports the package by its published name, which resolves to dist/.
    const { createPanelApp } = await import('../example-app/app.js');
    emulator = await startEmulator([{ apiKey: API_KEY, apiSecret: API_SECRET, active: true, panel: { name: 'Rhythm Hub', brand_color: '#0f766e' } }]);
    const built = createPanelApp({ baseUrl: emulator.url, apiKey: API_KEY, apiSecret: API_SECRET, logger: silentLogger });
    panel = built;
    server = built.app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    origin = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    emulator.setPanel(API_KEY, { panel: { brand_logo_url: `${origin}/static/logo.svg` } });
    await built.start();
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
      ],
    });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await panel?.close();
    await new Promise((r) => server?.close(r));
    await emulator?.close();
  });

  async function open(path: string) {
    const page = await browser.newPage();
    const requested: string[] = [];
    page.on('request', (request) => {
      requested.push(request.url());
    });
    const response = await page.goto(`${origin}${path}`);
    await page.waitForLoadState('networkidle');
    return { page, requested, status: response?.status() };
  }

  it('shows the brand colour, name and logo while active', async () => {
    const { page, status } = await open('/');
    expect(status).toBe(200);
    await page.screenshot({ path: resolve(artifacts, 'panel-active.png'), fullPage: true });
    expect(await page.locator('.topbar').evaluate(BACKGROUND)).toBe('rgb(15, 118, 110)');
    expect(await page.locator('.topbar .name').textContent()).toBe('Rhythm Hub');
    expect(await page.locator('.topbar .logo').evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth)).toBeGreaterThan(0);
    await page.close();
  });

  it('shows the locked view, branded, with no outside request', async () => {
    emulator.setPanel(API_KEY, { active: false, reason: 'Invoice overdue' });
    expect(await panel.guard.refresh()).toBe('locked');
    const { page, requested, status } = await open('/');
    expect(status).toBe(503);
    await page.screenshot({ path: resolve(artifacts, 'panel-locked.png'), fullPage: true });
    expect(await page.locator('#lock-message').textContent()).toBe('The panel is paused for now. Your tracks and data are safe.');
    expect(await page.content()).not.toContain('Invoice overdue');
    // Links take the brand colour, not the browser's default blue.
    expect(await page.locator('#lock-contact a').evaluate((a) => getComputedStyle(a).color)).toBe('rgb(15, 118, 110)');
    expect(await page.locator('.topbar').evaluate(BACKGROUND)).toBe('rgb(15, 118, 110)');
    expect(requested.length).toBeGreaterThan(1);
    for (const url of requested) expect(new URL(url).origin).toBe(origin);
    await page.close();
    emulator.setPanel(API_KEY, { active: true, reason: null });
    expect(await panel.guard.refresh()).toBe('active');
  });
});

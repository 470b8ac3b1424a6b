// The operator's console in headless Chromium (Debian's package): what an operator sees and does,
// the CSRF refusal of a form posted from another site, and XSS payloads shown as text.
import { existsSync, mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleDeployment, consoleDeployment } from '../support/console-app.js';
import { waitFor } from '../support/helpers.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const hasChromium = existsSync(CHROMIUM);
const artifacts = resolve(import.meta.dirname, '../artifacts');
// The browser's own globals, used inside page functions (this suite is typed without the DOM lib).
declare const window: { __xss?: number };

if (!hasChromium) console.warn(`SKIPPED console browser test: no Chromium at ${CHROMIUM}. Install it with 'apt-get install -y chromium' (.ci/run does).`);

describe.skipIf(!hasChromium)('the console in headless Chromium', () => {
  let deployment: ConsoleDeployment;
  let origin: string;
  let browser: import('playwright-core').Browser;
  let context: import('playwright-core').BrowserContext;
  let attacker: Server;
  let attackerOrigin: string;

  beforeAll(async () => {
    mkdirSync(artifacts, { recursive: true });
    deployment = await consoleDeployment();
    ({ origin } = await deployment.listen());
    const { chromium } = await import('playwright-core');
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
    });
    // The operator is signed in: the app's authorize() reads this cookie.
    context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    await context.addCookies([{ name: 'operator', value: 'yes', url: origin }]);
    // Another site whose page posts a form to the console as soon as it loads.
    attacker = createServer((_req, res) => {
      res.setHeader('content-type', 'text/html');
      res.end(
        `<form id="f" method="post" action="${origin}/ops/license/releases/retry-dead"><input name="csrf" value="guessed"></form><script>document.getElementById('f').submit()</script>`,
      );
    }).listen(0, '127.0.0.1');
    await new Promise((r) => attacker.once('listening', r));
    attackerOrigin = `http://localhost:${(attacker.address() as { port: number }).port}`;
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await new Promise((r) => attacker?.close(r));
    await deployment?.close();
  });

  it('lists the panels, one locked and one in grace first, and shows a panel name from the mother as text', async () => {
    const page = await context.newPage();
    await page.goto(`${origin}/ops/license/`);
    const states = await page.locator('table .state').allTextContents();
    expect(states).toEqual(['locked', 'grace', 'active']);
    await page.screenshot({ path: resolve(artifacts, 'console-panels.png'), fullPage: true });
    await page.locator('a', { hasText: 'acme.example' }).first().click();
    await expect.poll(() => page.locator('h1').textContent()).toContain('grace');
    // The panel's name from the mother is an XSS payload: shown as text in its branding.
    expect(await page.locator('dd', { hasText: 'window.__xss=2' }).count()).toBe(1);
    expect(await page.evaluate(() => window.__xss)).toBeUndefined();
    await page.screenshot({ path: resolve(artifacts, 'console-panel.png'), fullPage: true });
    await page.close();
  });

  it('retries a dead release from its page, and the mother receives it', async () => {
    const page = await context.newPage();
    await page.goto(`${origin}/ops/license/releases?state=dead`);
    expect(await page.evaluate(() => window.__xss)).toBeUndefined();
    // The payload is there, as text.
    expect(await page.locator('table').last().textContent()).toContain('<script>window.__xss=2</script>');
    await page.locator(`a[href$="/releases/${deployment.deadId}"]`).first().click();
    await page.screenshot({ path: resolve(artifacts, 'console-release.png'), fullPage: true });
    await page.getByRole('button', { name: 'Retry this release' }).click();
    await expect.poll(() => page.locator('.notice').textContent()).toContain('pending again');
    await waitFor(async () => (await deployment.outbox.get(deployment.deadId))?.state === 'delivered', 'the retried release delivered');
    await page.reload();
    expect(await page.locator('h1 .state').textContent()).toBe('delivered');
    await page.close();
  });

  it('refuses a form another site posts with the operator’s cookies', async () => {
    const page = await context.newPage();
    const answer = page.waitForResponse((response) => response.url().endsWith('/ops/license/releases/retry-dead'));
    await page.goto(attackerOrigin);
    expect((await answer).status()).toBe(403);
    await page.close();
  });

  it('answers 401 to a browser that is not signed in', async () => {
    const stranger = await browser.newContext();
    const page = await stranger.newPage();
    const response = await page.goto(`${origin}/ops/license/`);
    expect(response?.status()).toBe(401);
    expect(await page.locator('body').textContent()).toBe('Not authorised');
    await stranger.close();
  });
});

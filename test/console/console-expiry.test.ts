// The console and expiry: panels whose license expires soon come right after the locked ones, the
// nearest first (and so do the metrics' bounded per-panel series); one panel's guard is named by
// its brand name; no "Releases" without an outbox.
import express from 'express';
import { Registry } from 'prom-client';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { licenseConsole } from '../../src/console.js';
import type { MotherEmulator } from '../../src/emulator/emulator.js';
import { createReleaseOutbox, type LicenseGuard, licenseGuard, memoryOutboxStore } from '../../src/index.js';
import { registerMetrics } from '../../src/metrics.js';
import { silentLogger } from '../support/guard-app.js';
import { clientFor, DEMO_PANEL, startEmulator } from '../support/helpers.js';

const DAY_MS = 86_400_000;
const inDays = (days: number) => new Date(Date.now() + days * DAY_MS).toISOString().slice(0, 10);
const TENANTS = {
  'far.example': { apiKey: 'pk_far', apiSecret: 'sk_far_0123456789', active: true, expires: 200 },
  'locked.example': { apiKey: 'pk_locked', apiSecret: 'sk_locked_0123456789', active: false, expires: 2 },
  'fortnight.example': { apiKey: 'pk_fortnight', apiSecret: 'sk_fortnight_0123456789', active: true, expires: 10 },
  'soon.example': { apiKey: 'pk_soon', apiSecret: 'sk_soon_0123456789', active: true, expires: 2 },
} as const;

let emulator: MotherEmulator;
const guards: LicenseGuard[] = [];
const closing: { close(): Promise<unknown> }[] = [];
beforeAll(async () => {
  emulator = await startEmulator([
    DEMO_PANEL,
    ...Object.entries(TENANTS).map(([host, { apiKey, apiSecret, active, expires }]) => ({
      apiKey,
      apiSecret,
      active,
      panel: { name: host, expires_at: inDays(expires) },
    })),
  ]);
});
afterAll(async () => {
  await Promise.all([...guards, ...closing].map((item) => item.close()));
  await emulator.close();
});

const consoleOf = (options: Omit<Parameters<typeof licenseConsole>[0], 'authorize'>) =>
  express().use('/ops', licenseConsole({ ...options, authorize: () => true }));
const headerOf = (html: string) => /<header>([\s\S]*?)<\/header>/.exec(html)?.[1] ?? '';

describe('licenseConsole() with one panel', () => {
  it('names the panel by its brand name, its id second, and shows no Releases without an outbox', async () => {
    const guard = licenseGuard({ client: clientFor(emulator), logger: silentLogger });
    guards.push(guard);
    await guard.start();
    const list = await request(consoleOf({ guard })).get('/ops/').expect(200);
    const id = /\/ops\/panels\/([0-9a-f]{32})"/.exec(list.text)?.[1] as string;
    expect(id).toMatch(/^[0-9a-f]{32}$/);
    expect(list.text).toContain(`<a href="/ops/panels/${id}">Rhythm Hub</a><br><span class="muted">${id}</span>`);
    expect(headerOf(list.text)).toContain('>Panels</a>');
    expect(headerOf(list.text)).not.toContain('Releases');
    const page = await request(consoleOf({ guard })).get(`/ops/panels/${id}`).expect(200);
    expect(page.text).toMatch(/<h1>Rhythm Hub <span class="state active">/);
    expect(headerOf(page.text)).not.toContain('Releases');
    await request(consoleOf({ guard })).get('/ops/releases').expect(404);

    const outbox = createReleaseOutbox({ client: clientFor(emulator), store: memoryOutboxStore(), logger: silentLogger });
    closing.push(outbox);
    const withOutbox = await request(consoleOf({ guard, outbox })).get('/ops/').expect(200);
    expect(headerOf(withOutbox.text)).toContain('>Releases</a>');
    const outboxOnly = await request(consoleOf({ outbox })).get('/ops/releases').expect(200);
    expect(headerOf(outboxOnly.text)).not.toContain('Panels');
  });
});

describe('licenseConsole() with panels by host', () => {
  it('lists locked panels first, then those whose license expires soon (nearest first), then the rest', async () => {
    const guard = licenseGuard({
      baseUrl: emulator.url,
      logger: silentLogger,
      panels: { resolve: (host) => (host in TENANTS ? TENANTS[host as keyof typeof TENANTS] : null) },
    });
    guards.push(guard);
    const app = express().use(guard);
    app.get('/', (_req, res) => {
      res.send('ok');
    });
    for (const host of Object.keys(TENANTS)) await request(app).get('/').set('Host', host);
    const list = await request(consoleOf({ guard })).get('/ops/').expect(200);
    const order = [...list.text.matchAll(/<a href="\/ops\/panels\/[0-9a-f]+">([a-z.]+)<\/a>/g)].map((match) => match[1]);
    expect(order).toEqual(['locked.example', 'soon.example', 'fortnight.example', 'far.example']);
    // How long each license has left, as the mother counts it.
    const row = (host: string) => list.text.slice(list.text.indexOf(`>${host}</a>`)).split('</tr>')[0] ?? '';
    expect(row('soon.example')).toMatch(/<td>(2|3) d<\/td>|<td>\d+ h<\/td>/);
    expect(row('far.example')).toMatch(/<td>20[01] d<\/td>/);

    // The metrics take the same order for their bounded per-panel series.
    const registry = new Registry();
    registerMetrics({ registry, guard, panelSeries: 2 });
    const idOf = (host: string) => guard.status(host)?.panel as string;
    const states = await registry.getSingleMetricAsString('panel_license_state');
    expect(states).toContain(`panel="${idOf('locked.example')}"`);
    expect(states).toContain(`panel="${idOf('soon.example')}"`);
    expect(states).not.toContain(`panel="${idOf('fortnight.example')}"`);
    const expires = await registry.getSingleMetricAsString('panel_license_expires_in_seconds');
    const seconds = Number(new RegExp(`panel="${idOf('soon.example')}"} (\\d+)`).exec(expires)?.[1]);
    expect(seconds).toBeGreaterThan(2 * 86_400);
    expect(seconds).toBeLessThanOrEqual(3 * 86_400);
    // An inactive verdict says nothing of expiry.
    expect(expires).not.toContain(idOf('locked.example'));
  });
});

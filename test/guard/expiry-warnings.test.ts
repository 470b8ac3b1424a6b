// Expiry warnings of one panel, over real HTTP to the emulator: the 'expiring' event once per
// threshold (also across a restart with a state file), `res.locals.license.expiryWarning`, the
// metric, and the edge cases: no expires_at, one in the past, a mother whose clock is off.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import { Registry } from 'prom-client';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../../src/emulator/emulator.js';
import { type ExpiringEvent, type LicenseGuard, type LicenseGuardOptions, licenseGuard } from '../../src/index.js';
import { registerMetrics } from '../../src/metrics.js';
import { daysLeft } from '../../src/serve/license-state.js';
import { silentLogger } from '../support/guard-app.js';
import { API_KEY, clientFor, DEMO_PANEL, startEmulator } from '../support/helpers.js';

const DAY_MS = 86_400_000;
const OTHER = { apiKey: 'pk_expiry_other', apiSecret: 'sk_expiry_other_0123456789' };
const THIRD = { apiKey: 'pk_expiry_third', apiSecret: 'sk_expiry_third_0123456789' };
/** The UTC date `days` from now, as the mother writes `expires_at`. */
const inDays = (days: number, now = Date.now()) => new Date(now + days * DAY_MS).toISOString().slice(0, 10);
/** Seconds from `now` to the end of `date` (UTC). */
const secondsTo = (date: string, now: number) => (Date.parse(`${date}T00:00:00Z`) + DAY_MS - now) / 1000;

let emulator: MotherEmulator;
let folder: string;
const guards: LicenseGuard[] = [];
beforeAll(async () => {
  emulator = await startEmulator([
    { ...DEMO_PANEL, panel: { ...DEMO_PANEL.panel, expires_at: inDays(60) } },
    { ...OTHER, active: true, panel: { name: 'Other', expires_at: inDays(60) } },
    { ...THIRD, active: true, panel: { name: 'Third', expires_at: inDays(60) } },
  ]);
  folder = mkdtempSync(join(tmpdir(), 'plg-expiry-'));
});
afterAll(async () => {
  await emulator.close();
  rmSync(folder, { recursive: true, force: true });
});
afterEach(async () => {
  await Promise.all(guards.splice(0).map((guard) => guard.close()));
  emulator.setFaults({});
  emulator.setPanel(API_KEY, { active: true, reason: null, panel: { expires_at: inDays(60) } });
});

function guardWith(options: Partial<LicenseGuardOptions> = {}): { guard: LicenseGuard; fired: ExpiringEvent[] } {
  // With `panels`, each panel's client is made from its credentials.
  const client = options.panels ? {} : { client: clientFor(emulator) };
  const guard = licenseGuard({ ...client, logger: silentLogger, jitterMs: 0, retryBaseMs: 3600_000, retryMaxMs: 3600_000, ...options });
  const fired: ExpiringEvent[] = [];
  guard.on('expiring', (event) => fired.push(event));
  guards.push(guard);
  return { guard, fired };
}

const expiresIn = (days: number) => emulator.setPanel(API_KEY, { panel: { expires_at: inDays(days) } });

describe("licenseGuard({ expiryWarnings }): the 'expiring' event", () => {
  it('refuses thresholds that are not whole days from 0 to 3650, or named twice, naming the option and the fix', () => {
    for (const bad of [[7, -1], [1.5], ['7'], 7, [7, 7], [4000], Array.from({ length: 21 }, (_, i) => i)])
      expect(() => licenseGuard({ client: clientFor(emulator), expiryWarnings: bad as never })).toThrow(/`expiryWarnings`[\s\S]*e\.g\. \[30, 14, 7, 3, 1\]/);
    expect(() => licenseGuard({ client: clientFor(emulator), expiryWarnings: [] })).not.toThrow();
  });

  it('fires the threshold reached once, the smallest when several are reached at once, then each next one once', async () => {
    const { guard, fired } = guardWith();
    expiresIn(5);
    await guard.start();
    await guard.refresh();
    await guard.refresh();
    // 30 and 14 were passed before the guard ever saw the license: only the nearest one is said.
    expect(fired).toEqual([{ threshold: 7, daysLeft: 5, expiresAt: inDays(5), expiresInSeconds: expect.any(Number) }]);
    expect(fired[0]?.expiresInSeconds).toBeGreaterThan(5 * 86_400);
    expect(fired[0]?.expiresInSeconds).toBeLessThanOrEqual(6 * 86_400);
    expiresIn(3);
    await guard.refresh();
    expiresIn(2);
    await guard.refresh();
    expect(fired.map((event) => event.threshold)).toEqual([7, 3]);
    // A renewal: a new expires_at starts afresh, far from every threshold.
    expiresIn(60);
    await guard.refresh();
    expiresIn(13);
    await guard.refresh();
    expect(fired.map((event) => [event.threshold, event.daysLeft])).toEqual([
      [7, 5],
      [3, 3],
      [14, 13],
    ]);
  });

  it('uses the thresholds given, and none with []', async () => {
    const { guard, fired } = guardWith({ expiryWarnings: [45, 2] });
    expiresIn(40);
    await guard.start();
    expect(fired.map((event) => event.threshold)).toEqual([45]);
    const quiet = guardWith({ expiryWarnings: [] });
    await quiet.guard.start();
    expect(quiet.fired).toEqual([]);
  });

  it('says nothing for a license without expires_at, nor for a locked one', async () => {
    emulator.setPanel(API_KEY, { panel: { expires_at: null } });
    const { guard, fired } = guardWith();
    await guard.start();
    expect(guard.state).toBe('active');
    emulator.setPanel(API_KEY, { active: false, panel: { expires_at: inDays(2) } });
    expect(await guard.refresh()).toBe('locked');
    expect(fired).toEqual([]);
  });

  it('warns once of an expires_at in the past on a license the mother still answers active for, and keeps serving', async () => {
    emulator.setPanel(API_KEY, { panel: { expires_at: inDays(-3) } });
    const { guard, fired } = guardWith();
    expect(await guard.start()).toBe('active');
    await guard.refresh();
    expect(fired).toHaveLength(1);
    expect(fired[0]).toMatchObject({ threshold: 1, daysLeft: 0, expiresAt: inDays(-3) });
    expect(fired[0]?.expiresInSeconds).toBeLessThan(-86_400);
    // Nothing is left of it if the mother stops answering: the first failed check locks.
    emulator.setFaults({ down: true });
    expect(await guard.refresh()).toBe('locked');
  });

  it("counts the days on the mother's clock, not on this host's", async () => {
    // The mother's clock runs 12 hours ahead (the client measures it from server_time).
    const offsetMs = 12 * 3600_000;
    emulator.setFaults({ clockOffsetSeconds: offsetMs / 1000 });
    const expiresAt = inDays(7, Date.now() + offsetMs);
    emulator.setPanel(API_KEY, { panel: { expires_at: expiresAt } });
    const { guard, fired } = guardWith();
    await guard.start();
    expect(Math.abs(guard.status().clockOffsetMs - offsetMs)).toBeLessThan(5000);
    const motherNow = Date.now() + offsetMs;
    expect(fired).toHaveLength(1);
    expect(fired[0]?.daysLeft).toBe(daysLeft(expiresAt, motherNow));
    // Within a few seconds of the mother's count, and 12 hours short of this host's.
    expect(Math.abs((fired[0]?.expiresInSeconds ?? 0) - secondsTo(expiresAt, motherNow))).toBeLessThan(10);
    expect(secondsTo(expiresAt, Date.now()) - (fired[0]?.expiresInSeconds ?? 0)).toBeGreaterThan(12 * 3600 - 10);
  });

  it('fires a threshold crossed during an outage from the verdict held in grace', async () => {
    let shiftMs = 0;
    const { guard, fired } = guardWith({ expiryWarnings: [7], gracePeriodMs: 30 * DAY_MS, now: () => Date.now() + shiftMs });
    expiresIn(10);
    await guard.start();
    emulator.setFaults({ down: true });
    expect(await guard.refresh()).toBe('grace');
    expect(fired).toEqual([]);
    // Four days on, still no answer: 6 days left by the verdict held.
    shiftMs = 4 * DAY_MS;
    expect(await guard.refresh()).toBe('grace');
    expect(fired).toMatchObject([{ threshold: 7, daysLeft: 6, expiresAt: inDays(10) }]);
  });

  it('fires each threshold once across a restart with a state file', async () => {
    const stateFile = join(folder, 'restart.json');
    expiresIn(6);
    const first = guardWith({ stateFile });
    await first.guard.start();
    expect(first.fired.map((event) => event.threshold)).toEqual([7]);
    await first.guard.close();
    const second = guardWith({ stateFile });
    await second.guard.start();
    await second.guard.refresh();
    expect(second.fired).toEqual([]);
    expiresIn(2);
    await second.guard.refresh();
    await second.guard.close();
    const third = guardWith({ stateFile });
    await third.guard.start();
    expect([...second.fired, ...third.fired].map((event) => event.threshold)).toEqual([3]);
  });
});

describe("licenseGuard({ panels }): the 'expiring' event", () => {
  it('names the panel, and fires nothing again for a panel evicted and back', async () => {
    const { guard, fired } = guardWith({
      baseUrl: emulator.url,
      panels: {
        max: 2,
        resolve: (host) => ({ 'a.example': { apiKey: API_KEY, apiSecret: DEMO_PANEL.apiSecret }, 'b.example': OTHER, 'c.example': THIRD })[host] ?? null,
      },
    });
    const app = express().use(guard);
    app.get('/', (_req, res) => {
      res.json(res.locals.license);
    });
    expiresIn(5);
    expect((await request(app).get('/').set('Host', 'a.example').expect(200)).body).toMatchObject({ expiryWarning: 7, daysLeft: 5 });
    expect(fired).toEqual([expect.objectContaining({ threshold: 7, panel: guard.status('a.example')?.panel, hosts: ['a.example'] })]);
    // b and c take the two places: a is evicted, and comes back from what it left.
    await request(app).get('/').set('Host', 'b.example').expect(200);
    await request(app).get('/').set('Host', 'c.example').expect(200);
    await request(app).get('/').set('Host', 'a.example').expect(200);
    await guard.refresh('a.example');
    expect(fired).toHaveLength(1);
  });
});

describe('res.locals.license.expiryWarning and panel_license_expires_in_seconds', () => {
  it('tell a banner and an alert how close expires_at is, over HTTP', async () => {
    const { guard } = guardWith();
    const registry = new Registry();
    registerMetrics({ registry, guard });
    const app = express();
    app.use(guard);
    app.get('/', (_req, res) => {
      const { expiryWarning, daysLeft: left } = res.locals.license;
      res.json({ expiryWarning, daysLeft: left });
    });
    await guard.start();
    expect((await request(app).get('/').expect(200)).body).toEqual({ expiryWarning: null, daysLeft: 60 });
    const far = await registry.getSingleMetricAsString('panel_license_expires_in_seconds');
    expect(Number(/panel_license_expires_in_seconds (-?[\d.e+]+)/.exec(far)?.[1])).toBeGreaterThan(60 * 86_400);

    expiresIn(4);
    await guard.refresh();
    expect((await request(app).get('/').expect(200)).body).toEqual({ expiryWarning: 7, daysLeft: 4 });
    const near = await registry.getSingleMetricAsString('panel_license_expires_in_seconds');
    const seconds = Number(/panel_license_expires_in_seconds (-?[\d.e+]+)/.exec(near)?.[1]);
    expect(Math.abs(seconds - secondsTo(inDays(4), Date.now()))).toBeLessThan(10);

    emulator.setPanel(API_KEY, { panel: { expires_at: null } });
    await guard.refresh();
    expect((await request(app).get('/').expect(200)).body).toEqual({ expiryWarning: null, daysLeft: null });
    expect(await registry.getSingleMetricAsString('panel_license_expires_in_seconds')).toMatch(/panel_license_expires_in_seconds Nan/i);
  });
});

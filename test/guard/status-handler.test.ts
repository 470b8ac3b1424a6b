import express from 'express';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../../src/emulator/emulator.js';
import { type LicenseGuard, licenseGuard } from '../../src/index.js';
import { createReleaseOutbox } from '../../src/outbox/outbox.js';
import { silentLogger } from '../support/guard-app.js';
import { API_KEY, API_SECRET, clientFor, startEmulator } from '../support/helpers.js';

let emulator: MotherEmulator;
beforeAll(async () => {
  emulator = await startEmulator([
    { apiKey: API_KEY, apiSecret: API_SECRET, active: true, panel: { name: 'Rhythm Hub' } },
    { apiKey: 'pk_other', apiSecret: 'sk_other_0123456789', active: false, reason: 'Unpaid invoice', panel: { name: 'Other' } },
  ]);
});
afterAll(() => emulator.close());
const closing: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  await Promise.all(closing.splice(0).map((item) => item.close()));
  emulator.setFaults({});
  emulator.setPanel(API_KEY, { active: true, reason: null });
  emulator.reset();
});

function appFor(guard: LicenseGuard, options?: Parameters<LicenseGuard['statusHandler']>[0]) {
  closing.push(guard);
  const app = express();
  // As the README shows: on the allow list, so it answers while locked.
  app.get('/status', guard.statusHandler(options));
  app.use(guard);
  return app;
}
const single = () =>
  licenseGuard({
    client: clientFor(emulator, { timeoutMs: 1000 }),
    logger: silentLogger,
    gracePeriodMs: 3600_000,
    retryBaseMs: 3600_000,
    retryMaxMs: 3600_000,
  });

describe('guard.statusHandler()', () => {
  it('answers 200 while active or in grace, 503 while pending or locked', async () => {
    const guard = single();
    const app = appFor(guard);
    expect((await request(app).get('/status').expect(503)).body).toMatchObject({ serving: false, state: 'pending' });
    await guard.start();
    const active = await request(app).get('/status').expect(200);
    expect(active.body).toMatchObject({ serving: true, state: 'active', consecutiveFailures: 0, lastError: null, store: 'none' });
    expect(active.headers['cache-control']).toBe('no-store');
    emulator.setFaults({ down: true });
    await guard.refresh();
    expect((await request(app).get('/status').expect(200)).body).toMatchObject({ serving: true, state: 'grace', lastError: 'HTTP_STATUS' });
    emulator.setFaults({});
    emulator.setPanel(API_KEY, { active: false, reason: 'Card declined for invoice 42' });
    await guard.refresh();
    const locked = await request(app).get('/status').expect(503);
    expect(locked.body).toMatchObject({ serving: false, state: 'locked' });
    await request(app).head('/status').expect(503);
    // Nothing an outsider should see: no reason, key, secret or signature.
    expect(locked.text).not.toMatch(/Card declined|pk_test|sk_test|signature/i);
    expect(Object.keys(locked.body)).not.toContain('reason');
  });

  it('shows the reason only when asked, and the outbox stats when given', async () => {
    const guard = single();
    const outbox = createReleaseOutbox({ client: clientFor(emulator), file: ':memory:', logger: silentLogger, autoStart: false });
    closing.push(outbox);
    await outbox.enqueue({ title: 'Waiting', remote_track_id: 'trk-1' });
    emulator.setPanel(API_KEY, { active: false, reason: 'Unpaid' });
    const app = appFor(guard, { reason: true, outbox });
    await guard.start();
    const body = (await request(app).get('/status').expect(503)).body;
    expect(body).toMatchObject({ state: 'locked', reason: 'Unpaid', outbox: { pending: 1, delivered: 0, dead: 0, inFlight: 0, pausedUntil: null } });
    expect(body.outbox.oldestPendingAt).toBeGreaterThan(0);
    await outbox.close();
    expect((await request(app).get('/status').expect(503)).body.outbox).toEqual({ error: 'unavailable' });
  });

  it('answers per host in panels mode, and 404 for an unknown host', async () => {
    const panels = { 'a.example': { apiKey: API_KEY, apiSecret: API_SECRET }, 'b.example': { apiKey: 'pk_other', apiSecret: 'sk_other_0123456789' } };
    const guard = licenseGuard({ baseUrl: emulator.url, panels: { resolve: (host) => panels[host as keyof typeof panels] ?? null }, logger: silentLogger });
    const app = appFor(guard);
    await request(app).get('/').set('Host', 'a.example');
    await request(app).get('/').set('Host', 'b.example');
    const a = await request(app).get('/status').set('Host', 'A.example:8080').expect(200);
    expect(a.body).toMatchObject({ state: 'active', panel: expect.stringMatching(/^[0-9a-f]{32}$/) });
    const b = await request(app).get('/status').set('Host', 'b.example').expect(503);
    expect(b.text).not.toMatch(/Unpaid|pk_other|sk_other/);
    expect((await request(app).get('/status').set('Host', 'c.example').expect(404)).body).toMatchObject({ error: 'UNKNOWN_HOST' });
  });

  it('refuses unknown options with the fix', () => {
    const guard = single();
    closing.push(guard);
    expect(() => guard.statusHandler({ reasons: true } as never)).toThrow(/reasons/);
    expect(() => guard.statusHandler({ outbox: {} as never })).toThrow(/`outbox` is not an outbox/);
  });
});

describe('guard.healthHandler()', () => {
  it('answers for the instance: 200 while the guard runs, locked or not, 503 once closed; options checked', async () => {
    const guard = single();
    closing.push(guard);
    const outbox = createReleaseOutbox({ client: clientFor(emulator), file: ':memory:', logger: silentLogger, autoStart: false });
    closing.push(outbox);
    const app = express();
    app.get('/healthz', guard.healthHandler({ outbox }));
    emulator.setPanel(API_KEY, { active: false, reason: 'Unpaid' });
    await guard.start();
    const locked = await request(app).get('/healthz').expect(200);
    expect(locked.body).toMatchObject({ ok: true, panels: { total: 1, locked: 1, active: 0 }, store: 'none', outbox: { pending: 0 } });
    expect(locked.text).not.toMatch(/Unpaid/);
    await guard.close();
    expect((await request(app).get('/healthz').expect(503)).body).toMatchObject({ ok: false });
    expect(() => guard.healthHandler({ outbox: {} as never })).toThrow(/`outbox` is not an outbox/);
    expect(() => guard.healthHandler({ reason: true } as never)).toThrow(/reason/);
    expect(guard.hostsOf('anything')).toEqual([]);
  });
});

// Expiry warnings in cluster mode, on every license store: two instances of a panel (and two of a
// `panels` deployment) fire each threshold once between them, also when both check at once, and
// an instance started later (a restart) fires nothing already fired.
import express from 'express';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../../../src/emulator/emulator.js';
import { type ExpiringEvent, type LicenseGuard, type LicenseGuardOptions, licenseGuard } from '../../../src/index.js';
import type { LicenseStore } from '../../../src/license-store/license-store.js';
import { silentLogger } from '../../support/guard-app.js';
import { API_KEY, clientFor, DEMO_PANEL, sleep, startEmulator, waitFor } from '../../support/helpers.js';
import { STORE_BACKENDS } from '../../support/license-stores.js';

const DAY_MS = 86_400_000;
const inDays = (days: number) => new Date(Date.now() + days * DAY_MS).toISOString().slice(0, 10);
const TENANT = { apiKey: 'pk_expiry_tenant', apiSecret: 'sk_expiry_tenant_0123456789' };

// Every store this machine runs (CI requires them all: serviceAvailable throws there when one is missing).
const backends = (
  await Promise.all(
    Object.values(STORE_BACKENDS).map(async (make) => {
      const backend = make();
      return { backend, name: backend.name, available: await backend.available() };
    }),
  )
).filter(({ available }) => available);

let emulator: MotherEmulator;
const guards: LicenseGuard[] = [];
const fired: ExpiringEvent[] = [];
beforeAll(async () => {
  emulator = await startEmulator([
    { ...DEMO_PANEL, panel: { ...DEMO_PANEL.panel, expires_at: inDays(60) } },
    { ...TENANT, active: true, panel: { name: 'Tenant', expires_at: inDays(60) } },
  ]);
});
afterAll(async () => {
  for (const { backend } of backends) await backend.cleanup();
  await emulator.close();
});
afterEach(async () => {
  await Promise.all(guards.splice(0).map((guard) => guard.close()));
  fired.length = 0;
  for (const apiKey of [API_KEY, TENANT.apiKey]) emulator.setPanel(apiKey, { active: true, reason: null, panel: { expires_at: inDays(60) } });
});

function watched(guard: LicenseGuard): LicenseGuard {
  guard.on('expiring', (event) => fired.push(event));
  guard.on('error', () => {});
  guards.push(guard);
  return guard;
}

/** Waits until the warnings said number `count`, then a little more: a second one would have come by then. */
async function settled(count: number): Promise<ExpiringEvent[]> {
  await waitFor(() => fired.length >= count, `${count} 'expiring' events`);
  await sleep(300);
  return [...fired];
}

describe.each(backends)('expiry warnings with a store on $name', ({ backend }) => {
  const common = { jitterMs: 0, retryBaseMs: 3600_000, retryMaxMs: 3600_000, logger: silentLogger };
  const options = (store: LicenseStore): LicenseGuardOptions => ({ ...common, client: clientFor(emulator), store, syncIntervalMs: 500 });

  it('fires each threshold once between two instances, also when both check at once, and not again after a restart', async () => {
    const namespace = backend.namespace();
    emulator.setPanel(API_KEY, { panel: { expires_at: inDays(5) } });
    const [a, b] = [watched(licenseGuard(options(await backend.open(namespace)))), watched(licenseGuard(options(await backend.open(namespace))))];
    await Promise.all([a?.start(), b?.start()]);
    // Both check now, at the same moment: the store's lease picks the one that says it.
    await Promise.all([a?.refresh(), b?.refresh()]);
    expect((await settled(1)).map((event) => event.threshold)).toEqual([7]);

    emulator.setPanel(API_KEY, { panel: { expires_at: inDays(2) } });
    await Promise.all([a?.refresh(), b?.refresh()]);
    await Promise.all([a?.refresh(), b?.refresh()]);
    expect((await settled(2)).map((event) => event.threshold)).toEqual([7, 3]);

    // A restart: the new instance reads what fired from the shared record, and checks itself.
    await a?.close();
    const c = watched(licenseGuard(options(await backend.open(namespace))));
    await c.start();
    await c.refresh();
    await sleep(300);
    expect(fired.map((event) => event.threshold)).toEqual([7, 3]);
  });

  it('fires each threshold once per panel between two instances of a `panels` deployment', async () => {
    const namespace = backend.namespace();
    const apps = await Promise.all(
      [1, 2].map(async () => {
        const guard = watched(
          licenseGuard({
            ...common,
            store: await backend.open(namespace),
            baseUrl: emulator.url,
            panels: { resolve: (host) => (host === 'tenant.example' ? TENANT : null) },
          }),
        );
        const app = express().use(guard);
        app.get('/', (_req, res) => {
          res.json(res.locals.license);
        });
        return { guard, app };
      }),
    );
    const license = async (app: express.Express) => (await request(app).get('/').set('Host', 'tenant.example').expect(200)).body;
    for (const { app } of apps) expect(await license(app)).toMatchObject({ expiryWarning: null, daysLeft: 60 });
    // Both instances check the panel at the same moment: the store's lease picks the one that says it.
    emulator.setPanel(TENANT.apiKey, { panel: { expires_at: inDays(1) } });
    await Promise.all(apps.map(({ guard }) => guard.refresh('tenant.example')));
    for (const { app } of apps) expect(await license(app)).toMatchObject({ expiryWarning: 1, daysLeft: 1 });
    const events = await settled(1);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ threshold: 1, daysLeft: 1, panel: apps[0]?.guard.status('tenant.example').panel, hosts: ['tenant.example'] });
  });
});

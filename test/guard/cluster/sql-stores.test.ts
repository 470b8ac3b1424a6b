// Cluster mode on the license stores that need no Redis, with the guarantees and tests of Redis:
// one check per schedule slot among four instances, a lock reaching every instance within a
// second, and a store outage that never locks anything.
import express from 'express';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadSqliteDriver } from '../../../src/db/sqlite-driver.js';
import type { MotherEmulator } from '../../../src/emulator/emulator.js';
import { createMotherClient, type LicenseGuard, type LicenseGuardOptions, licenseGuard } from '../../../src/index.js';
import { cuttableProxy } from '../../support/cuttable-proxy.js';
import { API_KEY, clientFor, DEMO_PANEL, longestBlock, sleep, startEmulator, waitFor } from '../../support/helpers.js';
import { STORE_BACKENDS, type StoreBackend } from '../../support/license-stores.js';

const EVERY_SECOND = '* * * * * *';
const backends = await Promise.all(
  Object.entries(STORE_BACKENDS)
    .filter(([name]) => name !== 'redis')
    .map(async ([, make]) => {
      const backend = make();
      return { backend, name: backend.name, available: await backend.available() };
    }),
);

let emulator: MotherEmulator;
const TENANTS = Array.from({ length: 200 }, (_, i) => i + 1).map((n) => ({
  ...DEMO_PANEL,
  apiKey: `pk_tenant_${n}`,
  apiSecret: `sk_tenant_${n}_0123456789`,
  panel: { name: `Tenant ${n}` },
}));
const guards: LicenseGuard[] = [];
const errors: unknown[] = [];
beforeAll(async () => {
  emulator = await startEmulator([DEMO_PANEL, ...TENANTS]);
});
afterAll(async () => {
  for (const { backend, available } of backends) if (available) await backend.cleanup();
  await emulator.close();
});
afterEach(async () => {
  await Promise.all(guards.splice(0).map((guard) => guard.close()));
  errors.length = 0;
  emulator.setFaults({});
  emulator.setPanel(API_KEY, { active: true, reason: null });
  emulator.reset();
});
const licenseCalls = () => emulator.requests.filter((request) => request.endpoint === 'license.php').length;

async function instance(backend: StoreBackend, namespace: string, options: Partial<LicenseGuardOptions> = {}, via?: string): Promise<LicenseGuard> {
  const store = await backend.open(namespace, via);
  const guard = licenseGuard({ client: clientFor(emulator), store, schedule: EVERY_SECOND, jitterMs: 0, syncIntervalMs: 500, ...options });
  guard.on('error', (error) => errors.push(error));
  guards.push(guard);
  return guard;
}

describe.each(backends)('licenseGuard({ store }) on $name', ({ backend, available }) => {
  it.skipIf(!available)(
    'runs one license check per schedule slot for four instances',
    async () => {
      const namespace = backend.namespace();
      const four = await Promise.all([1, 2, 3, 4].map(() => instance(backend, namespace)));
      await Promise.all(four.map((guard) => guard.start()));
      expect(four.map((guard) => guard.state)).toEqual(['active', 'active', 'active', 'active']);
      const before = licenseCalls();
      const started = Date.now();
      await sleep(5200);
      const slots = Math.floor((Date.now() - started) / 1000);
      const calls = licenseCalls() - before;
      expect(calls).toBeGreaterThanOrEqual(slots - 1);
      expect(calls).toBeLessThanOrEqual(slots + 1);
      expect(four.filter((guard) => guard.status().lastCheckBy === 'peer').length).toBeGreaterThan(0);
    },
    20_000,
  );

  it.skipIf(!available)(
    'locks and unlocks every instance within a second of one refresh, five times over',
    async () => {
      const namespace = backend.namespace();
      const four = await Promise.all([1, 2, 3, 4].map(() => instance(backend, namespace, { schedule: '0 0 1 1 *', syncIntervalMs: 60_000 })));
      await Promise.all(four.map((guard) => guard.start()));
      for (let round = 0; round < 5; round++) {
        const active = round % 2 === 1;
        emulator.setPanel(API_KEY, { active, reason: active ? null : `Unpaid ${round}` });
        const flipped = Date.now();
        expect(await four[round % 4]?.refresh()).toBe(active ? 'active' : 'locked');
        const want = active ? 'active' : 'locked';
        await waitFor(() => four.every((guard) => guard.state === want), `all four ${want}`, 1000);
        expect(Date.now() - flipped).toBeLessThan(1000);
      }
      expect(four.map((guard) => guard.status().store)).toEqual(['ok', 'ok', 'ok', 'ok']);
    },
    30_000,
  );

  // A SQLite file has no server to cut: its outage (a writer holding the file) is tested below.
  if (backend.name !== 'SQLite')
    it.skipIf(!available)(
      'never locks while the store is unreachable; each instance checks on its own and follows a real lock; then reconverges',
      async () => {
        const { host, port } = backend.server();
        const proxy = await cuttableProxy(host, port);
        try {
          const namespace = backend.namespace();
          const three = await Promise.all([1, 2, 3].map(() => instance(backend, namespace, { syncIntervalMs: 200 }, proxy.address)));
          await Promise.all(three.map((guard) => guard.start()));
          proxy.cut();
          await waitFor(() => three.every((guard) => guard.status().store === 'unavailable'), 'the store seen as unavailable', 8000);
          expect(three.map((guard) => guard.state)).toEqual(['active', 'active', 'active']);
          expect(errors.some((error) => (error as { code?: string }).code === 'STORE_UNAVAILABLE')).toBe(true);
          emulator.setPanel(API_KEY, { active: false, reason: 'Suspended' });
          await waitFor(() => three.every((guard) => guard.state === 'locked'), 'each instance locked by its own check', 5000);
          emulator.setPanel(API_KEY, { active: true, reason: null });
          await waitFor(() => three.every((guard) => guard.state === 'active'), 'each instance unlocked by its own check', 5000);
          proxy.heal();
          await waitFor(() => three.every((guard) => guard.status().store === 'ok'), 'the store back', 10_000);
          emulator.setPanel(API_KEY, { active: false, reason: 'Suspended' });
          await waitFor(() => three.every((guard) => guard.state === 'locked'), 'one verdict again', 4000);
        } finally {
          await Promise.all(guards.splice(0).map((guard) => guard.close()));
          await proxy.close();
        }
      },
      60_000,
    );

  it.skipIf(!available)(
    'serves every panel of a `panels` deployment restarted during a mother outage from the verdicts it kept',
    async () => {
      const namespace = backend.namespace();
      const resolve = async (host: string) => {
        const tenant = TENANTS[Number(/^t(\d+)\./.exec(host)?.[1]) - 1];
        return tenant ? { apiKey: tenant.apiKey, apiSecret: tenant.apiSecret } : null;
      };
      const deployment = async () => {
        const guard = licenseGuard({ baseUrl: emulator.url, store: await backend.open(namespace), panels: { resolve } });
        guards.push(guard);
        return {
          guard,
          app: express()
            .use(guard)
            .get('/', (_req, res) => res.send(res.locals.branding.name)),
        };
      };
      const before = await deployment();
      for (const n of [1, 2, 3]) await request(before.app).get('/').set('Host', `t${n}.example`).expect(200, `Tenant ${n}`);
      await before.guard.close();
      emulator.setFaults({ down: true });
      const restartedAt = licenseCalls();
      const after = await deployment();
      const answers = await Promise.all([1, 2, 3].map((n) => request(after.app).get('/').set('Host', `t${n}.example`)));
      expect(answers.map((answer) => [answer.status, answer.text])).toEqual([1, 2, 3].map((n) => [200, `Tenant ${n}`]));
      expect(licenseCalls()).toBe(restartedAt);
      // The kept verdicts are fresh: served as they are, with no call to the mother for them.
      const calls = licenseCalls();
      await sleep(500);
      expect(licenseCalls()).toBe(calls);
      expect(after.guard.status('t2.example')).toMatchObject({ state: 'active', lastCheckBy: 'peer' });
    },
    30_000,
  );

  // A SQLite file has no server to cut: its outage (a writer holding the file) is tested below.
  if (backend.name !== 'SQLite')
    it.skipIf(!available)(
      'makes a lock one instance saw while the store was unreachable the shared verdict as soon as the store answers again',
      async () => {
        const { host, port } = backend.server();
        const proxy = await cuttableProxy(host, port);
        try {
          const namespace = backend.namespace();
          // No scheduled checks and a slow periodic read: only the kept verdict can bring the lock.
          const three = await Promise.all([1, 2, 3].map(() => instance(backend, namespace, { schedule: '0 0 1 1 *', syncIntervalMs: 60_000 }, proxy.address)));
          await Promise.all(three.map((guard) => guard.start()));
          proxy.cut();
          emulator.setPanel(API_KEY, { active: false, reason: 'Suspended' });
          expect(await three[0]?.refresh()).toBe('locked');
          await sleep(300);
          expect(three.map((guard) => guard.state)).toEqual(['locked', 'active', 'active']);
          proxy.heal();
          const healed = Date.now();
          await waitFor(() => three.every((guard) => guard.state === 'locked'), 'every instance locked by the kept verdict', 8000);
          // The kept verdict is offered once a second; the others' listening connections come back within their backoff.
          expect(Date.now() - healed).toBeLessThan(5000);
          expect(three[2]?.status()).toMatchObject({ state: 'locked', reason: 'Suspended', lastCheckBy: 'peer' });
        } finally {
          await Promise.all(guards.splice(0).map((guard) => guard.close()));
          await proxy.close();
        }
      },
      30_000,
    );

  it.skipIf(!available)(
    'serves all 200 hosts of a restarted `panels` deployment at once, though its bound on new hosts allows 5',
    async () => {
      const namespace = backend.namespace();
      const resolve = async (host: string) => {
        const tenant = TENANTS[Number(/^t(\d+)\./.exec(host)?.[1]) - 1];
        return tenant ? { apiKey: tenant.apiKey, apiSecret: tenant.apiSecret } : null;
      };
      const deployment = async (bounds: object) => {
        const guard = licenseGuard({ baseUrl: emulator.url, store: await backend.open(namespace), panels: { resolve, ...bounds } });
        guards.push(guard);
        return {
          guard,
          app: express()
            .use(guard)
            .get('/', (_req, res) => res.send(res.locals.branding.name)),
        };
      };
      const hosts = TENANTS.map((_, i) => `t${i + 1}.example`);
      const before = await deployment({});
      for (const host of hosts) await request(before.app).get('/').set('Host', host).expect(200);
      await before.guard.close();
      emulator.setFaults({ down: true });
      // The bound a deployment keeps against random Host headers: 5 first calls, then one a second.
      const after = await deployment({ resolveBurst: 5, resolvePerSecond: 1, resolveConcurrency: 4 });
      await sleep(200); // the list of hosts served is read in the background at construction
      const answers = await Promise.all(hosts.map((host) => request(after.app).get('/').set('Host', host)));
      // None is refused by the bound on new hosts (195 would be without the list of hosts served).
      // On a loaded machine a host whose kept verdict is read too late answers "starting up" (1 of
      // 200 with a full test run beside it; docs/guarantees.md says so): a known limit, bounded here.
      const notServed = answers.filter((answer) => answer.status !== 200);
      for (const answer of notServed) expect(answer.text).toContain('This panel is starting up');
      expect(notServed.length, `${notServed.length} of 200 hosts not served at once`).toBeLessThanOrEqual(10);
      // A host never served is still a new host, under the bound.
      const strangers = await Promise.all(Array.from({ length: 20 }, (_, i) => request(after.app).get('/').set('Host', `stranger${i}.example`)));
      expect(strangers.some((answer) => answer.status === 503)).toBe(true);
    },
    60_000,
  );

  it.skipIf(!available)(
    'refuses and reports a forged verdict, one copied from another panel and an oversized one, and keeps checking',
    async () => {
      const namespace = backend.namespace();
      const guard = await instance(backend, namespace, { schedule: '0 0 1 1 *', syncIntervalMs: 100 });
      const tenant = TENANTS[0] as (typeof TENANTS)[number];
      const other = licenseGuard({ baseUrl: emulator.url, apiKey: tenant.apiKey, apiSecret: tenant.apiSecret, store: await backend.open(namespace) });
      guards.push(other);
      await Promise.all([guard.start(), other.start()]);
      const attacker = await backend.open(namespace);
      const own = `${clientFor(emulator).panelId}:verdict`;
      const theirsKey = `${createMotherClient({ baseUrl: emulator.url, apiKey: tenant.apiKey, apiSecret: tenant.apiSecret }).panelId}:verdict`;
      // Its start-up check's record goes to the store just after start() resolves.
      const theirs = await waitFor(() => attacker.get(theirsKey, 1_000_000), "the other panel's record in the store", 5000);
      await attacker.publish(own, 'forged', 60_000);
      await sleep(400);
      await attacker.publish(own, theirs as string, 60_000);
      await sleep(400);
      await attacker.publish(own, 'x'.repeat(2_000_000), 60_000);
      await sleep(400);
      expect(guard.state).toBe('active');
      expect(errors.filter((error) => (error as { code?: string }).code === 'SHARED_VERDICT_REJECTED').length).toBeGreaterThanOrEqual(1);
      emulator.setPanel(API_KEY, { active: false, reason: 'Revoked' });
      expect(await guard.refresh()).toBe('locked');
    },
    30_000,
  );
});

describe('licenseGuard({ store: sqliteLicenseStore() }) while another process holds the write lock of its file', () => {
  it('never locks and never holds the event loop; each instance checks on its own; then shares again', async () => {
    const backend = STORE_BACKENDS.sqlite();
    try {
      const file = backend.namespace();
      const three = await Promise.all([1, 2, 3].map(() => instance(backend, file, { syncIntervalMs: 200 })));
      await Promise.all(three.map((guard) => guard.start()));
      // A writer that holds the lock (a hung process): no write of the store's can go in.
      const Database = loadSqliteDriver();
      const hung = new Database(file, { timeout: 0 });
      hung.exec('BEGIN IMMEDIATE');
      try {
        const { ms } = await longestBlock(async () => {
          await waitFor(() => three.every((guard) => guard.status().store === 'unavailable'), 'the store seen as unavailable', 8000);
          expect(three.map((guard) => guard.state)).toEqual(['active', 'active', 'active']);
          emulator.setPanel(API_KEY, { active: false, reason: 'Suspended' });
          await waitFor(() => three.every((guard) => guard.state === 'locked'), 'each instance locked by its own check', 5000);
        });
        // Busy calls are retried a few milliseconds apart, not waited for inside SQLite.
        expect(ms).toBeLessThan(200);
      } finally {
        hung.exec('ROLLBACK');
        hung.close();
      }
      emulator.setPanel(API_KEY, { active: true, reason: null });
      await waitFor(() => three.every((guard) => guard.state === 'active' && guard.status().store === 'ok'), 'unlocked, the store back', 8000);
    } finally {
      await Promise.all(guards.splice(0).map((guard) => guard.close()));
      await backend.cleanup();
    }
  }, 40_000);
});

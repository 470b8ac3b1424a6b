import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import express from 'express';
import { Redis as IORedis } from 'ioredis';
import { createClient, createCluster } from 'redis';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../../../src/emulator/emulator.js';
import { type LicenseGuard, type LicenseGuardOptions, licenseGuard } from '../../../src/index.js';
import type { LicenseStore } from '../../../src/license-store/license-store.js';
import { redisLicenseStore } from '../../../src/redis.js';
import { API_KEY, API_SECRET, clientFor, sleep, startEmulator, waitFor } from '../../support/helpers.js';
import { type Connected, REDIS_CLIENTS, type TestRedisClient } from '../../support/redis-clients.js';
import { freePort, OwnRedis, REDIS_URL, redisAnswers, serviceAvailable } from '../../support/services.js';

const haveRedis = serviceAvailable('Redis', REDIS_URL, await redisAnswers());
const EVERY_SECOND = '* * * * * *';

let emulator: MotherEmulator;
const clients: Connected[] = [];
const guards: LicenseGuard[] = [];
const errors: unknown[] = [];

/** The client the suite runs on now (each suite runs once per client). */
let redisClient = REDIS_CLIENTS[0] as TestRedisClient;

async function connect(url = REDIS_URL): Promise<Connected> {
  const connected = await redisClient.connect(url);
  clients.push(connected);
  return connected;
}

/** One instance of the panel: its own Redis connection, as a separate process would have. */
async function instance(
  prefix: string,
  options: Partial<LicenseGuardOptions> = {},
  url = REDIS_URL,
  wrap: (store: LicenseStore) => LicenseStore = (store) => store,
): Promise<LicenseGuard> {
  const store = wrap(redisLicenseStore({ client: (await connect(url)).client, prefix }));
  const guard = licenseGuard({ client: clientFor(emulator), store, schedule: EVERY_SECOND, jitterMs: 0, syncIntervalMs: 500, ...options });
  guard.on('error', (error) => errors.push(error));
  guards.push(guard);
  return guard;
}

/**
 * Watches an instance's start-up store calls: the time from its first call to the end of its
 * start-up lease (or of its first read, when that read already found a current verdict).
 */
function startupBudget() {
  let first: number | undefined;
  let firstRead: number | undefined;
  let lease: number | undefined;
  const wrap = (store: LicenseStore): LicenseStore => ({
    ...store,
    get: async (...args) => {
      first ??= performance.now();
      const value = await store.get(...args);
      firstRead ??= performance.now();
      return value;
    },
    acquire: async (...args) => {
      first ??= performance.now();
      const value = await store.acquire(...args);
      lease ??= performance.now();
      return value;
    },
    publish: (...args) => store.publish(...args),
    subscribe: (...args) => store.subscribe(...args),
  });
  return { wrap, spentMs: () => (lease ?? firstRead ?? Number.POSITIVE_INFINITY) - (first ?? 0) };
}

const licenseCalls = () => emulator.requests.filter((request) => request.endpoint === 'license.php').length;
const newPrefix = () => `test-cluster-${process.pid}-${randomBytes(4).toString('hex')}:`;

beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(() => emulator.close());
afterEach(async () => {
  await Promise.all(guards.splice(0).map((guard) => guard.close()));
  await Promise.all(clients.splice(0).map((connected) => connected.close()));
  errors.length = 0;
  emulator.setFaults({});
  emulator.setPanel(API_KEY, { active: true, reason: null });
  emulator.reset();
});

describe.skipIf(!haveRedis).each(REDIS_CLIENTS)('licenseGuard({ store: redisLicenseStore() }) on $name', (each) => {
  beforeAll(() => {
    redisClient = each;
  });
  describe('with four instances', () => {
    it('runs one license check per schedule slot for the whole cluster', async () => {
      const prefix = newPrefix();
      const four = await Promise.all([1, 2, 3, 4].map(() => instance(prefix)));
      await Promise.all(four.map((guard) => guard.start()));
      expect(four.map((guard) => guard.state)).toEqual(['active', 'active', 'active', 'active']);
      const before = licenseCalls();
      const started = Date.now();
      await sleep(5200);
      const slots = Math.floor((Date.now() - started) / 1000);
      const calls = licenseCalls() - before;
      // One per slot (±1 for the slots at either edge of the window); four instances alone would make 4 per slot.
      expect(calls).toBeGreaterThanOrEqual(slots - 1);
      expect(calls).toBeLessThanOrEqual(slots + 1);
      expect(four.filter((guard) => guard.status().lastCheckBy === 'peer').length).toBeGreaterThan(0);
    }, 20_000);

    it('locks every instance within a second when one refresh sees active: false', async () => {
      const prefix = newPrefix();
      const four = await Promise.all([1, 2, 3, 4].map(() => instance(prefix, { schedule: '0 0 1 1 *', syncIntervalMs: 60_000 })));
      await Promise.all(four.map((guard) => guard.start()));
      emulator.setPanel(API_KEY, { active: false, reason: 'Unpaid invoice' });
      const flipped = Date.now();
      expect(await four[2]?.refresh()).toBe('locked');
      await waitFor(() => four.every((guard) => guard.state === 'locked'), 'all four locked', 1000);
      expect(Date.now() - flipped).toBeLessThan(1000);
      expect(four[0]?.status()).toMatchObject({ state: 'locked', reason: 'Unpaid invoice', lastCheckBy: 'peer', store: 'ok' });
      emulator.setPanel(API_KEY, { active: true, reason: null });
      expect(await four[1]?.refresh()).toBe('active');
      await waitFor(() => four.every((guard) => guard.state === 'active'), 'all four unlocked', 1000);
    });

    it('has one retry stream while the mother fails, and grace from the cluster’s last success', async () => {
      const prefix = newPrefix();
      const four = await Promise.all([1, 2, 3, 4].map(() => instance(prefix, { retryBaseMs: 300, retryMaxMs: 300 })));
      await Promise.all(four.map((guard) => guard.start()));
      emulator.setFaults({ down: true });
      await waitFor(() => four.every((guard) => guard.state === 'grace'), 'all four in grace', 3000);
      const lastSuccessAt = four[0]?.status().lastSuccessAt;
      const before = licenseCalls();
      await sleep(3000);
      // One slot per second plus one retry stream every 300 ms: about 3 + 10, far below 4 × that.
      expect(licenseCalls() - before).toBeLessThanOrEqual(18);
      for (const guard of four) expect(guard.status()).toMatchObject({ state: 'grace', lastSuccessAt, lastError: 'HTTP_STATUS' });
    }, 20_000);
  });

  describe('at start-up', () => {
    it('makes one start-up call for four instances started together', async () => {
      const prefix = newPrefix();
      // The start-up lease is named by the minute: four start-ups straddling a minute take two.
      while (Date.now() % 60_000 > 55_000) await sleep(250);
      // A far schedule: only start-up calls count here (an every-second slot may fire meanwhile).
      const budgets = [1, 2, 3, 4].map(() => startupBudget());
      const four = await Promise.all(budgets.map(({ wrap }) => instance(prefix, { schedule: '0 0 1 1 *' }, REDIS_URL, wrap)));
      await Promise.all(four.map((guard) => guard.start()));
      expect(four.map((guard) => guard.state)).toEqual(['active', 'active', 'active', 'active']);
      // By design an instance whose store calls overran their 250 ms start-up budget (a machine
      // too busy to answer) checks on its own rather than wait: only those may add a call.
      const slow = budgets.filter(({ spentMs }) => spentMs() >= 200).length;
      expect(licenseCalls()).toBeGreaterThanOrEqual(1);
      expect(licenseCalls()).toBeLessThanOrEqual(1 + slow);
    });

    it('adopts a current verdict without calling the mother', async () => {
      const prefix = newPrefix();
      await (await instance(prefix, { schedule: '0 0 1 1 *' })).start();
      const calls = licenseCalls();
      const late = await instance(prefix, { schedule: '0 0 1 1 *' });
      expect(await late.start()).toBe('active');
      expect(licenseCalls()).toBe(calls);
    });

    it('restores the cluster’s verdict during a mother outage: active → grace, locked stays locked', async () => {
      const prefix = newPrefix();
      const first = await instance(prefix, { schedule: '0 0 1 1 *' });
      await first.start();
      emulator.setFaults({ down: true });
      expect(await first.refresh()).toBe('grace');
      const restarted = await instance(prefix, { schedule: '0 0 1 1 *' });
      expect(await restarted.start()).toBe('grace');
      // Grace runs from the cluster's last success, not from this instance's start.
      expect(Math.abs((restarted.status().graceEndsAt ?? 0) - (first.status().graceEndsAt ?? 0))).toBeLessThan(100);

      emulator.setFaults({});
      emulator.setPanel(API_KEY, { active: false, reason: 'Suspended' });
      expect(await first.refresh()).toBe('locked');
      emulator.setFaults({ down: true });
      const again = await instance(prefix, { schedule: '0 0 1 1 *' });
      expect(await again.start()).toBe('locked');
      expect(again.status().reason).toBe('Suspended');
    });
  });

  describe('with a forged verdict in Redis', () => {
    it('stays locked and reports it through error', async () => {
      const prefix = newPrefix();
      const a = await instance(prefix, { schedule: '0 0 1 1 *', syncIntervalMs: 100 });
      const b = await instance(prefix, { schedule: '0 0 1 1 *', syncIntervalMs: 100 });
      emulator.setPanel(API_KEY, { active: false, reason: 'Unpaid' });
      await a.start();
      await b.start();
      expect([a.state, b.state]).toEqual(['locked', 'locked']);
      const key = `${prefix}${clientFor(emulator).panelId}:verdict`;
      const raw = await clients[0]?.command(['GET', key]);
      const record = JSON.parse(raw as string) as Record<string, unknown>;
      const active = { ...(record.verdict as object), active: true, reason: null };
      const forgeries = [
        { ...record, verdict: active, checkedAt: Date.now(), lastSuccessAt: Date.now() },
        { ...record, verdict: active, checkedAt: Date.now(), lastSuccessAt: Date.now(), mac: undefined },
        { ...record, verdict: active, checkedAt: Date.now(), lastSuccessAt: Date.now(), mac: 'f'.repeat(64) },
      ];
      for (const forged of forgeries) {
        const text = JSON.stringify(forged);
        await clients[0]?.command(['SET', key, text]);
        await clients[0]?.command(['PUBLISH', key, text]);
        await sleep(300);
        expect([a.state, b.state]).toEqual(['locked', 'locked']);
      }
      const rejected = errors.filter((error) => (error as { code?: string }).code === 'SHARED_VERDICT_REJECTED');
      // Each instance reports a refused value, and at most one a minute: a flood does not flood the log.
      expect(rejected.length).toBe(2);
      expect(String((rejected[0] as Error).message)).toMatch(/does not verify|carries no MAC/);
    });
  });

  describe('when published changes are lost', () => {
    it('converges through the periodic read', async () => {
      const prefix = newPrefix();
      const a = await instance(prefix, { schedule: '0 0 1 1 *' });
      const deaf = redisLicenseStore({ client: (await connect()).client, prefix });
      const noSubscription: LicenseStore = { ...deaf, subscribe: () => ({ ready: Promise.resolve(), close: async () => {} }) };
      const b = licenseGuard({ client: clientFor(emulator), store: noSubscription, schedule: '0 0 1 1 *', syncIntervalMs: 200 });
      guards.push(b);
      await a.start();
      await b.start();
      emulator.setPanel(API_KEY, { active: false, reason: 'Suspended' });
      await a.refresh();
      await waitFor(() => b.state === 'locked', 'the deaf instance locked', 2000);
    });
  });

  describe('when Redis is unreachable', () => {
    let redis: OwnRedis;
    beforeAll(async () => {
      redis = await OwnRedis.create();
    });
    afterAll(() => redis.stop());

    it('never locks; each instance checks on its own and follows a real lock; then reconverges', async () => {
      const prefix = newPrefix();
      const three = await Promise.all([1, 2, 3].map(() => instance(prefix, { syncIntervalMs: 200 }, redis.url)));
      await Promise.all(three.map((guard) => guard.start()));
      await redis.stop();
      await waitFor(() => three.every((guard) => guard.status().store === 'unavailable'), 'the store seen as unavailable', 5000);
      expect(three.map((guard) => guard.state)).toEqual(['active', 'active', 'active']);
      const before = licenseCalls();
      await sleep(2100);
      // Each instance now checks every slot on its own.
      expect(licenseCalls() - before).toBeGreaterThanOrEqual(4);
      expect(three.map((guard) => guard.state)).toEqual(['active', 'active', 'active']);
      expect(errors.some((error) => (error as { code?: string }).code === 'STORE_UNAVAILABLE')).toBe(true);

      emulator.setPanel(API_KEY, { active: false, reason: 'Suspended' });
      await waitFor(() => three.every((guard) => guard.state === 'locked'), 'each instance locked by its own check', 4000);
      emulator.setPanel(API_KEY, { active: true, reason: null });
      await waitFor(() => three.every((guard) => guard.state === 'active'), 'each instance unlocked by its own check', 4000);

      await redis.start();
      await waitFor(() => three.every((guard) => guard.status().store === 'ok'), 'the store back', 8000);
      await sleep(1100);
      const after = licenseCalls();
      const started = Date.now();
      await sleep(3100);
      const slots = Math.floor((Date.now() - started) / 1000);
      expect(licenseCalls() - after).toBeLessThanOrEqual(slots + 1);
      emulator.setPanel(API_KEY, { active: false, reason: 'Suspended' });
      await waitFor(() => three.every((guard) => guard.state === 'locked'), 'one verdict again', 3000);
    }, 40_000);

    it("starts a new panel's first check at once when Redis is paused (connected, but answering nothing)", async () => {
      const store = redisLicenseStore({ client: (await connect(redis.url)).client, prefix: newPrefix() });
      // A mother taking 1 s, and requests that wait 2.6 s for a first verdict: 1 s for the store
      // read and 1 s for the start-up lease before the check would leave the request pending.
      const guard = licenseGuard({
        baseUrl: emulator.url,
        store,
        startupTimeoutMs: 2600,
        panels: { resolve: async (host) => (host === 'paused.example' ? { apiKey: API_KEY, apiSecret: API_SECRET } : null) },
        logger: { warn: () => {}, error: () => {} },
      });
      guards.push(guard);
      const app = express();
      app.use(guard);
      app.get('/', (_req, res) => {
        res.send(res.locals.branding.name);
      });
      emulator.setFaults({ delayMs: 1000 });
      redis.pause();
      try {
        expect((await request(app).get('/').set('Host', 'paused.example')).status).toBe(200);
      } finally {
        redis.resume();
      }
    });
  });
});

/** How a process connects each client without waiting for Redis, and lets go of it. */
const NEVER_ANSWERED = [
  {
    name: 'node-redis',
    connect: (port: number) => `
      import { createClient } from 'redis';
      const client = createClient({ url: 'redis://127.0.0.1:${port}', socket: { reconnectStrategy: () => 50 } });
      client.on('error', () => {});
      client.connect().catch(() => {});`,
    close: 'client.destroy();',
  },
  {
    name: 'ioredis',
    connect: (port: number) => `
      import { Redis } from 'ioredis';
      const client = new Redis(${port}, '127.0.0.1', { retryStrategy: () => 50 });`,
    close: 'client.disconnect();',
  },
];

describe.each(NEVER_ANSWERED)('a process in cluster mode whose Redis never answered ($name)', ({ connect: connectScript, close }) => {
  it('starts on its own check, and exits once the guard and its client are closed', async () => {
    const port = await freePort();
    const script = `${connectScript(port)}
      import { licenseGuard } from '../../../dist/index.js';
      import { redisLicenseStore } from '../../../dist/redis.js';
      const guard = licenseGuard({ baseUrl: process.env.MOTHER_URL, apiKey: process.env.KEY, apiSecret: process.env.SECRET, store: redisLicenseStore({ client }) });
      guard.on('error', (e) => console.log('error', e.code));
      console.log('state', await guard.start(), guard.status().store);
      await guard.close();
      ${close}
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      cwd: fileURLToPath(new URL('.', import.meta.url)),
      env: { ...process.env, MOTHER_URL: emulator.url, KEY: API_KEY, SECRET: API_SECRET },
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    const code = await new Promise<number | null>((resolve) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        resolve(-1);
      }, 10_000);
      child.on('exit', (exit) => {
        clearTimeout(timer);
        resolve(exit);
      });
    });
    expect(out).toContain('state active unavailable');
    expect(out).toContain('error STORE_UNAVAILABLE');
    expect(code, out).toBe(0);
  }, 20_000);
});

describe('licenseGuard() store options', () => {
  const base = { baseUrl: 'https://mother.example', apiKey: 'k', apiSecret: 's' };
  it('refuses stateFile together with store', () => {
    const store: LicenseStore = {
      kind: 'x',
      get: async () => null,
      publish: async () => {},
      subscribe: () => ({ ready: Promise.resolve(), close: async () => {} }),
      acquire: async () => null,
    };
    expect(() => licenseGuard({ ...base, store, stateFile: '/tmp/x.json' })).toThrow(/`stateFile` was given together with `store`/);
  });
  it('refuses a store that is not one, and syncIntervalMs without a store', () => {
    expect(() => licenseGuard({ ...base, store: {} as LicenseStore })).toThrow(/`store` is not a license store/);
    expect(() => licenseGuard({ ...base, syncIntervalMs: 1000 })).toThrow(/`syncIntervalMs` only applies in cluster mode/);
  });
  it('refuses a client it cannot use, naming the ones it can', () => {
    const accepted = /`client` is not a Redis client this store can use.*node-redis 5.*createCluster.*ioredis.*Redis\.Cluster/s;
    expect(() => redisLicenseStore({ client: {} as never })).toThrow(accepted);
    // Looks like a client (ioredis has both), is none of the supported ones: it would share nothing.
    const lookalike = { sendCommand: () => {}, duplicate: () => {}, on: () => {} };
    expect(() => redisLicenseStore({ client: lookalike as never })).toThrow(accepted);
    expect(() => redisLicenseStore({ client: lookalike as never, prefix: 'a b' })).toThrow(/`prefix`/);
  });

  it.each(REDIS_CLIENTS)('accepts a $name client and a $name cluster, unconnected yet', ({ name }) => {
    const clients =
      name === 'ioredis'
        ? [new IORedis({ lazyConnect: true }), new IORedis.Cluster([{ port: 1 }], { lazyConnect: true })]
        : [createClient(), createCluster({ rootNodes: [{ url: 'redis://127.0.0.1:1' }] })];
    for (const client of clients) expect(redisLicenseStore({ client }).kind).toBe('redis');
    // The store connects an ioredis client made with lazyConnect (tested below): stop trying.
    for (const client of clients) if (client instanceof IORedis || client instanceof IORedis.Cluster) client.disconnect();
  });

  it('refuses an ioredis client with keyPrefix (its SUBSCRIBE channels would not be prefixed)', () => {
    const prefixed = new IORedis({ lazyConnect: true, keyPrefix: 'app:' });
    expect(() => redisLicenseStore({ client: prefixed })).toThrow(/`client` is an ioredis client with keyPrefix "app:".*the store's `prefix` option/);
    const cluster = new IORedis.Cluster([{ port: 1 }], { lazyConnect: true, keyPrefix: 'app:' });
    expect(() => redisLicenseStore({ client: cluster })).toThrow(/keyPrefix "app:"/);
    const buffered = new IORedis({ lazyConnect: true, keyPrefix: Buffer.from('bin:') as unknown as string });
    expect(() => redisLicenseStore({ client: buffered })).toThrow(/keyPrefix "bin:"/);
  });

  it.skipIf(!haveRedis)('connects an ioredis client made with lazyConnect, which would otherwise wait for a command forever', async () => {
    const lazy = new IORedis(REDIS_URL, { lazyConnect: true });
    try {
      const store = redisLicenseStore({ client: lazy, prefix: newPrefix() });
      await waitFor(() => lazy.status === 'ready', 'the lazy client connected', 5000);
      await store.publish('verdict', 'sealed', 10_000);
      expect(await store.get('verdict', 100)).toBe('sealed');
    } finally {
      lazy.disconnect();
    }
  });
});

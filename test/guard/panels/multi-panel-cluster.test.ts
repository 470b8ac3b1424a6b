import { randomBytes } from 'node:crypto';
import express from 'express';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type LicenseGuard, type LicenseGuardOptions, licenseGuard } from '../../../src/index.js';
import type { LicenseStore } from '../../../src/license-store/license-store.js';
import { redisLicenseStore } from '../../../src/redis.js';
import type { MotherEmulator } from '../../../src/testing.js';
import { silentLogger } from '../../support/guard-app.js';
import { sleep, startEmulator, waitFor } from '../../support/helpers.js';
import { type Connected, REDIS_CLIENTS, type TestRedisClient } from '../../support/redis-clients.js';
import { OwnRedis, REDIS_URL, redisAnswers, serviceAvailable } from '../../support/services.js';

// `panels` mode with a Redis store: several instances of one deployment serve the same hosts,
// and each panel is checked once per slot among them, with one verdict per panel.
const haveRedis = serviceAvailable('Redis', REDIS_URL, await redisAnswers());

const PANELS = {
  'beats.example': { apiKey: 'pk_beats', apiSecret: 'sk_beats_0123456789', panel: { name: 'Beats', custom_domain: 'beats.example' } },
  'labelx.example': { apiKey: 'pk_labelx', apiSecret: 'sk_labelx_0123456789', panel: { name: 'Label X', custom_domain: 'labelx.example' } },
  'acme.example': { apiKey: 'pk_acme', apiSecret: 'sk_acme_0123456789', panel: { name: 'Acme', custom_domain: 'acme.example' } },
} as const;
type Host = keyof typeof PANELS;
const HOSTS = Object.keys(PANELS) as Host[];
const INTERVAL_MS = 10_000;

let emulator: MotherEmulator;
const clients: Connected[] = [];
/** The client the suite runs on now (it runs once per client). */
let redisClient = REDIS_CLIENTS[0] as TestRedisClient;
const guards: LicenseGuard[] = [];
let offset = 0;

beforeAll(async () => {
  emulator = await startEmulator(Object.values(PANELS).map(({ apiKey, apiSecret, panel }) => ({ apiKey, apiSecret, active: true, panel })));
});
afterAll(() => emulator.close());
afterEach(async () => {
  await Promise.all(guards.splice(0).map((guard) => guard.close()));
  await Promise.all(clients.splice(0).map((connected) => connected.close()));
  for (const { apiKey } of Object.values(PANELS)) emulator.setPanel(apiKey, { active: true, reason: null });
  emulator.setFaults({});
  emulator.reset();
  offset = 0;
});

/**
 * Store calls that failed (a loaded machine can make Redis miss its 1 s command timeout) or took
 * longer than the start-up budget, and fallback checks (an elected peer's result late on a loaded
 * machine): each lets an instance check on its own, as documented, so a count of checks allows
 * for them (as it does for a failed check, which its instance retries without a lease).
 */
let storeFailures = 0;
/** Check-slot leases won, by key (`<panel id>:lease:slot:<slot>`, the store adds its prefix): each slot has one winner. */
const slotWins = new Map<string, number>();
function counted(store: LicenseStore): LicenseStore {
  const seen = <T>(call: Promise<T>) => {
    const began = performance.now();
    return call
      .catch((error: unknown) => {
        storeFailures++;
        throw error;
      })
      .finally(() => {
        // Over the start-up budget (250 ms): a starting instance checks on its own (documented).
        if (performance.now() - began > 250) storeFailures++;
      });
  };
  return {
    ...store,
    get: (key, maxBytes) => seen(store.get(key, maxBytes)),
    publish: (key, value, ttlMs) => seen(store.publish(key, value, ttlMs)),
    acquire: (key, value, ttlMs, maxBytes) =>
      seen(store.acquire(key, value, ttlMs, maxBytes)).then((holder) => {
        // A fallback lease won: the elected peer's result did not come in time (documented).
        if (holder === null && key.includes(':lease:fallback:')) storeFailures++;
        // Taken now, or already ours: this instance runs the slot's check.
        if (key.includes(':lease:slot:') && (holder === null || holder === value)) slotWins.set(key, (slotWins.get(key) ?? 0) + 1);
        return holder;
      }),
  };
}

/** What a tenants table gives for a host: the credentials only. */
const credentialsOf = (entry: { apiKey: string; apiSecret: string } | undefined) => entry && { apiKey: entry.apiKey, apiSecret: entry.apiSecret };

async function instance(prefix: string, url = REDIS_URL, options: Partial<LicenseGuardOptions> = {}) {
  const name = `${prefix.replaceAll(':', '')}-${clients.length}`;
  const redis = await redisClient.connect(url, name);
  clients.push(redis);
  const errors: (Error & { panel?: string; code?: string })[] = [];
  const guard = licenseGuard({
    baseUrl: emulator.url,
    panels: { resolve: async (host) => credentialsOf(PANELS[host as Host]), checkIntervalMs: INTERVAL_MS, idleMs: 3600_000 },
    store: counted(redisLicenseStore({ client: redis.client, prefix })),
    now: () => Date.now() + offset,
    logger: silentLogger,
    ...options,
  });
  guard.on('error', (error) => errors.push(error as Error));
  guards.push(guard);
  const app = express();
  app.use(guard);
  app.get('/', (_req, res) => {
    res.send(res.locals.branding.name);
  });
  return { guard, app, errors, redis, name };
}

const checksBy = (apiKey: string) => emulator.requests.filter((r) => r.endpoint === 'license.php' && r.apiKey === apiKey).length;
const newPrefix = () => `test-panels-${process.pid}-${randomBytes(4).toString('hex')}:`;
type Instance = Awaited<ReturnType<typeof instance>>;
async function visitAll(instances: Instance[]): Promise<void> {
  for (const { app } of instances) for (const host of HOSTS) await request(app).get('/').set('Host', host).expect(200);
}

describe.skipIf(!haveRedis).each(REDIS_CLIENTS)('licenseGuard({ panels, store }) on $name', (each) => {
  beforeAll(() => {
    redisClient = each;
  });

  it('checks each panel once per slot among all instances, starting from one call per panel', { timeout: 30_000 }, async () => {
    const prefix = newPrefix();
    const three = [await instance(prefix), await instance(prefix), await instance(prefix)];
    // The first instance checks each panel; the others adopt its current record.
    storeFailures = 0;
    slotWins.clear();
    const began = Date.now() + offset;
    await visitAll(three);
    const panelIds = HOSTS.map((host) => three[0]?.guard.status(host)?.panel as string);
    const apiKeys = HOSTS.map((host) => PANELS[host].apiKey);
    expect(apiKeys.every((apiKey) => checksBy(apiKey) >= 1)).toBe(true);
    const reported = () => three.reduce((sum, { errors }) => sum + errors.length, 0);
    expect(apiKeys.reduce((sum, apiKey) => sum + checksBy(apiKey) - 1, 0)).toBeLessThanOrEqual(storeFailures + reported());
    for (let round = 2; round <= 4; round++) {
      // The test's clock runs 11 s ahead per round, more than one 10 s interval: instances that
      // scheduled a panel at moments either side of a slot's half-interval mark may hold two
      // consecutive slots of it, both due within one round. So the rounds do not count slots;
      // the slot leases do.
      offset += INTERVAL_MS + 1000;
      await waitFor(() => apiKeys.every((apiKey) => checksBy(apiKey) >= round), `round ${round} checked`);
      await sleep(1500);
      const wins = [...slotWins];
      const winsOf = (panelId: string) => wins.filter(([key]) => key.startsWith(`${panelId}:lease:slot:`));
      // Every check is the start-up's or the one winner of a slot's lease (a failed store call or a
      // fallback lets one more through, as documented)…
      const twiceWon = wins.reduce((sum, [, n]) => sum + n - 1, 0);
      const unelected = panelIds.reduce((sum, panelId, i) => sum + Math.max(0, checksBy(apiKeys[i] as string) - 1 - winsOf(panelId).length), 0);
      // …and no more slots were checked than the test's clock passed (the slot times of a panel
      // are one interval apart: a span holds at most span / interval + 1 of them).
      const slotsPassed = Math.floor((Date.now() + offset - began) / INTERVAL_MS) + 1;
      const seen = () =>
        `checks ${apiKeys.map(checksBy)}, slot leases won ${JSON.stringify(wins.map(([key, n]) => `${key.slice(0, 6)}…${key.slice(key.lastIndexOf(':'))}×${n}`))}, ${slotsPassed} slot times passed, ${storeFailures} store failures; errors ${JSON.stringify(
          three.map(({ errors }) => errors.map((error) => `${error.panel}:${error.code}`)),
        )}`;
      expect(twiceWon + unelected, seen()).toBeLessThanOrEqual(storeFailures + reported());
      for (const panelId of panelIds) expect(winsOf(panelId).length, seen()).toBeLessThanOrEqual(slotsPassed);
    }
    for (const { guard } of three) for (const host of HOSTS) expect(guard.status(host)).toMatchObject({ state: 'active', store: 'ok' });
    // Some instance other than the checker heard of each check through the store.
    const peers = three.flatMap(({ guard }) => HOSTS.map((host) => guard.status(host)?.lastCheckBy));
    expect(peers).toContain('peer');
  });

  it('carries a lock verified by one instance to every other, and to that panel only', async () => {
    const prefix = newPrefix();
    const three = [await instance(prefix), await instance(prefix), await instance(prefix)];
    await visitAll(three);
    emulator.setPanel('pk_labelx', { active: false, reason: 'Unpaid' });
    expect(await three[0]?.guard.refresh('labelx.example')).toBe('locked');
    await waitFor(() => three.every(({ guard }) => guard.status('labelx.example')?.state === 'locked'), 'the lock on every instance', 2000);
    for (const { app } of three) {
      await request(app).get('/').set('Host', 'labelx.example').expect(503);
      await request(app).get('/').set('Host', 'beats.example').expect(200);
    }
    expect(checksBy('pk_labelx')).toBe(2);
    emulator.setPanel('pk_labelx', { active: true });
    await three[2]?.guard.refresh('labelx.example');
    await waitFor(() => three.every(({ guard }) => guard.status('labelx.example')?.state === 'active'), 'the unlock on every instance', 2000);
  });

  it("refuses one panel's record copied onto another panel's key", async () => {
    const prefix = newPrefix();
    const two = [await instance(prefix), await instance(prefix)];
    await visitAll(two);
    emulator.setPanel('pk_beats', { active: false, reason: 'Stolen' });
    await two[0]?.guard.refresh('beats.example');
    const beats = two[0]?.guard.status('beats.example')?.panel as string;
    const labelx = two[0]?.guard.status('labelx.example')?.panel as string;
    expect(beats).toMatch(/^[0-9a-f]{32}$/);
    const redis = two[0]?.redis as Connected;
    const locked = (await redis.command(['GET', `${prefix}${beats}:verdict`])) as string;
    expect(locked).toBeTruthy();
    await redis.command(['SET', `${prefix}${labelx}:verdict`, locked]);
    await redis.command(['PUBLISH', `${prefix}${labelx}:verdict`, locked]);
    await waitFor(() => two.every(({ errors }) => errors.some((error) => error.panel === labelx)), 'the refusal reported');
    for (const { guard, app } of two) {
      expect(guard.status('labelx.example')?.state).toBe('active');
      await request(app).get('/').set('Host', 'labelx.example').expect(200);
    }
    expect(JSON.stringify(two.flatMap(({ errors }) => errors.map((e) => e.message)))).not.toMatch(/pk_|sk_/);
  });

  it('never locks when Redis fails: each instance checks its panels itself, then one checks again', { timeout: 40_000 }, async () => {
    const redisServer = await OwnRedis.create();
    try {
      const prefix = newPrefix();
      const two = [await instance(prefix, redisServer.url), await instance(prefix, redisServer.url)];
      await visitAll(two);
      const before = checksBy('pk_acme');
      await redisServer.stop();
      offset += INTERVAL_MS + 1000;
      await waitFor(() => checksBy('pk_acme') === before + 2, 'both instances checking for themselves', 15_000);
      for (const { guard } of two) expect(guard.status('acme.example')).toMatchObject({ state: 'active', store: 'unavailable' });
      // One report per outage for the whole store, not one per panel.
      for (const { errors } of two) expect(errors.filter((error) => error.code === 'STORE_UNAVAILABLE')).toHaveLength(1);
      await redisServer.start();
      await waitFor(() => two.every(({ redis }) => redis.ready()), 'the clients reconnected', 15_000);
      const after = checksBy('pk_acme');
      offset += INTERVAL_MS + 1000;
      await waitFor(() => checksBy('pk_acme') > after, 'the next slot');
      await sleep(1500);
      expect(checksBy('pk_acme')).toBe(after + 1);
      // Each instance sees the store healthy again at its next successful call (on a loaded machine, after the slot's read).
      await waitFor(() => two.every(({ guard }) => guard.status('acme.example')?.store === 'ok'), 'the store healthy on both instances', 10_000);
      for (const { guard } of two) expect(guard.status('acme.example')).toMatchObject({ state: 'active', store: 'ok' });
    } finally {
      await redisServer.stop();
    }
  });

  it('shares one Redis connection for subscriptions, however many panels', async () => {
    const prefix = newPrefix();
    const one = await instance(prefix);
    await visitAll([one]);
    const list = String(await one.redis.command(['CLIENT', 'LIST']));
    const connections = list.split('\n').filter((line) => line.includes(` name=${one.name} `));
    expect(connections).toHaveLength(2);
    expect(connections.filter((line) => / sub=3 /.test(line))).toHaveLength(1);
    const channels = (await one.redis.command(['PUBSUB', 'CHANNELS', `${prefix}*`])) as string[];
    expect(channels).toHaveLength(HOSTS.length);
  });

  it('keeps a channel subscribed while another subscription of it remains, whatever the order of closing', async () => {
    const redis = await redisClient.connect(REDIS_URL);
    clients.push(redis);
    const store = redisLicenseStore({ client: redis.client, prefix: newPrefix() });
    const heard: string[] = [];
    const first = store.subscribe('k', () => heard.push('first'));
    const second = store.subscribe('k', (value) => heard.push(`second:${value}`));
    await first.close(); // before its SUBSCRIBE was answered
    await second.ready;
    await store.publish('k', 'v1', 10_000);
    await waitFor(() => heard.includes('second:v1'), 'the remaining subscription to hear the value');
    expect(heard).not.toContain('first');
    await second.close();
  });
});

import { randomBytes } from 'node:crypto';
import express from 'express';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type LicenseGuard, type LicenseGuardOptions, licenseGuard } from '../../src/index.js';
import { redisLicenseStore } from '../../src/redis.js';
import type { MotherEmulator } from '../../src/testing.js';
import { silentLogger } from '../support/guard-app.js';
import { API_KEY, API_SECRET, clientFor, startEmulator, waitFor } from '../support/helpers.js';
import { type Connected, REDIS_CLIENTS } from '../support/redis-clients.js';
import { commandExists, OwnRedisCluster, serviceAvailable } from '../support/services.js';

// Cluster mode on a real Redis Cluster (three masters of the test's own): the keys of different
// panels land on different nodes, and a change published on one node reaches subscribers that
// listen on another. Run once per client (node-redis's createCluster, ioredis's Cluster).
const haveRedisServer = serviceAvailable(
  'redis-server and redis-cli (for a Redis Cluster)',
  'PATH',
  commandExists('redis-server') && commandExists('redis-cli'),
);

const PANELS = Array.from({ length: 12 }, (_, i) => ({
  host: `p${i}.example`,
  apiKey: `pk_cluster_${i}`,
  apiSecret: `sk_cluster_${i}_0123456789`,
  panel: { name: `Panel ${i}`, custom_domain: `p${i}.example` },
}));
const byHost = new Map(PANELS.map((panel) => [panel.host, panel]));
/** What a tenants table gives for a host: the credentials only. */
const credentialsOf = (entry: { apiKey: string; apiSecret: string } | undefined) => entry && { apiKey: entry.apiKey, apiSecret: entry.apiSecret };

let emulator: MotherEmulator;
let cluster: OwnRedisCluster;
const clients: Connected[] = [];
const guards: LicenseGuard[] = [];

beforeAll(async () => {
  emulator = await startEmulator([
    { apiKey: API_KEY, apiSecret: API_SECRET, active: true },
    ...PANELS.map(({ apiKey, apiSecret, panel }) => ({ apiKey, apiSecret, active: true, panel })),
  ]);
  if (haveRedisServer) cluster = await OwnRedisCluster.create();
}, 60_000);
afterAll(async () => {
  await emulator.close();
  await cluster?.stop();
});
afterEach(async () => {
  await Promise.all(guards.splice(0).map((guard) => guard.close()));
  await Promise.all(clients.splice(0).map((connected) => connected.close()));
  for (const { apiKey } of PANELS) emulator.setPanel(apiKey, { active: true, reason: null });
  emulator.setPanel(API_KEY, { active: true, reason: null });
  emulator.reset();
});

const newPrefix = () => `test-redis-cluster-${process.pid}-${randomBytes(4).toString('hex')}:`;
const checksBy = (apiKey: string) => emulator.requests.filter((r) => r.endpoint === 'license.php' && r.apiKey === apiKey).length;

describe.skipIf(!haveRedisServer).each(REDIS_CLIENTS)('cluster mode on a Redis Cluster of three masters, on $name', (redisClient) => {
  async function store(prefix: string) {
    const connected = await redisClient.connectCluster(cluster.addresses);
    clients.push(connected);
    return redisLicenseStore({ client: connected.client, prefix });
  }

  async function panelsInstance(prefix: string) {
    // Far check slots: within the test, only a published change can carry a lock.
    const guard = licenseGuard({
      baseUrl: emulator.url,
      panels: { resolve: async (host) => credentialsOf(byHost.get(host)), checkIntervalMs: 3600_000, idleMs: 3600_000 },
      store: await store(prefix),
      logger: silentLogger,
    });
    guards.push(guard);
    const app = express();
    app.use(guard);
    app.get('/', (_req, res) => {
      res.send(res.locals.branding.name);
    });
    return { guard, app };
  }

  it("checks each panel once among three instances, and carries every panel's lock to all, whichever node holds its keys", { timeout: 40_000 }, async () => {
    const prefix = newPrefix();
    const three = [await panelsInstance(prefix), await panelsInstance(prefix), await panelsInstance(prefix)];
    for (const { app } of three) for (const { host } of PANELS) await request(app).get('/').set('Host', host).expect(200);
    // The first instance checked each panel; the others adopted its record from the cluster.
    expect(PANELS.map(({ apiKey }) => checksBy(apiKey))).toEqual(PANELS.map(() => 1));

    // Twelve panels' keys spread over the masters (each panel's keys hash to their own slots).
    const keysPerNode = await cluster.keysPerNode(`${prefix}*`);
    expect(keysPerNode.filter((count) => count > 0).length, `keys per node: ${keysPerNode}`).toBeGreaterThanOrEqual(2);

    // Each instance subscribes as it first serves a panel; wait until all three listen to every panel's channel.
    const channels = PANELS.map(({ host }) => `${prefix}${three[0]?.guard.status(host)?.panel}:verdict`);
    await waitFor(async () => (await cluster.fewestSubscribers(channels)) === three.length, 'every instance subscribed to every panel');
    for (const { apiKey } of PANELS) emulator.setPanel(apiKey, { active: false, reason: 'Unpaid' });
    for (const { host } of PANELS) expect(await three[0]?.guard.refresh(host)).toBe('locked');
    await waitFor(
      () => three.every(({ guard }) => PANELS.every(({ host }) => guard.status(host)?.state === 'locked')),
      'every lock on every instance through pub/sub',
      5000,
    );
    for (const { app } of three)
      await request(app)
        .get('/')
        .set('Host', PANELS[5]?.host as string)
        .expect(503);
    expect(PANELS.map(({ apiKey }) => checksBy(apiKey))).toEqual(PANELS.map(() => 2));
  });

  it('makes one start-up call for four instances of one panel, and locks all four from one refresh', async () => {
    const prefix = newPrefix();
    const options: Partial<LicenseGuardOptions> = { schedule: '0 0 1 1 *', syncIntervalMs: 3600_000, jitterMs: 0 };
    const four = await Promise.all([1, 2, 3, 4].map(async () => licenseGuard({ client: clientFor(emulator), store: await store(prefix), ...options })));
    guards.push(...four);
    await Promise.all(four.map((guard) => guard.start()));
    expect(four.map((guard) => guard.state)).toEqual(['active', 'active', 'active', 'active']);
    expect(checksBy(API_KEY)).toBe(1);
    emulator.setPanel(API_KEY, { active: false, reason: 'Suspended' });
    expect(await four[3]?.refresh()).toBe('locked');
    await waitFor(() => four.every((guard) => guard.state === 'locked'), 'all four locked', 2000);
    expect(four[0]?.status()).toMatchObject({ state: 'locked', reason: 'Suspended', lastCheckBy: 'peer', store: 'ok' });
  });
});

import { randomBytes } from 'node:crypto';
import { createClient, type RedisClientType } from 'redis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../../../src/emulator/emulator.js';
import { createMotherClient, type LicenseGuard, type LicenseGuardOptions, licenseGuard } from '../../../src/index.js';
import type { LicenseStore } from '../../../src/license-store/license-store.js';
import { redisLicenseStore } from '../../../src/redis.js';
import { API_KEY, API_SECRET, clientFor, sleep, startEmulator, waitFor } from '../../support/helpers.js';
import { type Connected, REDIS_CLIENTS } from '../../support/redis-clients.js';
import { REDIS_URL, redisAnswers, serviceAvailable } from '../../support/services.js';

// Cluster mode under skewed host clocks: records replayed into the store (by someone who can read
// and write Redis but has no API secret, so only genuine records) never undo a newer verdict on
// an instance that took it from a peer, and an older lock never re-locks a panel unlocked since.
const haveRedis = serviceAvailable('Redis', REDIS_URL, await redisAnswers());

let emulator: MotherEmulator;
let redis: RedisClientType;
const clients: Connected[] = [];
const guards: LicenseGuard[] = [];
const newPrefix = () => `test-replays-${process.pid}-${randomBytes(4).toString('hex')}:`;
const licenseCalls = (mother: MotherEmulator) => mother.requests.filter((request) => request.endpoint === 'license.php').length;

async function storeFor(prefix: string): Promise<LicenseStore> {
  const connected = await (REDIS_CLIENTS[0] as (typeof REDIS_CLIENTS)[0]).connect(REDIS_URL);
  clients.push(connected);
  return redisLicenseStore({ client: connected.client, prefix });
}

async function instance(prefix: string, options: Partial<LicenseGuardOptions> = {}, store?: LicenseStore): Promise<LicenseGuard> {
  const guard = licenseGuard({
    client: clientFor(emulator, { timeoutMs: 1000 }),
    store: store ?? (await storeFor(prefix)),
    schedule: '0 0 1 1 *',
    jitterMs: 0,
    syncIntervalMs: 300,
    startupTimeoutMs: 2000,
    ...options,
  });
  guard.on('error', () => {});
  guards.push(guard);
  return guard;
}

beforeAll(async () => {
  emulator = await startEmulator();
  if (!haveRedis) return;
  redis = createClient({ url: REDIS_URL }) as RedisClientType;
  await redis.connect();
});
afterAll(async () => {
  await emulator.close();
  await redis?.close();
});
afterEach(async () => {
  await Promise.all(guards.splice(0).map((guard) => guard.close()));
  await Promise.all(clients.splice(0).map((connected) => connected.close()));
  emulator.setFaults({});
  emulator.setPanel(API_KEY, { active: true, reason: null });
  emulator.reset();
});

describe.skipIf(!haveRedis)('cluster mode, records replayed under skewed clocks', () => {
  it('a replayed active record from a host 4 minutes ahead does not unlock an instance that took the revocation from a peer', async () => {
    // A genuine active record written by a host whose clock is 4 minutes ahead (inside the
    // 5-minute tolerance), captured by the attacker; neither instance below ever hears of it —
    // the premise of the project's own test "never applies a record older than a verdict the
    // instance verified itself".
    const elsewhere = newPrefix();
    const ahead = await instance(elsewhere, { now: () => Date.now() + 4 * 60_000 });
    expect(await ahead.start()).toBe('active');
    await sleep(200);
    const captured = (await redis.get(`${elsewhere}${clientFor(emulator).panelId}:verdict`)) as string;
    expect(captured).toBeTruthy();
    await sleep(1100); // the revocation is answered in a later second of the mother's clock

    emulator.setPanel(API_KEY, { active: false, reason: 'Revoked' });
    const prefix = newPrefix();
    // The checker verifies the revocation itself.
    const checker = await instance(prefix);
    expect(await checker.start()).toBe('locked');
    await sleep(200);
    // The follower starts while the checker's lock record is current: it adopts it without a
    // check of its own (as every instance but the slot's winner does in a running cluster).
    const calls = licenseCalls(emulator);
    const follower = await instance(prefix);
    expect(await follower.start()).toBe('locked');
    expect(licenseCalls(emulator)).toBe(calls);

    // The attacker plants the old active record and publishes it.
    const key = `${prefix}${clientFor(emulator).panelId}:verdict`;
    await redis.set(key, captured);
    await redis.publish(key, captured);
    await sleep(800);
    // Promised: "No replayed record undoes a newer state on a running instance."
    expect([checker.state, follower.state]).toEqual(['locked', 'locked']);
  });

  it('same replay against a running follower whose own last check is older than the captured record', async () => {
    const prefix = newPrefix();
    const key = `${prefix}${clientFor(emulator).panelId}:verdict`;
    // The follower has run for a while and checked the mother itself (second S-1).
    const follower = await instance(prefix);
    expect(await follower.start()).toBe('active');
    await sleep(1100);
    // Second S: a host 4 minutes ahead writes an active record the follower never hears of.
    const elsewhere = newPrefix();
    const ahead = await instance(elsewhere, { now: () => Date.now() + 4 * 60_000 });
    expect(await ahead.start()).toBe('active');
    await sleep(200);
    const captured = (await redis.get(`${elsewhere}${clientFor(emulator).panelId}:verdict`)) as string;
    await sleep(1100);
    // Second S+1: a peer verifies the revocation; the follower takes it from the peer's record.
    emulator.setPanel(API_KEY, { active: false, reason: 'Revoked' });
    const checker = await instance(prefix);
    await checker.start();
    expect(await checker.refresh()).toBe('locked');
    await waitFor(() => follower.state === 'locked', "checker's lock on the follower", 3000);
    await redis.set(key, captured);
    await redis.publish(key, captured);
    await sleep(800);
    expect([checker.state, follower.state]).toEqual(['locked', 'locked']);
  });

  it('a lock replayed from earlier in the same mother second does not re-lock panels that were unlocked since (two locks before the unlock)', async () => {
    const frozen = Date.now();
    const mother = await startEmulator(undefined, { now: () => frozen });
    try {
      const prefix = newPrefix();
      const client = () => createMotherClient({ baseUrl: mother.url, apiKey: API_KEY, apiSecret: API_SECRET });
      const a = await instance(prefix, { client: client() });
      const b = await instance(prefix, { client: client() });
      await a.start();
      await b.start();
      const key = `${prefix}${client().panelId}:verdict`;
      mother.setPanel(API_KEY, { active: false, reason: 'Unpaid' });
      expect(await b.refresh()).toBe('locked');
      await waitFor(() => a.state === 'locked', "b's lock on a", 3000);
      await sleep(100);
      const firstLock = (await redis.get(key)) as string;
      expect(firstLock).toBeTruthy();
      // The panel stays locked and is checked again (every slot does that while it is locked).
      expect(await a.refresh()).toBe('locked');
      await sleep(200);
      mother.setPanel(API_KEY, { active: true, reason: null });
      expect(await b.refresh()).toBe('active');
      await waitFor(() => a.state === 'active', "b's unlock on a", 3000);
      // The attacker (or a very late read) brings the first lock record back.
      await redis.publish(key, firstLock);
      await sleep(300);
      expect([a.state, b.state]).toEqual(['active', 'active']);
    } finally {
      await mother.close();
    }
  });

  it("takes a genuine lock from a peer whose clock is behind, also when the held unlock's basis came from a host ahead", async () => {
    // Same as the documented test "takes a lock the mother answered after the verdict it holds,
    // though its writer's clock is behind", except that the host 2 minutes ahead starts first and
    // checks the mother itself, so the basis of its later unlock is its own (ahead) stamp.
    const prefix = newPrefix();
    const ahead = await instance(prefix, { now: () => Date.now() + 120_000 });
    expect(await ahead.start()).toBe('active');
    const real = await storeFor(prefix);
    const deaf: LicenseStore = { ...real, get: async () => null, subscribe: () => ({ ready: Promise.resolve(), close: async () => {} }) };
    const behind = await instance(prefix, { syncIntervalMs: 3_600_000 }, deaf);
    expect(await behind.start()).toBe('active');
    await sleep(1100);
    expect(await ahead.refresh()).toBe('active'); // basis: ahead's own start-up check
    await sleep(1100); // the revocation is answered in a later second of the mother's clock
    emulator.setPanel(API_KEY, { active: false, reason: 'Revoked' });
    expect(await behind.refresh()).toBe('locked');
    // A peer's lock the mother answered after the active verdict held is taken even when the
    // peer's clock is behind (before: refused, so `ahead` stayed open until it won a check slot).
    await waitFor(() => ahead.state === 'locked', "behind's lock on ahead", 3000);
  });

  it("a follower that took a lock from a peer follows a genuine unlock after the mother's clock stepped back (it asks the mother)", async () => {
    // The mother's clock runs 10 minutes ahead when it answers the revocation, then NTP steps it
    // back; the panel is re-activated (paid) and a peer verifies that.
    let skewMs = 0;
    const mother = await startEmulator(undefined, { now: () => Date.now() + skewMs });
    try {
      const prefix = newPrefix();
      const client = () => createMotherClient({ baseUrl: mother.url, apiKey: API_KEY, apiSecret: API_SECRET });
      const follower = await instance(prefix, { client: client() });
      const checker = await instance(prefix, { client: client() });
      expect(await follower.start()).toBe('active');
      await checker.start();
      skewMs = 10 * 60_000;
      mother.setPanel(API_KEY, { active: false, reason: 'Unpaid' });
      expect(await checker.refresh()).toBe('locked');
      await waitFor(() => follower.state === 'locked', "checker's lock on follower", 3000);
      skewMs = 0;
      mother.setPanel(API_KEY, { active: true, reason: null });
      expect(await checker.refresh()).toBe('active');
      // The unlock was answered before the lock by the mother's clock: disputed, so the follower
      // checks itself (before: locked until the mother's clock passed the lock's time again).
      await waitFor(() => follower.state === 'active', "checker's unlock on follower", 3000);
    } finally {
      await mother.close();
    }
  });
});

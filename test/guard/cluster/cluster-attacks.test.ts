import { randomBytes } from 'node:crypto';
import { createClient, type RedisClientType } from 'redis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../../../src/emulator/emulator.js';
import { createMotherClient, type LicenseGuard, type LicenseGuardOptions, licenseGuard } from '../../../src/index.js';
import type { LicenseStore } from '../../../src/license-store/license-store.js';
import { LeaseSeal } from '../../../src/license-store/store-calls.js';
import { redisLicenseStore } from '../../../src/redis.js';
import { API_KEY, API_SECRET, clientFor, sleep, startEmulator, waitFor } from '../../support/helpers.js';
import { type Connected, REDIS_CLIENTS, type TestRedisClient } from '../../support/redis-clients.js';
import { REDIS_URL, redisAnswers, serviceAvailable } from '../../support/services.js';

// What someone who can write to Redis, but has no API secret, can and cannot do to a cluster;
// and what clocks that disagree between hosts do.
const haveRedis = serviceAvailable('Redis', REDIS_URL, await redisAnswers());

let emulator: MotherEmulator;
let redis: RedisClientType;
const clients: Connected[] = [];
/** The client the stores run on now (each suite runs once per client); the attacker's is node-redis. */
let redisClient = REDIS_CLIENTS[0] as TestRedisClient;
const guards: LicenseGuard[] = [];
const errors: { code?: string; message: string }[] = [];
const panelId = () => clientFor(emulator).panelId;
const licenseCalls = () => emulator.requests.filter((request) => request.endpoint === 'license.php').length;
// Its next check is due within 30 minutes: an hour later, the record is overdue.
const HALF_HOURLY = '*/30 * * * *';
const newPrefix = () => `test-attack-${process.pid}-${randomBytes(4).toString('hex')}:`;

async function storeFor(prefix: string): Promise<LicenseStore> {
  const connected = await redisClient.connect(REDIS_URL);
  clients.push(connected);
  return redisLicenseStore({ client: connected.client, prefix });
}

async function instance(prefix: string, options: Partial<LicenseGuardOptions> = {}, store?: LicenseStore): Promise<LicenseGuard> {
  const guard = licenseGuard({
    client: clientFor(emulator, { timeoutMs: 1000 }),
    store: store ?? (await storeFor(prefix)),
    schedule: '* * * * * *',
    jitterMs: 0,
    syncIntervalMs: 300,
    startupTimeoutMs: 2000,
    ...options,
  });
  guard.on('error', (error) => errors.push(error as { code?: string; message: string }));
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
  errors.length = 0;
  emulator.setFaults({});
  emulator.setPanel(API_KEY, { active: true, reason: null });
  emulator.reset();
});

describe.skipIf(!haveRedis).each(REDIS_CLIENTS)('with stores on $name', (each) => {
  beforeAll(() => {
    redisClient = each;
  });

  describe('cluster mode under attack', () => {
    it('keeps checking when someone holds the slot leases with values that do not verify', async () => {
      const prefix = newPrefix();
      const two = [await instance(prefix), await instance(prefix)];
      await Promise.all(two.map((guard) => guard.start()));
      // Hold the next 20 slots, with garbage and with a genuine-looking value copied from elsewhere.
      const slot = Math.ceil(Date.now() / 1000) * 1000;
      for (let i = 0; i < 20; i++) {
        const key = `${prefix}${panelId()}:lease:slot:panel-license-guard:${new Date(slot + i * 1000).toISOString()}`;
        await redis.set(key, i % 2 ? 'attacker' : `0123456789abcdef.${'a'.repeat(64)}`, { PX: 60_000 });
      }
      emulator.setPanel(API_KEY, { active: false, reason: 'Revoked' });
      await waitFor(() => two.every((guard) => guard.state === 'locked'), 'both locked by their own checks', 4000);
      expect(errors.some((error) => error.code === 'SHARED_VERDICT_REJECTED' && /lease/.test(error.message))).toBe(true);
    }, 20_000);

    it('checks itself when the elected peer never delivers a result', async () => {
      const prefix = newPrefix();
      const store = await storeFor(prefix);
      // A genuine peer (it holds the secret) wins every lease, then never publishes anything.
      const peer = new LeaseSeal(panelId(), 'feedfacefeedface', (data) => clientFor(emulator).localMac('license-store', data));
      const outvoted: LicenseStore = {
        ...store,
        acquire: async (key, value, ttlMs, maxBytes) => (key.includes(':slot:') ? peer.value(key) : store.acquire(key, value, ttlMs, maxBytes)),
      };
      const guard = await instance(prefix, {}, outvoted);
      await guard.start();
      emulator.setPanel(API_KEY, { active: false, reason: 'Revoked' });
      // fallback: jitter 0 + timeout 1 s + 5 s after a skipped slot with no result around it
      await waitFor(() => guard.state === 'locked', 'the fallback check', 16_000);
    }, 30_000);

    it('does not trust a stale record at start-up: restores it as grace and checks', async () => {
      const prefix = newPrefix();
      const first = await instance(prefix, { schedule: HALF_HOURLY });
      await first.start();
      await first.close();
      emulator.setFaults({ down: true });
      // An hour later (by this instance's clock) the record's next check is long overdue.
      const hourLater = () => Date.now() + 3_600_000;
      const calls = licenseCalls();
      const late = await instance(prefix, { schedule: HALF_HOURLY, now: hourLater });
      expect(await late.start()).toBe('grace');
      expect(licenseCalls()).toBe(calls + 1);
    });

    it('replaying an old active record and squatting the start-up lease does not unlock a revoked panel', async () => {
      const prefix = newPrefix();
      const first = await instance(prefix, { schedule: HALF_HOURLY });
      await first.start();
      const key = `${prefix}${panelId()}:verdict`;
      const oldActive = (await redis.get(key)) as string;
      emulator.setPanel(API_KEY, { active: false, reason: 'Revoked' });
      expect(await first.refresh()).toBe('locked');
      await first.close();
      await redis.set(key, oldActive);
      await redis.set(`${prefix}${panelId()}:lease:startup`, 'squatter', { PX: 60_000 });
      const later = await instance(prefix, { schedule: HALF_HOURLY, now: () => Date.now() + 3_600_000 });
      expect(await later.start()).toBe('locked');
    });

    it('drops an oversized value without loading it, and bounds reports of a garbage flood', async () => {
      const prefix = newPrefix();
      const guard = await instance(prefix, { schedule: '0 0 1 1 *', syncIntervalMs: 100 });
      await guard.start();
      const key = `${prefix}${panelId()}:verdict`;
      await redis.set(key, 'x'.repeat(5_000_000));
      for (let i = 0; i < 200; i++) await redis.publish(key, `garbage ${i}`);
      await sleep(500);
      expect(guard.state).toBe('active');
      const rejected = errors.filter((error) => error.code === 'SHARED_VERDICT_REJECTED');
      expect(rejected.length).toBe(1);
    });

    it('reads lease holders capped in Redis: 8 MB planted at the predictable slot keys never cross whole', async () => {
      const prefix = newPrefix();
      // Every holder the guard gets back from the store, as it gets it.
      let longest = 0;
      const measured = async (): Promise<LicenseStore> => {
        const store = await storeFor(prefix);
        return {
          ...store,
          acquire: async (key, value, ttlMs, maxBytes) => {
            const holder = await store.acquire(key, value, ttlMs, maxBytes);
            longest = Math.max(longest, holder?.length ?? 0);
            return holder;
          },
        };
      };
      const two = [await instance(prefix, {}, await measured()), await instance(prefix, {}, await measured())];
      await Promise.all(two.map((guard) => guard.start()));
      const slot = Math.ceil(Date.now() / 1000) * 1000;
      const huge = 'x'.repeat(8 * 1024 * 1024);
      for (let i = 0; i < 6; i++)
        await redis.set(`${prefix}${panelId()}:lease:slot:panel-license-guard:${new Date(slot + i * 1000).toISOString()}`, huge, { PX: 60_000 });
      emulator.setPanel(API_KEY, { active: false, reason: 'Revoked' });
      await waitFor(() => two.every((guard) => guard.state === 'locked'), 'both locked by their own checks', 4000);
      await sleep(2000);
      expect(longest).toBeGreaterThan(0);
      expect(longest).toBeLessThanOrEqual(201);
    }, 20_000);
  });

  describe('cluster mode with clocks that disagree', () => {
    it('orders checks by cause, not by wall clock: a host 2 minutes ahead still follows a lock', async () => {
      const prefix = newPrefix();
      const a = await instance(prefix, { schedule: '0 0 1 1 *' });
      const ahead = await instance(prefix, { schedule: '0 0 1 1 *', now: () => Date.now() + 120_000 });
      await a.start();
      await ahead.start();
      expect(await ahead.refresh()).toBe('active');
      // Right after, before that record reaches `a`: a's check starts with a smaller stamp.
      emulator.setPanel(API_KEY, { active: false, reason: 'Revoked' });
      await a.refresh();
      await waitFor(() => a.state === 'locked' && ahead.state === 'locked', 'both locked', 5000);
      // The host ahead fails a check afterwards: that must not unlock anyone.
      emulator.setFaults({ down: true });
      await ahead.refresh();
      await sleep(200);
      expect([a.state, ahead.state]).toEqual(['locked', 'locked']);
    });

    it('a record refused for its time stays refused once the clocks catch up (no time bomb)', async () => {
      const prefix = newPrefix();
      let elapsed = 0;
      const sixAhead = await instance(prefix, { schedule: '0 0 1 1 *', now: () => Date.now() + 6 * 60_000 });
      const b = await instance(prefix, { schedule: '0 0 1 1 *', now: () => Date.now() + elapsed });
      await b.start();
      await sixAhead.start();
      await sixAhead.refresh();
      await sleep(200);
      const key = `${prefix}${panelId()}:verdict`;
      const captured = (await redis.get(key)) as string;
      expect(errors.some((error) => error.code === 'SHARED_VERDICT_REJECTED' && /ahead/.test(error.message))).toBe(true);
      emulator.setPanel(API_KEY, { active: false, reason: 'Revoked' });
      expect(await b.refresh()).toBe('locked');
      elapsed = 61_000; // b's clock has caught up enough for the copy to pass the time check
      await redis.set(key, captured);
      await redis.publish(key, captured);
      await sleep(300);
      expect(b.state).toBe('locked');
    });

    it('never applies a record older than a verdict the instance verified itself, whatever the clocks say', async () => {
      // A record written elsewhere (another namespace: this instance never sees it), captured.
      const elsewhere = newPrefix();
      const writer = await instance(elsewhere, { schedule: '0 0 1 1 *' });
      expect(await writer.start()).toBe('active');
      await sleep(200);
      const captured = (await redis.get(`${elsewhere}${panelId()}:verdict`)) as string;
      expect(captured).toBeTruthy();
      // The revocation comes in a later second of the mother's clock (within one second, the check
      // order decides, as documented).
      await sleep(1100);
      // An instance 4 minutes behind (inside the 5-minute tolerance) verifies a revocation itself.
      const prefix = newPrefix();
      const behind = await instance(prefix, { schedule: '0 0 1 1 *', now: () => Date.now() - 4 * 60_000 });
      await behind.start();
      emulator.setPanel(API_KEY, { active: false, reason: 'Revoked' });
      expect(await behind.refresh()).toBe('locked');
      // The attacker deletes the verdict and re-publishes the active record captured before.
      const key = `${prefix}${panelId()}:verdict`;
      await redis.del(key);
      await redis.set(key, captured);
      await redis.publish(key, captured);
      await sleep(800);
      expect(behind.state).toBe('locked');
    });

    it("adopts a peer's lock even when the mother's clock answered it earlier than its own last answer", async () => {
      // Mother servers whose clocks disagree (or a clock stepped back): a lock is always taken.
      let skewMs = 0;
      const skewed = await startEmulator(undefined, { now: () => Date.now() + skewMs });
      try {
        const prefix = newPrefix();
        const options = { client: createMotherClient({ baseUrl: skewed.url, apiKey: API_KEY, apiSecret: API_SECRET }), schedule: '0 0 1 1 *' };
        const [a, b] = [await instance(prefix, options), await instance(prefix, options)];
        await a.start();
        await b.start();
        skewMs = 3000;
        expect(await a.refresh()).toBe('active');
        skewMs = 0;
        skewed.setPanel(API_KEY, { active: false, reason: 'Unpaid' });
        expect(await b.refresh()).toBe('locked');
        await waitFor(() => a.state === 'locked', "b's lock on a", 3000);
      } finally {
        await skewed.close();
      }
    });

    it("takes a lock the mother answered after the verdict it holds, though its writer's clock is behind", async () => {
      const prefix = newPrefix();
      const ahead = await instance(prefix, { schedule: '0 0 1 1 *', now: () => Date.now() + 120_000 });
      // `behind` never hears of ahead's records: its check stamps stay below ahead's.
      const real = await storeFor(prefix);
      const deaf: LicenseStore = { ...real, get: async () => null, subscribe: () => ({ ready: Promise.resolve(), close: async () => {} }) };
      const behind = await instance(prefix, { schedule: '0 0 1 1 *', syncIntervalMs: 3_600_000 }, deaf);
      await behind.start();
      await ahead.start();
      expect(await ahead.refresh()).toBe('active');
      await sleep(1100); // the revocation is answered in a later second of the mother's clock
      emulator.setPanel(API_KEY, { active: false, reason: 'Revoked' });
      expect(await behind.refresh()).toBe('locked');
      await waitFor(() => ahead.state === 'locked', "behind's lock on ahead", 3000);
    });

    it('does not go back to a lock it already left when a late read brings that record again', async () => {
      // One second of the mother's clock for the whole test: the lock and the unlock share it.
      const frozen = Date.now();
      const mother = await startEmulator(undefined, { now: () => frozen });
      try {
        const prefix = newPrefix();
        const options = { client: createMotherClient({ baseUrl: mother.url, apiKey: API_KEY, apiSecret: API_SECRET }), schedule: '0 0 1 1 *' };
        const [a, b] = [await instance(prefix, { ...options, syncIntervalMs: 3_600_000 }), await instance(prefix, options)];
        await a.start();
        await b.start();
        mother.setPanel(API_KEY, { active: false, reason: 'Unpaid' });
        expect(await b.refresh()).toBe('locked');
        await waitFor(() => a.state === 'locked', "b's lock on a", 3000);
        const key = `${prefix}${options.client.panelId}:verdict`;
        const lockRecord = (await redis.get(key)) as string;
        expect(lockRecord).toBeTruthy();
        mother.setPanel(API_KEY, { active: true, reason: null });
        expect(await b.refresh()).toBe('active');
        await waitFor(() => a.state === 'active', "b's unlock on a", 3000);
        // A read issued before the unlock was published answers after it: the old lock record.
        await redis.publish(key, lockRecord);
        await sleep(300);
        expect([a.state, b.state]).toEqual(['active', 'active']);
      } finally {
        await mother.close();
      }
    });

    it('a slow answer does not overtake a later check', async () => {
      const prefix = newPrefix();
      const slow = await instance(prefix, { schedule: '0 0 1 1 *' });
      const quick = await instance(prefix, { schedule: '0 0 1 1 *' });
      await slow.start();
      await quick.start();
      emulator.setFaults({ delayMs: 600 });
      const slowCheck = slow.refresh();
      await sleep(100);
      emulator.setFaults({});
      emulator.setPanel(API_KEY, { active: false, reason: 'Revoked' });
      expect(await quick.refresh()).toBe('locked');
      await slowCheck;
      await sleep(200);
      expect([slow.state, quick.state]).toEqual(['locked', 'locked']);
    });
  });
});

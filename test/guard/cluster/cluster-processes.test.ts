import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type ClusterInstance, measureChecksPerSlot, measurePropagation, startInstances, stopInstances, timeUntilAll } from '../../../bench/cluster.js';
import type { MotherEmulator } from '../../../src/emulator/emulator.js';
import { API_KEY, API_SECRET, sleep, startEmulator, waitFor } from '../../support/helpers.js';
import { OwnRedis, REDIS_URL, redisAnswers, serviceAvailable } from '../../support/services.js';

// Four real processes (bench/cluster-instance.js: Express + licenseGuard on the built package),
// one Redis, the emulator over real HTTP.
const haveRedis = serviceAvailable('Redis', REDIS_URL, await redisAnswers());

let emulator: MotherEmulator;
let instances: ClusterInstance[] = [];
const start = (schedule: string, redisUrl = REDIS_URL) =>
  startInstances({ count: 4, baseUrl: emulator.url, apiKey: API_KEY, apiSecret: API_SECRET, redisUrl, schedule });

beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(() => emulator.close());
afterEach(() => {
  stopInstances(instances);
  instances = [];
  emulator.setFaults({});
  emulator.setPanel(API_KEY, { active: true, reason: null });
});

describe.skipIf(!haveRedis)('cluster mode across four processes', () => {
  it('locks and unlocks all four within a second of one refresh (p50/p99 over 10 flips)', async () => {
    instances = await start('0 0 1 1 *');
    const propagation = await measurePropagation({ emulator, instances, apiKey: API_KEY, flips: 10 });
    process.stderr.write(`lock propagation across 4 processes: p50 ${propagation.p50} ms, p99 ${propagation.p99} ms\n`);
    expect(propagation.max).toBeLessThan(1000);
  }, 60_000);

  it('checks once per slot, and another instance takes the next slot when the checker is killed', async () => {
    instances = await start('* * * * * *');
    const perSlot = await measureChecksPerSlot({ instances, seconds: 4 });
    expect(perSlot.calls).toBeLessThanOrEqual(perSlot.slots + 1);
    expect(perSlot.calls).toBeGreaterThanOrEqual(perSlot.slots - 1);
    const last = (instance: ClusterInstance) => instance.checks.at(-1) ?? 0;
    const holder = instances.reduce((a, b) => (last(a) >= last(b) ? a : b));
    holder.kill();
    const killedAt = Date.now();
    const survivors = instances.filter((instance) => instance !== holder);
    await waitFor(() => survivors.some((instance) => last(instance) > killedAt), 'a survivor checking the next slot', 3000);
    const after = await measureChecksPerSlot({ instances: survivors, seconds: 3 });
    expect(after.calls).toBeLessThanOrEqual(after.slots + 1);
  }, 60_000);

  describe('when Redis goes away', () => {
    let redis: OwnRedis;
    beforeAll(async () => {
      redis = await OwnRedis.create();
    });
    afterAll(() => redis.stop());

    it('no instance locks; each checks on its own and follows a real lock; Redis back: one checker', async () => {
      instances = await start('* * * * * *', redis.url);
      await redis.stop();
      await waitFor(async () => (await Promise.all(instances.map((i) => i.status()))).every((s) => s.store === 'unavailable'), 'store unavailable', 5000);
      const alone = await measureChecksPerSlot({ instances, seconds: 3 });
      // Every instance checks every slot on its own now.
      expect(alone.calls).toBeGreaterThanOrEqual(3 * alone.slots);
      expect(await Promise.all(instances.map((i) => i.page()))).toEqual([200, 200, 200, 200]);
      emulator.setPanel(API_KEY, { active: false, reason: 'Suspended' });
      await timeUntilAll(instances, 503, 4000);
      emulator.setPanel(API_KEY, { active: true, reason: null });
      await timeUntilAll(instances, 200, 4000);

      await redis.start();
      await waitFor(async () => (await Promise.all(instances.map((i) => i.status()))).every((s) => s.store === 'ok'), 'store back', 10_000);
      await sleep(1100);
      const together = await measureChecksPerSlot({ instances, seconds: 3 });
      expect(together.calls).toBeLessThanOrEqual(together.slots + 1);
    }, 60_000);
  });
});

// `maxPerSecond`: the pushes to one mother, counted where the mother counts them (the emulator's
// arrival times), whichever panels they are for. Never absolute times: the most requests that
// arrived within any one second, with a margin for the trip from the worker to the mother.
import { afterEach, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../../src/emulator/emulator.js';
import { createReleaseOutbox, type ReleaseOutbox } from '../../src/outbox/outbox.js';
import { memoryOutboxStore } from '../../src/outbox/stores/memory/memory-store.js';
import { clientFor, sleep, startEmulator, waitFor } from '../support/helpers.js';

const release = (title: string) => ({ title, primary_artist: 'Artist', remote_track_id: title });
const credentials = (name: string) => ({ apiKey: `pk_${name}`, apiSecret: `sk_${name}_0123456789` });
const quiet = { warn() {}, error() {} };
/**
 * Pushes start at least 1/maxPerSecond s apart; on their way to the mother one may be held up and
 * the next not, so a second of arrivals may hold one more (two on a loaded machine).
 */
const MARGIN = 2;

/** The most of `times` (ms) within any `windowMs` (a window starting at each time in turn). */
function mostInWindow(times: number[], windowMs = 1000): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let start = 0, end = 0; start < sorted.length; start++) {
    while (end < sorted.length && (sorted[end] as number) - (sorted[start] as number) < windowMs) end++;
    most = Math.max(most, end - start);
  }
  return most;
}

const arrivals = (mother: MotherEmulator, apiKeys?: string[]) =>
  mother.requests.filter((r) => r.endpoint === 'release.php' && (apiKeys === undefined || apiKeys.includes(r.apiKey))).map((r) => r.receivedAt);

const opened: (ReleaseOutbox | MotherEmulator)[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((each) => each.close()));
});

describe('createReleaseOutbox({ maxPerSecond })', () => {
  it('spaces one panel’s pushes: never more than maxPerSecond in a second, each release one attempt', async () => {
    const mother = await startEmulator();
    opened.push(mother);
    const outbox = createReleaseOutbox({ client: clientFor(mother), store: memoryOutboxStore(), maxPerSecond: 10, concurrency: 4, logger: quiet });
    opened.push(outbox);
    for (let n = 0; n < 30; n++) await outbox.enqueue(release(`track-${n}`));
    await outbox.drain();
    const times = arrivals(mother);
    expect(times).toHaveLength(30);
    expect(mostInWindow(times)).toBeLessThanOrEqual(10 + MARGIN);
    // 29 gaps of at least 100 ms at the worker; the trip to the mother may shorten the span a little.
    expect(Math.max(...times) - Math.min(...times)).toBeGreaterThanOrEqual(2500);
    // Waiting for a turn is not an attempt.
    const rows = await outbox.list({ state: 'delivered', limit: 100 });
    expect(rows.map((row) => row.attempts)).toEqual(Array(30).fill(1));
    if (process.env.SHOW_RATES) console.log('most in a second, one panel at 10/s:', mostInWindow(times));
  });

  it('shares one mother’s rate between the panels at it, in turn, and leaves the slots to another mother', async () => {
    const shared = await startEmulator(['a1', 'a2', 'a3'].map(credentials));
    const other = await startEmulator([credentials('b')]);
    opened.push(shared, other);
    const outbox = createReleaseOutbox({
      store: memoryOutboxStore(),
      baseUrl: shared.url,
      panels: { resolve: (panel) => ({ ...credentials(panel), ...(panel === 'b' ? { baseUrl: other.url } : {}) }) },
      maxPerSecond: 8,
      concurrency: 4,
      pollIntervalMs: 50,
      logger: quiet,
    });
    opened.push(outbox);
    for (const panel of ['a1', 'a2', 'a3']) for (let n = 0; n < 12; n++) await outbox.enqueue(release(`${panel}-${n}`), { panel });
    for (let n = 0; n < 8; n++) await outbox.enqueue(release(`b-${n}`), { panel: 'b' });
    await waitFor(async () => (await outbox.stats()).delivered === 44, 'every release delivered', 20_000);
    // One rate for the three panels at the shared mother (each alone would have had 8 a second).
    if (process.env.SHOW_RATES) console.log('most in a second, shared mother at 8/s:', mostInWindow(arrivals(shared)), 'other:', mostInWindow(arrivals(other)));
    expect(mostInWindow(arrivals(shared))).toBeLessThanOrEqual(8 + MARGIN);
    expect(mostInWindow(arrivals(other))).toBeLessThanOrEqual(8 + MARGIN);
    // The panels at the shared mother take turns: each has a fair part of its first 12 pushes.
    const first = shared.requests.filter((r) => r.endpoint === 'release.php').slice(0, 12);
    for (const panel of ['a1', 'a2', 'a3']) expect(first.filter((r) => r.apiKey === `pk_${panel}`).length).toBeGreaterThanOrEqual(2);
    // The other mother's releases did not wait in line behind the shared mother's: all 8 arrived
    // before its 17th push (they need 0.9 s at least; its 17th comes 2 s in at the earliest). With
    // the shared mother's rows claimed into every slot to wait there, the 8th came after its 20th.
    const sharedTimes = arrivals(shared).sort((a, b) => a - b);
    expect(Math.max(...arrivals(other))).toBeLessThan(sharedTimes[16] as number);
    const rows = await outbox.list({ state: 'delivered', limit: 100 });
    expect(rows.every((row) => row.attempts === 1)).toBe(true);
  });

  it('keeps Retry-After on top of the rate: a 429 holds its panel, and rows waiting for a turn meanwhile are not attempts', async () => {
    const mother = await startEmulator();
    opened.push(mother);
    // The mother answers 429 with Retry-After: 1 until 0.7 s after the first one.
    mother.setFaults({ endpoint: 'release.php', status: 429, retryAfterSeconds: 1 });
    const outbox = createReleaseOutbox({
      client: clientFor(mother),
      store: memoryOutboxStore(),
      maxPerSecond: 20,
      concurrency: 4,
      baseDelayMs: 100,
      logger: quiet,
    });
    opened.push(outbox);
    for (let n = 0; n < 20; n++) await outbox.enqueue(release(`track-${n}`));
    await waitFor(() => mother.requests.length > 0, 'the first push');
    await sleep(700);
    mother.setFaults({});
    await outbox.drain();
    const pushes = mother.requests.filter((r) => r.endpoint === 'release.php');
    const refused = pushes.filter((r) => r.status === 429);
    const first = pushes.find((r) => r.status === 200);
    expect(refused.length).toBeGreaterThanOrEqual(1);
    // Nothing went between the first 429 and the end of its Retry-After (not after the 100 ms back-off).
    expect((first?.receivedAt ?? 0) - (refused[0]?.receivedAt ?? 0)).toBeGreaterThanOrEqual(990);
    expect(mostInWindow(pushes.map((r) => r.receivedAt))).toBeLessThanOrEqual(20 + MARGIN);
    // Rows waiting for a turn when the hold began were put back unsent: every attempt counted is a
    // request the mother got.
    const rows = await outbox.list({ state: 'delivered', limit: 100 });
    expect(rows).toHaveLength(20);
    expect(rows.reduce((sum, row) => sum + row.attempts, 0)).toBe(pushes.length);
  });

  it('sends rows waiting for their turn back unsent at close(), none counted as an attempt', async () => {
    const mother = await startEmulator();
    opened.push(mother);
    const store = memoryOutboxStore();
    const outbox = createReleaseOutbox({ client: clientFor(mother), store, maxPerSecond: 0.5, concurrency: 4, logger: quiet });
    for (let n = 0; n < 4; n++) await outbox.enqueue(release(`track-${n}`));
    await waitFor(() => mother.releases.length === 1, 'the first push');
    // The three others wait 2, 4 and 6 s for their turns: close() does not wait for those.
    const closing = Date.now();
    await outbox.close();
    expect(Date.now() - closing).toBeLessThan(1500);
    const pending = await store.list({ state: 'pending', limit: 10 });
    expect(pending).toHaveLength(3);
    for (const row of pending) {
      expect(row.attempts).toBe(0);
      expect(row.lastError).toMatch(/waited for its turn/);
    }
    expect(arrivals(mother)).toHaveLength(1);
  });

  it('is kept by each outbox: two sharing a store and a mother, each given half, stay within the whole', async () => {
    const mother = await startEmulator();
    opened.push(mother);
    const store = memoryOutboxStore();
    // What two processes would do, each with its own outbox over one store: the mother takes 10 a second.
    const outboxes = [0, 1].map(() =>
      createReleaseOutbox({ client: clientFor(mother), store, maxPerSecond: 5, concurrency: 4, pollIntervalMs: 50, autoStart: false, logger: quiet }),
    );
    opened.push(...outboxes);
    for (let n = 0; n < 30; n++) await outboxes[0]?.enqueue(release(`track-${n}`));
    const delivered = outboxes.map((outbox) => {
      const count = { releases: 0 };
      outbox.on('delivered', () => count.releases++);
      outbox.start();
      return count;
    });
    await waitFor(() => mother.releases.length === 30, 'every release', 20_000);
    expect(mostInWindow(arrivals(mother))).toBeLessThanOrEqual(10 + MARGIN);
    // Both delivered: each at its own rate, so together faster than one alone could.
    expect(Math.min(...delivered.map((count) => count.releases))).toBeGreaterThanOrEqual(5);
  });

  it('refuses a limit that is not a positive finite number, or too low for the slots’ leases, naming the fix', () => {
    const base = {
      client: { pushSerializedRelease: async () => ({ ok: true as const, release_id: 1 }), panelId: 'p'.repeat(32), timeoutMs: 10_000 },
      file: ':memory:',
    };
    for (const maxPerSecond of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, '10' as unknown as number])
      expect(() => createReleaseOutbox({ ...base, maxPerSecond })).toThrow(
        /`maxPerSecond` must be a positive number of pushes per second.*leave it out for no limit/,
      );
    // Four slots at one push every 20 s: the last may wait 80 s, past its 60 s lease.
    expect(() => createReleaseOutbox({ ...base, maxPerSecond: 0.05 })).toThrow(
      /`maxPerSecond` \(0\.05\) is too low for `concurrency` 4.*Raise `maxPerSecond` to 0\.089 or more, lower `concurrency` to 2, or raise `leaseMs` to 95000/,
    );
    expect(() => createReleaseOutbox({ ...base, maxPerSecond: 0.05, concurrency: 2, autoStart: false }).close()).not.toThrow();
  });
});

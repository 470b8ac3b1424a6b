// A mother that hangs or fails holds every panel at it: its panels cost one probe at a time, and
// the healthy panels keep the slots.
import { afterEach, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../src/emulator/emulator.js';
import { createMemoryOutboxStore } from '../src/outbox/memory-store.js';
import { createReleaseOutbox, type ReleaseOutbox } from '../src/outbox/outbox.js';
import { sleep, startEmulator, waitFor } from './helpers.js';

const release = (title: string) => ({ title, primary_artist: 'Artist', remote_track_id: title });
const credentials = (name: string) => ({ apiKey: `pk_${name}`, apiSecret: `sk_${name}_0123456789` });
const HEALTHY = Array.from({ length: 10 }, (_, i) => `up-${i}`);
const DOWN = Array.from({ length: 20 }, (_, i) => `down-${i}`);

const opened: (ReleaseOutbox | MotherEmulator)[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((each) => each.close()));
});

describe('createReleaseOutbox({ panels }) with a failing mother', () => {
  it('holds a mother that hangs as a whole: one probe at a time, the healthy panels keep the slots, nothing counted for rows not sent', async () => {
    const healthy = await startEmulator(HEALTHY.map((name) => ({ ...credentials(name) })));
    const hanging = await startEmulator(DOWN.map((name) => ({ ...credentials(name) })));
    opened.push(healthy, hanging);
    hanging.setFaults({ delayMs: 60_000 });
    const pushes = { toHanging: 0 };
    const outbox = createReleaseOutbox({
      store: createMemoryOutboxStore(),
      baseUrl: healthy.url,
      timeoutMs: 300,
      concurrency: 4,
      baseDelayMs: 1500,
      maxDelayMs: 1500,
      pollIntervalMs: 20,
      random: () => 0.5,
      logger: { warn() {}, error() {} },
      fetch: (url, init) => {
        if (String(url).startsWith(hanging.url)) pushes.toHanging++;
        return globalThis.fetch(url, init);
      },
      panels: { resolve: (panel) => ({ ...credentials(panel), ...(panel.startsWith('down-') ? { baseUrl: hanging.url } : {}) }) },
    });
    opened.push(outbox);
    // The hanging mother's panels first: they are claimed first.
    for (const panel of DOWN) await outbox.enqueue(release(`${panel}-a`), { panel });
    for (const panel of HEALTHY) for (const n of [1, 2, 3]) await outbox.enqueue(release(`${panel}-${n}`), { panel });
    await waitFor(() => healthy.releases.length === 30, 'the healthy panels’ releases', 5000);
    // Before the first timeouts every slot may have gone there (4), and a slot freed by the first
    // one (a single panel's failure does not hold a mother) may send one more before the second
    // holds it; after that the mother is held as a whole: not one push per panel (20; 50 before).
    expect(pushes.toHanging).toBeLessThanOrEqual(6);
    hanging.setFaults({});
    await waitFor(() => hanging.releases.length === 20, 'the held panels’ releases once their mother answers', 10_000);
    // Rows put back unsent were not counted as attempts: one failed push at most, then the delivery.
    const rows = await outbox.list({ state: 'delivered', limit: 100 });
    for (const row of rows.filter((each) => each.panel.startsWith('down-'))) expect(row.attempts).toBeLessThanOrEqual(2);
    expect(pushes.toHanging).toBeLessThanOrEqual(6 + 1 + 20);
  });

  it('never holds a mother for one panel whose own release fails there: other panels keep delivering', async () => {
    const mother = await startEmulator(['p', 'q'].map((name) => ({ ...credentials(name) })));
    opened.push(mother);
    const poisoned = { pushes: 0 };
    const outbox = createReleaseOutbox({
      store: createMemoryOutboxStore(),
      baseUrl: mother.url,
      concurrency: 4,
      baseDelayMs: 50,
      maxDelayMs: 400,
      pollIntervalMs: 20,
      logger: { warn() {}, error() {} },
      // The mother fails on one release of panel p (a title it cannot take), whatever the panel's other releases.
      fetch: async (url, init) => {
        if (
          Buffer.from((init?.body as Uint8Array | undefined) ?? [])
            .toString()
            .includes('"poison"')
        ) {
          poisoned.pushes++;
          return new Response('<h1>500</h1>', { status: 500 });
        }
        return globalThis.fetch(url, init);
      },
      panels: { resolve: (panel) => credentials(panel) },
    });
    opened.push(outbox);
    await outbox.enqueue(release('poison'), { panel: 'p' });
    await waitFor(() => poisoned.pushes >= 1, 'the first failed push');
    for (const n of [1, 2, 3]) await outbox.enqueue(release(`q-${n}`), { panel: 'q' });
    await waitFor(() => mother.releases.length === 3, 'panel q’s releases, while p’s keeps failing', 5000);
    expect((await outbox.stats({ panel: 'q' })).pending).toBe(0);
  });

  it('gives the probe slots to held panels that have something to send, not to the first held', async () => {
    const first = await startEmulator([{ ...credentials('a') }]);
    const second = await startEmulator([{ ...credentials('b') }]);
    opened.push(first, second);
    const failedOnce = new Set<string>();
    const randoms = [0.99]; // a's retry: near the end of its window; every other delay near its start
    const outbox = createReleaseOutbox({
      store: createMemoryOutboxStore(),
      baseUrl: first.url,
      concurrency: 4, // one probe at a time
      baseDelayMs: 3000,
      maxDelayMs: 3000,
      pollIntervalMs: 20,
      random: () => randoms.shift() ?? 0.01,
      logger: { warn() {}, error() {} },
      // Each mother fails its first push (b's a little later), then answers.
      fetch: async (url, init) => {
        const which = String(url).startsWith(first.url) ? 'first' : 'second';
        if (!failedOnce.has(which)) {
          failedOnce.add(which);
          if (which === 'second') await sleep(100);
          return new Response('down', { status: 503 });
        }
        return globalThis.fetch(url, init);
      },
      panels: { resolve: (panel) => ({ ...credentials(panel), ...(panel === 'b' ? { baseUrl: second.url } : {}) }) },
    });
    opened.push(outbox);
    const began = Date.now();
    await outbox.enqueue(release('a-1'), { panel: 'a' });
    await outbox.enqueue(release('b-1'), { panel: 'b' });
    // a is held with nothing due for ~3 s; b's hold ends after ~30 ms and it must not wait for a.
    await waitFor(() => second.releases.length === 1, 'b’s release', 10_000);
    expect(Date.now() - began).toBeLessThan(1500);
  });
});

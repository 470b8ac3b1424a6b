// A mother that hangs or fails holds every panel at it: its panels cost one probe at a time, and
// the healthy panels keep the slots.
import { setTimeout } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../../../src/emulator/emulator.js';
import { createReleaseOutbox, type ReleaseOutbox } from '../../../src/outbox/outbox.js';
import { memoryOutboxStore } from '../../../src/outbox/stores/memory/memory-store.js';
import { sleep, startEmulator, waitFor } from '../../support/helpers.js';

const release = (title: string) => ({ title, primary_artist: 'Artist', remote_track_id: title });
const credentials = (name: string) => ({ apiKey: `pk_${name}`, apiSecret: `sk_${name}_0123456789` });
const HEALTHY = Array.from({ length: 10 }, (_, i) => `up-${i}`);
const DOWN = Array.from({ length: 20 }, (_, i) => `down-${i}`);

/** A fetch under which the mother hangs on releases whose body holds `marker`, until the client's timeout aborts. */
const hangingOn =
  (marker: string): typeof fetch =>
  async (url, init) => {
    if (
      Buffer.from((init?.body as Uint8Array | undefined) ?? [])
        .toString()
        .includes(marker)
    )
      await setTimeout(60_000, undefined, { signal: init?.signal ?? undefined });
    return globalThis.fetch(url, init);
  };

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
      store: memoryOutboxStore(),
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
    const began = Date.now();
    for (const panel of DOWN) await outbox.enqueue(release(`${panel}-a`), { panel });
    for (const panel of HEALTHY) for (const n of [1, 2, 3]) await outbox.enqueue(release(`${panel}-${n}`), { panel });
    await waitFor(() => healthy.releases.length === 30, 'the healthy panels’ releases', 5000);
    // Before the first timeouts every slot may have gone there (4), and a slot freed by the first
    // one (a single panel's failure does not hold a mother) may send one more before the second
    // holds it; after that the mother is held as a whole: one probe per hold (1.5 s), not one push
    // per panel (20; 50 before). On a slow machine more holds may have ended by now.
    expect(pushes.toHanging).toBeLessThanOrEqual(6 + Math.ceil((Date.now() - began) / 1500));
    hanging.setFaults({});
    await waitFor(() => hanging.releases.length === 20, 'the held panels’ releases once their mother answers', 10_000);
    await waitFor(async () => (await outbox.stats()).delivered === 50, 'every release recorded as delivered');
    // Rows put back unsent were not counted as attempts: the attempts of the held panels' rows
    // are exactly the pushes their mother got, and few failed.
    const rows = await outbox.list({ state: 'delivered', limit: 100 });
    const down = rows.filter((each) => each.panel.startsWith('down-'));
    expect(down.reduce((sum, row) => sum + row.attempts, 0)).toBe(pushes.toHanging);
    expect(pushes.toHanging - 20).toBeLessThanOrEqual(8);
  });

  it('never holds a mother for one panel whose own release fails there: other panels keep delivering', async () => {
    const mother = await startEmulator(['p', 'q'].map((name) => ({ ...credentials(name) })));
    opened.push(mother);
    const poisoned = { pushes: 0 };
    const outbox = createReleaseOutbox({
      store: memoryOutboxStore(),
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
    // Recorded as delivered (not only received: the mother gets a push before the outbox settles it).
    await waitFor(async () => (await outbox.stats({ panel: 'q' })).delivered === 3, 'panel q’s releases, while p’s keeps failing', 5000);
    expect(mother.releases).toHaveLength(3);
    expect((await outbox.stats({ panel: 'q' })).pending).toBe(0);
  });

  it('gives the probe slots to held panels that have something to send, not to the first held', async () => {
    const first = await startEmulator([{ ...credentials('a') }]);
    const second = await startEmulator([{ ...credentials('b') }]);
    opened.push(first, second);
    const failedOnce = new Set<string>();
    const randoms = [0.99]; // a's retry: near the end of its window; every other delay near its start
    const outbox = createReleaseOutbox({
      store: memoryOutboxStore(),
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

  it('shares the slots: a tenant whose releases hang keeps half of them while another has work', async () => {
    const mother = await startEmulator(['slow', 'busy'].map((name) => ({ ...credentials(name) })));
    opened.push(mother);
    const outbox = createReleaseOutbox({
      store: memoryOutboxStore(),
      baseUrl: mother.url,
      concurrency: 4,
      timeoutMs: 1000,
      pollIntervalMs: 20,
      autoStart: false,
      logger: { warn() {}, error() {} },
      fetch: hangingOn('"hang-'),
      panels: { resolve: (panel) => credentials(panel) },
    });
    opened.push(outbox);
    for (let n = 0; n < 20; n++) await outbox.enqueue(release(`hang-${n}`), { panel: 'slow' });
    for (let n = 0; n < 100; n++) await outbox.enqueue(release(`busy-${n}`), { panel: 'busy' });
    outbox.start();
    await sleep(800);
    // "slow" holds 2 of the 4 slots at most (its rows hang until the timeout), so "busy" keeps delivering.
    expect(mother.releases.filter((each) => each.apiKey === 'pk_busy').length).toBeGreaterThan(30);
  });

  it('leaves no slot idle for the share: a lone panel with a backlog uses every slot', async () => {
    const mother = await startEmulator([{ ...credentials('alone') }]);
    opened.push(mother);
    let inFlight = 0;
    let most = 0;
    const outbox = createReleaseOutbox({
      store: memoryOutboxStore(),
      baseUrl: mother.url,
      concurrency: 4,
      pollIntervalMs: 20,
      autoStart: false,
      logger: { warn() {}, error() {} },
      fetch: async (url, init) => {
        most = Math.max(most, ++inFlight);
        await sleep(20);
        try {
          return await globalThis.fetch(url, init);
        } finally {
          inFlight--;
        }
      },
      panels: { resolve: (panel) => credentials(panel) },
    });
    opened.push(outbox);
    for (let n = 0; n < 40; n++) await outbox.enqueue(release(`alone-${n}`), { panel: 'alone' });
    outbox.start();
    await waitFor(() => mother.releases.length === 40, 'the backlog');
    expect(most).toBe(4);
  });

  it('offers failing panels to claims only as probes may start: few rows claimed just to be put back', async () => {
    const mother = await startEmulator(['busy', ...DOWN].map((name) => ({ ...credentials(name) })));
    opened.push(mother);
    let putBack = 0;
    const outbox = createReleaseOutbox({
      store: memoryOutboxStore(),
      baseUrl: mother.url,
      concurrency: 4,
      timeoutMs: 300,
      baseDelayMs: 200,
      maxDelayMs: 200,
      pollIntervalMs: 20,
      logger: { warn() {}, error() {} },
      fetch: hangingOn('"hang-'),
      // Each DOWN panel at a mother of its own (a path of the emulator), hanging: no mother is held.
      panels: { resolve: (panel) => ({ ...credentials(panel), ...(panel.startsWith('down-') ? { baseUrl: `${mother.url}${panel}/` } : {}) }) },
    });
    opened.push(outbox);
    outbox.on('retrying', (event) => {
      if (event.attempts === 0) putBack++;
    });
    for (const panel of DOWN) await outbox.enqueue(release(`hang-${panel}`), { panel });
    for (let n = 0; n < 20; n++) await outbox.enqueue(release(`busy-${n}`), { panel: 'busy' });
    await sleep(3000);
    expect(mother.releases.filter((each) => each.apiKey === 'pk_busy')).toHaveLength(20);
    // 20 panels on 200 ms back-off for 3 s with one probe slot: put back every 200 ms, that was ~300.
    expect(putBack).toBeLessThan(40);
  });

  it('counts a blip once for a panel with many rows in flight: it goes on soon after the mother answers', async () => {
    const mother = await startEmulator([{ ...credentials('many') }]);
    opened.push(mother);
    let blip = true;
    const outbox = createReleaseOutbox({
      store: memoryOutboxStore(),
      baseUrl: mother.url,
      concurrency: 16,
      baseDelayMs: 200,
      maxDelayMs: 60_000,
      pollIntervalMs: 20,
      random: () => 0.5,
      logger: { warn() {}, error() {} },
      fetch: async (url, init) => {
        if (blip) {
          await sleep(50);
          return new Response('busy', { status: 503 });
        }
        return globalThis.fetch(url, init);
      },
      panels: { resolve: (panel) => credentials(panel) },
    });
    opened.push(outbox);
    for (let n = 0; n < 16; n++) await outbox.enqueue(release(`many-${n}`), { panel: 'many' });
    await sleep(300);
    blip = false;
    // One failure in a row, not 16: the panel's hold is about one base delay, not 200 ms × 2^15.
    await waitFor(() => mother.releases.length === 16, 'the releases after one blip', 5000);
  });
});

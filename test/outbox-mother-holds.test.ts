// A mother that hangs or fails holds every panel at it: its panels cost one probe at a time, and
// the healthy panels keep the slots.
import { afterEach, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../src/emulator/emulator.js';
import { createMemoryOutboxStore } from '../src/outbox/memory-store.js';
import { createReleaseOutbox, type ReleaseOutbox } from '../src/outbox/outbox.js';
import { startEmulator, waitFor } from './helpers.js';

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
    // Before the first timeout at most every slot went there; after it, the mother is held as a
    // whole: not one push per panel (20).
    expect(pushes.toHanging).toBeLessThanOrEqual(4);
    hanging.setFaults({});
    await waitFor(() => hanging.releases.length === 20, 'the held panels’ releases once their mother answers', 10_000);
    // Rows put back unsent were not counted as attempts: one failed push at most, then the delivery.
    const rows = await outbox.list({ state: 'delivered', limit: 100 });
    for (const row of rows.filter((each) => each.panel.startsWith('down-'))) expect(row.attempts).toBeLessThanOrEqual(2);
    expect(pushes.toHanging).toBeLessThanOrEqual(4 + 1 + 20);
  });
});

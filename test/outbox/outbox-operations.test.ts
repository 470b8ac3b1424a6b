// What an operator does to a running outbox — pause and resume, cancel a release or a track's,
// read every delivery — over real HTTP to the emulator, on every store. Two outboxes on one store
// stand for two processes: each reads the pauses from the store on its own.
import { afterEach, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../../src/emulator/emulator.js';
import type { CancelledEvent, PauseEvent } from '../../src/outbox/events.js';
import { createReleaseOutbox, type ReleaseOutbox } from '../../src/outbox/outbox.js';
import type { OutboxStore } from '../../src/outbox/store.js';
import { STORE_KINDS, type TestStore } from '../support/four-stores.js';
import { sleep, startEmulator, waitFor } from '../support/helpers.js';

const credentials = (name: string) => ({ apiKey: `pk_${name}`, apiSecret: `sk_${name}_0123456789` });
const release = (title: string, track = title) => ({ title, primary_artist: 'Artist', remote_track_id: track });
/** Long enough for a few polls and a pause refresh: what a paused outbox must not send in. */
const QUIET_MS = 1_300;

const opened: { close(): Promise<void> | void }[] = [];
afterEach(async () => {
  for (const each of opened.splice(0).reverse()) await each.close();
});

// Every built-in store offers the operations: all of them run the suite.
const operated = STORE_KINDS;

async function mother(names = ['a', 'b']): Promise<MotherEmulator> {
  const emulator = await startEmulator(names.map(credentials));
  opened.push(emulator);
  return emulator;
}

function outboxOn(store: OutboxStore, emulator: MotherEmulator, extra: Partial<Parameters<typeof createReleaseOutbox>[0]> = {}): ReleaseOutbox {
  const outbox = createReleaseOutbox({
    store,
    baseUrl: emulator.url,
    panels: { resolve: (panel) => credentials(panel) },
    pollIntervalMs: 20,
    baseDelayMs: 50,
    maxDelayMs: 100,
    random: () => 0.5,
    retention: false,
    logger: { warn() {}, error() {} },
    ...extra,
  } as Parameters<typeof createReleaseOutbox>[0]);
  opened.push(outbox);
  return outbox;
}

const titles = (emulator: MotherEmulator) => emulator.releases.map((r) => r.release.title).sort();

describe.each(operated)('on the %s store', (_kind, make) => {
  const fresh = (): OutboxStore => {
    const made: TestStore = make();
    opened.push(made);
    return made.store;
  };

  it('pauses the whole outbox in every process sharing the store, keeps releases waiting, then delivers all on resume', async () => {
    const emulator = await mother();
    const store = fresh();
    const first = outboxOn(store, emulator);
    const second = outboxOn(store, emulator);
    const seen: PauseEvent[] = [];
    first.on('paused', (event) => seen.push(event)).on('resumed', (event) => seen.push(event));
    await first.pause();
    await waitFor(async () => (await second.stats()).paused, 'the second outbox to read the pause', 5_000);
    await second.enqueue(release('while-paused-1'), { panel: 'a' });
    await first.enqueue(release('while-paused-2'), { panel: 'b' });
    await sleep(QUIET_MS);
    expect(emulator.releases).toHaveLength(0);
    expect(await second.paused()).toEqual({ all: true, panels: [] });
    await first.resume();
    await waitFor(() => emulator.releases.length === 2, 'both releases after the resume', 5_000);
    expect(titles(emulator)).toEqual(['while-paused-1', 'while-paused-2']);
    expect(seen).toEqual([{ panel: undefined }, { panel: undefined }]);
  });

  it('pauses one panel only: its releases wait while other panels deliver; a restart keeps the pause', async () => {
    const emulator = await mother();
    const store = fresh();
    const first = outboxOn(store, emulator);
    await first.pause({ panel: 'a' });
    await first.enqueue(release('a-1'), { panel: 'a' });
    await first.enqueue(release('b-1'), { panel: 'b' });
    await waitFor(() => emulator.releases.length === 1, "panel b's release", 5_000);
    await first.close();
    // A restart: a new outbox on the same store reads the pause before it claims anything.
    const restarted = outboxOn(store, emulator);
    await restarted.enqueue(release('a-2'), { panel: 'a' });
    await sleep(QUIET_MS);
    expect(titles(emulator)).toEqual(['b-1']);
    expect(await restarted.stats({ panel: 'a' })).toMatchObject({ paused: true, pending: 2 });
    expect(await restarted.stats({ panel: 'b' })).toMatchObject({ paused: false });
    await restarted.resume({ panel: 'a' });
    await waitFor(() => emulator.releases.length === 3, "panel a's releases after the resume", 5_000);
  });

  it('cancels a waiting release and a deleted track: never sent, said once, counted', async () => {
    const emulator = await mother();
    const outbox = outboxOn(fresh(), emulator);
    const cancelled: CancelledEvent[] = [];
    outbox.on('cancelled', (event) => cancelled.push(event));
    await outbox.pause();
    const kept = await outbox.enqueue(release('kept'), { panel: 'a' });
    const dropped = await outbox.enqueue(release('dropped'), { panel: 'a' });
    await outbox.enqueue(release('deleted-by-artist', 'track-9'), { panel: 'b' });
    await expect(outbox.cancel(dropped.id, { reason: 'wrong artwork' })).resolves.toEqual({ outcome: 'cancelled', id: dropped.id, releaseId: undefined });
    await expect(outbox.cancelTrack('track-9', { panel: 'b' })).resolves.toMatchObject({ outcome: 'cancelled' });
    await expect(outbox.cancelTrack('track-9', { panel: 'b' })).resolves.toMatchObject({ outcome: 'already-cancelled' });
    await expect(outbox.cancelTrack('track-9', { panel: 'a' })).resolves.toMatchObject({ outcome: 'not-found' });
    await outbox.resume();
    await waitFor(() => emulator.releases.length === 1, 'the release not cancelled', 5_000);
    await sleep(200);
    expect(titles(emulator)).toEqual(['kept']);
    expect(cancelled.map((e) => [e.id, e.panel, e.reason])).toEqual([
      [dropped.id, 'a', 'wrong artwork'],
      [expect.any(Number), 'b', 'cancelled by an operator'],
    ]);
    expect(await outbox.stats()).toMatchObject({ delivered: 1, cancelled: 2, pending: 0 });
    await expect(outbox.cancel(kept.id)).resolves.toMatchObject({ outcome: 'delivered', releaseId: emulator.releases[0]?.releaseId });
    expect(() => outbox.cancelTrack('track-9')).toThrow(/needs `\{ panel \}`/);
  });

  it('waits for an attempt in flight: cancelled when it failed, "delivered" when the mother took it', async () => {
    const emulator = await mother();
    const outbox = outboxOn(fresh(), emulator, { baseDelayMs: 2_000, maxDelayMs: 2_000 });
    emulator.setFaults({ delayMs: 400, status: 503 });
    const failing = await outbox.enqueue(release('failing'), { panel: 'a' });
    await waitFor(async () => (await outbox.list({ panel: 'a' }))[0]?.leased, 'the attempt in flight');
    await expect(outbox.cancel(failing.id, { wait: false })).resolves.toMatchObject({ outcome: 'in-flight' });
    await expect(outbox.cancel(failing.id)).resolves.toMatchObject({ outcome: 'cancelled' });
    emulator.setFaults({ delayMs: 400 });
    const taken = await outbox.enqueue(release('taken'), { panel: 'a' });
    await waitFor(async () => (await outbox.list({ panel: 'a', state: 'pending' }))[0]?.leased, 'the second attempt in flight');
    const answer = await outbox.cancel(taken.id);
    expect(answer).toMatchObject({ outcome: 'delivered', id: taken.id });
    expect(answer.releaseId).toBe(emulator.releases.find((r) => r.release.title === 'taken')?.releaseId);
    expect(titles(emulator)).toEqual(['taken']);
  });

  it('feeds every delivery once, in the order recorded, and holds retention for a named feed until it has read past', async () => {
    const emulator = await mother();
    const outbox = outboxOn(fresh(), emulator, { retention: { deliveredMs: 1, deadMs: 1, intervalMs: 3_600_000 } });
    // Releases without a track: the latest delivery of a track is kept whatever the feeds read.
    for (let n = 0; n < 7; n++) await outbox.enqueue({ title: `r-${n}`, primary_artist: 'Artist' }, { panel: n % 2 ? 'a' : 'b' });
    await outbox.drain({ signal: AbortSignal.timeout(10_000) });
    const firstPage = await outbox.deliveries({ feed: 'release-ids', limit: 4 });
    expect(firstPage.deliveries).toHaveLength(4);
    await sleep(5);
    await outbox.prune(); // the feed acknowledged nothing yet: every delivery stays
    expect((await outbox.stats()).delivered).toBe(7);
    const secondPage = await outbox.deliveries({ feed: 'release-ids', after: firstPage.cursor, limit: 4 });
    expect(secondPage.deliveries).toHaveLength(3);
    const fed = [...firstPage.deliveries, ...secondPage.deliveries];
    expect(fed.map((d) => d.releaseId).sort()).toEqual(emulator.releases.map((r) => r.releaseId).sort());
    expect(new Set(fed.map((d) => d.position)).size).toBe(7);
    await outbox.prune(); // acknowledged up to the first page's cursor: those four may go
    expect((await outbox.stats()).delivered).toBe(3);
    await expect(outbox.deliveries({ feed: 'release-ids', after: secondPage.cursor })).resolves.toEqual({ deliveries: [], cursor: secondPage.cursor });
    await outbox.prune();
    expect((await outbox.stats()).delivered).toBe(0);
    await outbox.forgetFeed('release-ids');
    await expect(outbox.deliveries({ feed: 'no spaces' })).rejects.toThrow(/`feed` must be a name/);
    await expect(outbox.deliveries({ after: -1 })).rejects.toThrow(/`after` must be a feed position/);
  });
});

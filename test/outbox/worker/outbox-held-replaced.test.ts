import { afterEach, describe, expect, it } from 'vitest';
import type { DeliveredEvent } from '../../../src/outbox/events.js';
import { createReleaseOutbox, type ReleaseOutbox } from '../../../src/outbox/outbox.js';
import type { OutboxStore } from '../../../src/outbox/store.js';
import { FRESH_MS } from '../../../src/outbox/worker/held-rows.js';
import { STORE_KINDS, type TestStore } from '../../support/four-stores.js';
import { sleep, waitFor } from '../../support/helpers.js';
import { gatedSender } from '../../support/worker-fakes.js';

// With every slot busy, the worker holds rows it claimed ahead (or was handed by an enqueue) until
// a slot frees up. A newer upload of such a row's track replaces its payload in the store; the
// mother must then get only the newest content, never the old one followed by the new.
const silent = { warn() {}, error() {} };
const opened: { outboxes: ReleaseOutbox[]; test: TestStore }[] = [];
afterEach(async () => {
  for (const { outboxes, test } of opened.splice(0)) {
    for (const outbox of outboxes) await outbox.close();
    await test.close();
  }
});

const titleOf = (body: string) => (JSON.parse(body) as { release: { title: string } }).release.title;
const trackOf = (body: string) => (JSON.parse(body) as { release: { remote_track_id: string } }).release.remote_track_id;

/** An outbox at concurrency 2 whose pushes wait at a gate, with its 'delivered' events. */
function busyOutbox(test: TestStore, options: { autoStart?: boolean } = {}) {
  const gate = gatedSender();
  const outbox = createReleaseOutbox({ client: gate.sender, store: test.store, concurrency: 2, logger: silent, ...options });
  const delivered: DeliveredEvent[] = [];
  outbox.on('delivered', (event) => delivered.push(event));
  return { gate, outbox, delivered };
}

/** The row's lease holder as stored: set once the row is claimed (or handed off) and held. */
async function leaseOf(store: OutboxStore, id: number): Promise<string | undefined> {
  return (await store.list({ state: 'pending', id, limit: 1 }))[0]?.leaseOwner;
}

describe.each(STORE_KINDS)('the outbox on the %s store, with every slot busy', (_kind, create) => {
  it('sends a release claimed ahead and then replaced by this process only in its newest version', async () => {
    const test = create();
    const { gate, outbox, delivered } = busyOutbox(test, { autoStart: false });
    opened.push({ outboxes: [outbox], test });
    const ids: number[] = [];
    for (let i = 0; i < 6; i++) ids.push((await outbox.enqueue({ title: `Track ${i} v1`, remote_track_id: `t-${i}` })).id);
    outbox.start();
    await waitFor(() => gate.active() === 2, 'both slots busy');
    // t-4 waits in the worker, claimed ahead.
    await waitFor(async () => (await leaseOf(test.store, ids[4] as number)) !== undefined, 't-4 claimed ahead');
    expect(await outbox.enqueue({ title: 'Track 4 v2', remote_track_id: 't-4' })).toMatchObject({ id: ids[4], deduplicated: 'replaced-pending' });
    gate.open();
    await outbox.drain({ signal: AbortSignal.timeout(10_000) });
    expect(gate.bodies.filter((body) => trackOf(body) === 't-4').map(titleOf)).toEqual(['Track 4 v2']);
    expect(gate.bodies).toHaveLength(6);
    expect(delivered.filter((event) => event.id === ids[4])).toMatchObject([{ superseded: false }]);
  });

  it('sends a release enqueued while the slots are busy (handed off or claimed) and then replaced only in its newest version', async () => {
    const test = create();
    const { gate, outbox, delivered } = busyOutbox(test);
    opened.push({ outboxes: [outbox], test });
    await outbox.drain();
    for (let i = 0; i < 2; i++) await outbox.enqueue({ title: `Busy ${i}`, remote_track_id: `busy-${i}` });
    await waitFor(() => gate.active() === 2, 'both slots busy');
    const { id } = await outbox.enqueue({ title: 'Song v1', remote_track_id: 'song' });
    await waitFor(async () => (await leaseOf(test.store, id)) !== undefined, 'the release held by the worker');
    await outbox.enqueue({ title: 'Song v2', remote_track_id: 'song' });
    gate.open();
    await outbox.drain({ signal: AbortSignal.timeout(10_000) });
    expect(gate.bodies.filter((body) => trackOf(body) === 'song').map(titleOf)).toEqual(['Song v2']);
    expect(delivered.filter((event) => event.id === id)).toMatchObject([{ superseded: false }]);
  });

  it('sends a release claimed ahead and then replaced by another process only in its newest version, once it waited', async () => {
    const test = create();
    const { gate, outbox } = busyOutbox(test, { autoStart: false });
    // Another process's outbox on the same store: this worker hears nothing of its enqueues.
    const other = busyOutbox(test, { autoStart: false }).outbox;
    opened.push({ outboxes: [outbox, other], test });
    const ids: number[] = [];
    for (let i = 0; i < 6; i++) ids.push((await outbox.enqueue({ title: `Track ${i} v1`, remote_track_id: `t-${i}` })).id);
    outbox.start();
    await waitFor(() => gate.active() === 2, 'both slots busy');
    await waitFor(async () => (await leaseOf(test.store, ids[4] as number)) !== undefined, 't-4 claimed ahead');
    expect(await other.enqueue({ title: 'Track 4 v2', remote_track_id: 't-4' })).toMatchObject({ id: ids[4], deduplicated: 'replaced-pending' });
    // Held longer than a claim's round trip (FRESH_MS): the worker reads its rows again before sending them.
    await sleep(FRESH_MS * 3);
    gate.open();
    await outbox.drain({ signal: AbortSignal.timeout(10_000) });
    expect(gate.bodies.filter((body) => trackOf(body) === 't-4').map(titleOf)).toEqual(['Track 4 v2']);
    expect(gate.bodies).toHaveLength(6);
  });

  it('lets go, unsent, a release claimed ahead that another worker recorded meanwhile', async () => {
    const test = create();
    const { gate, outbox, delivered } = busyOutbox(test, { autoStart: false });
    opened.push({ outboxes: [outbox], test });
    const ids: number[] = [];
    for (let i = 0; i < 6; i++) ids.push((await outbox.enqueue({ title: `Track ${i}`, remote_track_id: `t-${i}` })).id);
    outbox.start();
    await waitFor(() => gate.active() === 2, 'both slots busy');
    await waitFor(async () => (await leaseOf(test.store, ids[4] as number)) !== undefined, 't-4 claimed ahead');
    const [held] = await test.store.list({ state: 'pending', id: ids[4], limit: 1 });
    const claim = { ...(held as NonNullable<typeof held>), attempts: 0 };
    // Another worker's late answer (its lease had run out): the mother has it already.
    expect(await test.store.settle(claim, 'another-worker', { kind: 'delivered', releaseId: 99 }, Date.now())).toBe('applied');
    await sleep(FRESH_MS * 3);
    gate.open();
    await outbox.drain({ signal: AbortSignal.timeout(10_000) });
    expect(gate.bodies.map(trackOf).sort()).toEqual(['t-0', 't-1', 't-2', 't-3', 't-5']);
    expect(delivered.map((event) => event.id)).not.toContain(ids[4]);
  });
});

describe('the outbox, when reading its waiting rows again fails', () => {
  it('says so, keeps them waiting rather than send what may be outdated, and sends each once the store answers', async () => {
    const [, create] = STORE_KINDS[0] as (typeof STORE_KINDS)[number];
    const test = create();
    const recheck = test.store.recheck?.bind(test.store);
    if (!recheck) throw new Error('every built-in store has recheck()');
    let failures = 0;
    const failing: OutboxStore = Object.assign(Object.create(test.store) as OutboxStore, {
      async recheck(...args: Parameters<typeof recheck>) {
        if (failures++ === 0) throw new Error('database unreachable');
        return recheck(...args);
      },
    });
    const { gate, outbox } = busyOutbox({ ...test, store: failing }, { autoStart: false });
    opened.push({ outboxes: [outbox], test });
    const errors: string[] = [];
    outbox.on('error', (event) => errors.push(event.error.message));
    for (let i = 0; i < 6; i++) await outbox.enqueue({ title: `Track ${i}`, remote_track_id: `t-${i}` });
    outbox.start();
    await waitFor(() => gate.active() === 2, 'both slots busy');
    await sleep(FRESH_MS * 3);
    gate.open();
    await outbox.drain({ signal: AbortSignal.timeout(10_000) });
    expect(errors).toEqual(['database unreachable']);
    expect(failures).toBeGreaterThan(1);
    expect(gate.bodies.map(trackOf).sort()).toEqual(['t-0', 't-1', 't-2', 't-3', 't-4', 't-5']);
  });
});

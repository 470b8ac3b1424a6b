import { afterEach, describe, expect, it } from 'vitest';
import type { ClaimedRow, NewOutboxRow, OutboxStore } from '../../../../src/outbox/store.js';
import { STORE_KINDS, type TestStore } from '../../../support/four-stores.js';

// What operators ask of every store — cancel, controls every process shares, the feed of
// deliveries and retention held for it — one suite, so no store can differ.
const T0 = 1_700_000_000_000;
const LEASE = 60_000;
const A = 'worker-a';

function row(panel: string, title: string, track?: string): NewOutboxRow {
  const body = JSON.stringify({ release: { title, ...(track === undefined ? {} : { remote_track_id: track }) } });
  return { panel, remoteTrackId: track, body, contentHash: `hash:${body}` };
}

const open: TestStore[] = [];
afterEach(async () => {
  for (const made of open.splice(0)) await made.close();
});

/** Claims every due row of `panel` and records each delivered, in the order given by `order` (ids). */
async function deliver(store: OutboxStore, panel: string, order: number[], atMs: number): Promise<void> {
  const claimed = await store.claimDue({ panel, owner: A, limit: 100, nowMs: atMs, leaseMs: LEASE });
  const byId = new Map(claimed.map((c) => [c.id, c]));
  let at = atMs;
  for (const id of order) {
    const claim = byId.get(id) as ClaimedRow;
    expect(claim, `row ${id} claimed`).toBeDefined();
    await store.settle(claim, A, { kind: 'delivered', releaseId: 1000 + id }, ++at);
  }
  // The others go back unsent, due at once.
  for (const claim of claimed)
    if (!order.includes(claim.id)) await store.settle(claim, A, { kind: 'retry', nextAttemptAt: atMs, error: 'not now', notSent: true }, atMs);
}

const cancel = (store: OutboxStore, request: Parameters<NonNullable<OutboxStore['cancel']>>[0]) => Promise.resolve(store.cancel?.(request));

// Every built-in store offers the operations: all of them run the suite.
const operated = STORE_KINDS;

describe.each(operated)('%s store', (_kind, make) => {
  const fresh = () => {
    const made = make('outbox');
    open.push(made);
    return made.store;
  };

  it('cancels a pending release no worker holds: never claimed, counted and listed as cancelled, with the reason', async () => {
    const store = fresh();
    const { id } = await store.enqueue(row('p1', 'One', 't1'), T0);
    await expect(cancel(store, { id, nowMs: T0 + 1, note: 'artist deleted the track' })).resolves.toMatchObject({
      result: 'cancelled',
      id,
      state: 'cancelled',
    });
    expect(await store.claimDue({ panel: 'p1', owner: A, limit: 10, nowMs: T0 + 2, leaseMs: LEASE })).toEqual([]);
    expect(await store.counts({ panel: 'p1' })).toMatchObject({ pending: 0, cancelled: 1 });
    const [listed] = await store.list({ state: 'cancelled', limit: 10, panel: 'p1' });
    expect(listed).toMatchObject({ id, state: 'cancelled', lastError: 'artist deleted the track' });
    await expect(cancel(store, { id, nowMs: T0 + 3, note: 'again' })).resolves.toMatchObject({ result: 'not-pending', state: 'cancelled' });
    expect(await store.panelCounts?.(10)).toEqual([]);
  });

  it('leaves a release a worker holds alone (in-flight, until its lease ends), then cancels it once the lease ran out', async () => {
    const store = fresh();
    const { id } = await store.enqueue(row('p1', 'One', 't1'), T0);
    const [claim] = await store.claimDue({ panel: 'p1', owner: A, limit: 1, nowMs: T0, leaseMs: LEASE });
    expect(claim?.id).toBe(id);
    await expect(cancel(store, { id, nowMs: T0 + 10, note: 'stop' })).resolves.toMatchObject({ result: 'in-flight', id, leaseExpiresAt: T0 + LEASE });
    expect((await store.list({ state: 'pending', limit: 10 })).map((r) => r.id)).toEqual([id]);
    await expect(cancel(store, { id, nowMs: T0 + LEASE + 1, note: 'stop' })).resolves.toMatchObject({ result: 'cancelled' });
    // The old holder's late outcome is not its to record any more.
    expect(await store.settle(claim as ClaimedRow, A, { kind: 'retry', nextAttemptAt: T0 + LEASE + 5, error: 'timeout' }, T0 + LEASE + 2)).toBe('stale');
    expect((await store.list({ state: undefined, limit: 10, id }))[0]?.state).toBe('cancelled');
  });

  it("cancels a track's pending release in its own panel only, and says what a track's newest row is when none is pending", async () => {
    const store = fresh();
    const mine = await store.enqueue(row('p1', 'Mine', 'shared-track'), T0);
    const theirs = await store.enqueue(row('p2', 'Theirs', 'shared-track'), T0);
    await expect(cancel(store, { panel: 'p1', track: 'shared-track', nowMs: T0 + 1, note: 'deleted' })).resolves.toMatchObject({
      result: 'cancelled',
      id: mine.id,
    });
    expect((await store.list({ state: 'pending', limit: 10 })).map((r) => r.id)).toEqual([theirs.id]);
    await deliver(store, 'p2', [theirs.id], T0 + 2);
    await expect(cancel(store, { panel: 'p2', track: 'shared-track', nowMs: T0 + 9, note: 'x' })).resolves.toMatchObject({
      result: 'not-pending',
      id: theirs.id,
      state: 'delivered',
      releaseId: 1000 + theirs.id,
    });
    await expect(cancel(store, { panel: 'p1', track: 'no-such-track', nowMs: T0, note: 'x' })).resolves.toMatchObject({ result: 'not-found', id: undefined });
    await expect(cancel(store, { id: theirs.id, panel: 'p1', nowMs: T0, note: 'x' })).resolves.toMatchObject({ result: 'not-found' });
    await expect(cancel(store, { id: 999_999, nowMs: T0, note: 'x' })).resolves.toMatchObject({ result: 'not-found' });
  });

  it('queues the track again after a cancel, and never brings a cancelled release back with a retry of the dead', async () => {
    const store = fresh();
    const first = await store.enqueue(row('p1', 'One', 't1'), T0);
    await store.cancel?.({ id: first.id, nowMs: T0 + 1, note: 'oops' });
    const again = await store.enqueue(row('p1', 'One', 't1'), T0 + 2);
    expect(again).toMatchObject({ state: 'pending', deduplicated: undefined });
    expect(again.id).not.toBe(first.id);
    expect(await store.requeueDead(undefined, T0 + 3)).toBe(0);
    expect((await store.list({ state: 'cancelled', limit: 10 })).map((r) => r.id)).toEqual([first.id]);
  });

  it('lets exactly one of a claim and a cancel racing for a release win, round after round', async () => {
    const store = fresh();
    for (let round = 0; round < 12; round++) {
      const { id } = await store.enqueue(row('p1', `R${round}`, `race-${round}`), T0 + round);
      const [claimed, cancelled] = await Promise.all([
        store.claimDue({ panel: 'p1', owner: A, limit: 1, nowMs: T0 + round, leaseMs: LEASE }),
        store.cancel?.({ id, nowMs: T0 + round, note: 'race' }),
      ]);
      const took = claimed.some((c) => c.id === id);
      expect(took ? 'in-flight' : 'cancelled').toBe(cancelled?.result);
      if (took) await store.settle(claimed[0] as ClaimedRow, A, { kind: 'delivered', releaseId: round }, T0 + round);
    }
  });

  it('keeps control values for every process: set, replace, remove; refuses a name too long', async () => {
    const store = fresh();
    expect(await store.controls?.()).toEqual({});
    await store.setControl?.('pause', '1', T0);
    await store.setControl?.('pause:p1', '1', T0);
    await store.setControl?.('feed:ids', '5', T0);
    await store.setControl?.('feed:ids', '7', T0 + 1);
    await store.setControl?.('pause', undefined, T0 + 2);
    expect(await store.controls?.()).toEqual({ 'pause:p1': '1', 'feed:ids': '7' });
    const panel = `p${'é'.repeat(199)}`;
    await store.setControl?.(`pause:${panel}`, '1', T0);
    expect((await store.controls?.())?.[`pause:${panel}`]).toBe('1');
    await expect(async () => store.setControl?.('x'.repeat(221), '1', T0)).rejects.toThrow(/220/);
  });

  it('gives deliveries feed positions in the order they were recorded, not id order, and only deliveries', async () => {
    const store = fresh();
    const ids = [];
    for (const title of ['A', 'B', 'C', 'D']) ids.push((await store.enqueue(row('p1', title, `t-${title}`), T0)).id);
    const [a, b, c, d] = ids as [number, number, number, number];
    await deliver(store, 'p1', [c, a], T0 + 10);
    const first = (await store.deliveries?.({ after: 0, limit: 10 })) ?? [];
    expect(first.map((r) => r.id)).toEqual([c, a]);
    expect(first[0]).toMatchObject({ panel: 'p1', remoteTrackId: 't-C', releaseId: 1000 + c });
    expect(first[1]?.position).toBeGreaterThan(first[0]?.position as number);
    await store.cancel?.({ id: d, nowMs: T0 + 20, note: 'gone' });
    await deliver(store, 'p1', [b], T0 + 30);
    await store.enqueue(row('p2', 'Other panel', 't-x'), T0 + 40);
    const other = (await store.list({ state: 'pending', limit: 10, panel: 'p2' }))[0]?.id as number;
    await deliver(store, 'p2', [other], T0 + 41);
    const cursor = first[1]?.position as number;
    const rest = (await store.deliveries?.({ after: cursor, limit: 10 })) ?? [];
    expect(rest.map((r) => r.id)).toEqual([b, other]);
    expect((await store.deliveries?.({ after: cursor, limit: 10, panel: 'p2' }))?.map((r) => r.id)).toEqual([other]);
    expect((await store.deliveries?.({ after: cursor, limit: 1 }))?.map((r) => r.id)).toEqual([b]);
    // Read again, nothing moves: positions are given once.
    expect(await store.deliveries?.({ after: 0, limit: 10 })).toEqual([...first, ...rest]);
  });

  it('keeps, for a feed, every delivered release it has not read past; prunes cancelled ones like dead ones', async () => {
    const store = fresh();
    const ids = [];
    for (const title of ['A', 'B', 'C']) ids.push((await store.enqueue(row('p1', title), T0)).id);
    const [a, b, c] = ids as [number, number, number];
    await deliver(store, 'p1', [a, b], T0 + 1);
    const cancelled = (await store.enqueue(row('p1', 'Z'), T0 + 2)).id;
    await store.cancel?.({ id: cancelled, nowMs: T0 + 3, note: 'no' });
    const positions = (await store.deliveries?.({ after: 0, limit: 10 })) ?? [];
    await deliver(store, 'p1', [c], T0 + 4); // delivered after the read: no position yet
    const prune = (feedHold: number | undefined) => store.prune?.({ deliveredBefore: T0 + 1_000, deadBefore: T0 + 1_000, afterId: 0, limit: 100, feedHold });
    await prune(positions[0]?.position);
    expect((await store.list({ state: undefined, limit: 10 })).map((r) => r.id)).toEqual([b, c]);
    await prune(Number.MAX_SAFE_INTEGER);
    expect((await store.list({ state: undefined, limit: 10 })).map((r) => r.id)).toEqual([c]);
    expect((await store.deliveries?.({ after: 0, limit: 10 }))?.map((r) => r.id)).toEqual([c]);
    await prune(undefined);
    expect(await store.list({ state: undefined, limit: 10 })).toEqual([]);
  });
});

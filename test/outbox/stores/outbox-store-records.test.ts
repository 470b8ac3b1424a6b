import { afterEach, describe, expect, it } from 'vitest';
import type { ClaimedRow, NewOutboxRow, OutboxStore } from '../../../src/outbox/store.js';
import { STORE_KINDS, type TestStore } from '../../support/four-stores.js';

// The store contract for what a worker records and holds, on every built-in store: an outcome
// recorded again after its answer was lost, and the rows a worker holds read again (recheck).
const T0 = 1_700_000_000_000;
const A = 'worker-a';
const B = 'worker-b';
const opened: TestStore[] = [];
afterEach(async () => {
  for (const test of opened.splice(0)) await test.close();
});

function row(title: string, remoteTrackId?: string): NewOutboxRow {
  const body = JSON.stringify({ release: { title, ...(remoteTrackId === undefined ? {} : { remote_track_id: remoteTrackId }) } });
  return { panel: 'panel-a', remoteTrackId, body, contentHash: `hash:${body}` };
}

const claim = async (store: OutboxStore): Promise<ClaimedRow[]> => store.claimDue({ panel: 'panel-a', owner: A, limit: 10, nowMs: T0, leaseMs: 60_000 });

describe.each(STORE_KINDS)('the %s store', (_kind, create) => {
  const make = () => {
    const test = create('outbox');
    opened.push(test);
    return test.store;
  };

  describe('when settling', () => {
    it('answers applied when the same worker records the same outcome again (its answer lost after the commit), and stale to any other', async () => {
      const store = make();
      for (const title of ['ok', 'dead']) await store.enqueue(row(title), T0);
      const [ok, dead] = (await claim(store)) as [ClaimedRow, ClaimedRow];
      const delivered = { kind: 'delivered', releaseId: 5 } as const;
      const refused = { kind: 'dead', error: 'Missing release title.' } as const;
      expect(await store.settle(ok, A, delivered, T0 + 1)).toBe('applied');
      expect(await store.settle(dead, A, refused, T0 + 1)).toBe('applied');
      const recorded = await store.list({ state: undefined, limit: 10 });
      // Recorded again, by the same worker, with the same outcome: its worker still owes the event.
      expect(await store.settle(ok, A, delivered, T0 + 2)).toBe('applied');
      expect(await store.settle(dead, A, refused, T0 + 2)).toBe('applied');
      expect(await store.settleMany?.([{ claim: ok, outcome: delivered, nowMs: T0 + 3 }], A)).toEqual(['applied']);
      // Anyone else's, or another outcome, is not that record.
      expect(await store.settle(ok, B, delivered, T0 + 2)).toBe('stale');
      expect(await store.settle(ok, A, { kind: 'delivered', releaseId: 6 }, T0 + 2)).toBe('stale');
      expect(await store.settle(ok, A, { kind: 'delivered', releaseId: undefined, note: 'unreadable' }, T0 + 2)).toBe('stale');
      expect(await store.settle({ ...ok, contentHash: 'other' }, A, delivered, T0 + 2)).toBe('stale');
      expect(await store.settle(ok, A, refused, T0 + 2)).toBe('stale');
      expect(await store.settle(dead, A, delivered, T0 + 2)).toBe('stale');
      expect(await store.settle(dead, B, refused, T0 + 2)).toBe('stale');
      expect(await store.settle(ok, A, { kind: 'retry', nextAttemptAt: T0, error: 'HTTP 503' }, T0 + 2)).toBe('stale');
      // Nothing written again: the rows are as first recorded.
      expect(await store.list({ state: undefined, limit: 10 })).toEqual(recorded);
    });
  });

  describe('when rechecking the rows a worker holds (recheck)', () => {
    it('answers those replaced or no longer pending since they were claimed, each as it is now, and no other', async () => {
      const store = make();
      const recheck = store.recheck?.bind(store);
      if (!recheck) throw new Error('every built-in store has recheck()');
      for (const [title, track] of [
        ['v1', 't1'],
        ['same', 't2'],
        ['gone', 't3'],
      ] as const)
        await store.enqueue(row(title, track), T0);
      const [replaced, same, gone] = (await claim(store)) as [ClaimedRow, ClaimedRow, ClaimedRow];
      expect(await recheck([replaced, same, gone])).toEqual([]);
      await store.enqueue(row('v2', 't1'), T0);
      await store.enqueue(row('same', 't2'), T0); // the same content again: unchanged
      await store.settle(gone, A, { kind: 'delivered', releaseId: 3 }, T0);
      const changed = await recheck([replaced, same, gone]);
      expect(changed.sort((a, b) => a.id - b.id)).toEqual([
        { id: replaced.id, state: 'pending', body: row('v2', 't1').body, contentHash: row('v2', 't1').contentHash },
        { id: gone.id, state: 'delivered', body: gone.body, contentHash: gone.contentHash },
      ]);
      expect(await recheck([])).toEqual([]);
    });
  });
});

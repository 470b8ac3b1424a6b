// What the shared operator suite cannot see of the SQLite store: a big feed backlog stamped in
// slices (the loop gets turns, one call's work bounded by its page), retention held by a feed
// position, a cancelled row as workers, settles and retries see it, a failed WAL sync refusing
// operator writes, and control limits.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadSqliteDriver } from '../../../../src/db/sqlite-driver.js';
import { CONTROL_NAME_MAX } from '../../../../src/outbox/store-operations.js';
import { STAMP_BATCH } from '../../../../src/outbox/stores/sqlite/sqlite-feed.js';
import { durableWrites } from '../../../../src/outbox/stores/sqlite/sqlite-operations.js';
import { sqliteOutboxStore } from '../../../../src/outbox/stores/sqlite/sqlite-store.js';
import type { WalSync } from '../../../../src/outbox/stores/sqlite/sqlite-wal-sync.js';

const dir = mkdtempSync(join(tmpdir(), 'outbox-sqlite-ops-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const Driver = loadSqliteDriver();

/** A store whose file holds `rows` delivered releases of `panel`, none read by a feed yet. */
async function delivered(rows: number, panel = 'panel-a') {
  const file = join(dir, `feed-${++files}.db`);
  await sqliteOutboxStore({ file }).close();
  const db = new Driver(file);
  db.exec(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ${rows})
    INSERT INTO release_outbox (panel, remote_track_id, body, content_hash, state, attempts, next_attempt_at, created_at, updated_at, release_id, delivered_seq, delivered_at)
    SELECT '${panel}', 'track-' || i, '{}', 'h' || i, 'delivered', 1, 0, i, i, i, 1, i FROM c`);
  const positioned = () => (db.prepare('SELECT COUNT(*) AS n FROM release_outbox WHERE feed_position IS NOT NULL').get() as { n: number }).n;
  const store = sqliteOutboxStore({ file });
  return {
    store,
    positioned,
    async close() {
      db.close();
      await store.close();
    },
  };
}

/** How many turns the event loop got while `work` ran. */
async function turnsDuring<T>(work: Promise<T>): Promise<{ result: T; turns: number }> {
  let turns = 0;
  let running = true;
  const tick = () => {
    if (!running) return;
    turns++;
    setImmediate(tick);
  };
  setImmediate(tick);
  const result = await work;
  running = false;
  return { result, turns };
}

describe('the SQLite delivery feed over a backlog', () => {
  it('stamps what one page needs, not the whole backlog, and reads 20,000 deliveries in pages', async () => {
    const { store, positioned, close } = await delivered(20_000);
    const first = (await store.deliveries?.({ after: 0, limit: 100 })) ?? [];
    expect(first.map((row) => row.id)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    expect(positioned()).toBeLessThanOrEqual(STAMP_BATCH);
    let after = 100;
    let read = 100;
    for (;;) {
      const page = (await store.deliveries?.({ after, limit: 1000 })) ?? [];
      if (page.length === 0) break;
      expect(page[0]?.position).toBe(after + 1);
      after = page.at(-1)?.position ?? after;
      read += page.length;
    }
    expect(read).toBe(20_000);
    await close();
  });

  it('gives the loop turns while it stamps a backlog for a panel that has none of it', async () => {
    const { store, positioned, close } = await delivered(20_000, 'panel-busy');
    const { result, turns } = await turnsDuring(Promise.resolve(store.deliveries?.({ after: 0, limit: 10, panel: 'panel-quiet' })));
    // Every row stamped (the page could not be filled otherwise), one slice per turn.
    expect(result).toEqual([]);
    expect(positioned()).toBe(20_000);
    expect(turns).toBeGreaterThanOrEqual(20_000 / STAMP_BATCH - 1);
    expect(await store.deliveries?.({ after: 19_990, limit: 10, panel: 'panel-busy' })).toHaveLength(10);
    await close();
  });
});

describe('retention with a feed on SQLite', () => {
  it('keeps delivered rows a feed has not read past, and lets cancelled rows go as dead ones', async () => {
    const file = join(dir, `prune-${++files}.db`);
    const store = sqliteOutboxStore({ file });
    const row = (track: string | undefined, hash: string) => ({ panel: 'p', remoteTrackId: track, body: '{}', contentHash: hash });
    for (const hash of ['a', 'b', 'c']) await store.enqueue(row(undefined, hash), 10);
    const cancelled = await store.enqueue(row('t', 'x'), 10);
    expect(await store.cancel?.({ id: cancelled.id, nowMs: 20, note: 'gone' })).toMatchObject({ result: 'cancelled' });
    for (const claim of await store.claimDue({ owner: 'w', panel: 'p', limit: 3, nowMs: 30, leaseMs: 1000 }))
      await store.settle(claim, 'w', { kind: 'delivered', releaseId: claim.id }, 40);
    // Two of three read by the feed so far; the third has no position until the next read.
    expect((await store.deliveries?.({ after: 0, limit: 2 }))?.map((feedRow) => feedRow.id)).toEqual([1, 2]);
    const db = new Driver(file);
    db.prepare('UPDATE release_outbox SET feed_position = NULL WHERE id = 3').run();
    db.close();
    const pass = { deliveredBefore: 100, deadBefore: 100, afterId: 0, limit: 100 };
    expect(await store.prune?.({ ...pass, feedHold: 1 })).toMatchObject({ deleted: 2 });
    expect((await store.list({ state: undefined, limit: 10 })).map((stored) => [stored.id, stored.state])).toEqual([
      [2, 'delivered'],
      [3, 'delivered'],
    ]);
    expect(await store.prune?.({ ...pass, feedHold: 5 })).toMatchObject({ deleted: 1 });
    expect(await store.prune?.(pass)).toMatchObject({ deleted: 1 });
    expect(await store.counts()).toEqual({ pending: 0, delivered: 0, dead: 0, cancelled: 0 });
    await store.close();
  });
});

describe('cancelled rows and the rest of the SQLite store', () => {
  it('a worker holding a row whose lease ran out learns it was cancelled; a dead row with a newer cancelled one stays dead', async () => {
    const store = sqliteOutboxStore({ file: join(dir, `cancelled-${++files}.db`) });
    const row = (title: string) => ({ panel: 'p', remoteTrackId: 't', body: JSON.stringify({ title }), contentHash: title });
    await store.enqueue(row('old'), 0);
    const [held] = await store.claimDue({ owner: 'w', panel: 'p', limit: 1, nowMs: 0, leaseMs: 10 });
    expect(await store.settle(held as NonNullable<typeof held>, 'w', { kind: 'dead', error: 'refused' }, 1)).toBe('applied');
    const newer = await store.enqueue(row('new'), 2);
    const [again] = await store.claimDue({ owner: 'w', panel: 'p', limit: 1, nowMs: 2, leaseMs: 10 });
    expect(again?.id).toBe(newer.id);
    expect(await store.cancel?.({ id: newer.id, nowMs: 20, note: 'deleted' })).toMatchObject({ result: 'cancelled' });
    expect(await store.recheck?.([{ id: newer.id, contentHash: 'new' }])).toEqual([
      { id: newer.id, state: 'cancelled', body: '{"title":"new"}', contentHash: 'new' },
    ]);
    expect(await store.settle(again as NonNullable<typeof again>, 'w', { kind: 'delivered', releaseId: 5 }, 21)).toBe('stale');
    expect(await store.requeueDead(undefined, 22)).toBe(0);
    expect((await store.list({ state: undefined, limit: 5 })).map((stored) => stored.state)).toEqual(['dead', 'cancelled']);
    expect(await store.deliveries?.({ after: 0, limit: 5 })).toEqual([]);
    await store.close();
  });
});

describe('operator writes on SQLite', () => {
  it('refuses control names and values beyond their limits, naming them', async () => {
    const store = sqliteOutboxStore({ file: join(dir, `controls-${++files}.db`) });
    await expect(store.setControl?.('x'.repeat(CONTROL_NAME_MAX + 1), '1', 0)).rejects.toThrow(/1 to 220 characters \(CONTROL_NAME_MAX\)/);
    await expect(store.setControl?.('pause', 'y'.repeat(65), 0)).rejects.toThrow(/at most 64 characters/);
    await expect(store.setControl?.('feed-position', '0', 0)).rejects.toThrow(/the store's own feed counter, not a control/);
    await store.setControl?.('x'.repeat(CONTROL_NAME_MAX), 'y'.repeat(64), 0);
    expect(Object.keys((await store.controls?.()) ?? {})).toEqual(['x'.repeat(CONTROL_NAME_MAX)]);
    await store.close();
  });

  it('answers a write once its WAL sync succeeded, and after a failed sync makes no more writes', async () => {
    let failure: Error | undefined;
    let failNext = false;
    const wal: WalSync = {
      durable() {
        if (failNext) failure = Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' });
        return failure ? Promise.reject(failure) : Promise.resolve();
      },
      failed: () => failure,
      settled: () => Promise.resolve(),
    };
    const writes: string[] = [];
    const durably = durableWrites(wal, (write) => write());
    expect(await durably(() => writes.push('first'))).toBe(1);
    failNext = true;
    await expect(durably(() => writes.push('second'))).rejects.toThrow(/could not be synced to disk \(.*EIO.*\); this change may or may not be on disk/);
    await expect(durably(() => writes.push('third'))).rejects.toThrow(/this change was not made\. No more writes are accepted/);
    expect(writes).toEqual(['first', 'second']);
  });
});

import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClaimedRow, FeedRow } from '../../../../src/outbox/store.js';
import { STAMP_BATCH } from '../../../../src/outbox/stores/postgres/postgres-operations.js';
import { postgresOutboxStore } from '../../../../src/postgres.js';
import { DATABASE_URL, postgresAnswers, serviceAvailable } from '../../../support/services.js';

// What the shared operator contract cannot see of the PostgreSQL store: the v6 upgrade of a table
// holding rows, a claim and a cancel racing on one row, four feed readers stamping while
// deliveries commit, and a backlog of 100,000 deliveries read in pages. (Plans: the plans test.)
const havePostgres = serviceAvailable('PostgreSQL', DATABASE_URL, await postgresAnswers());
const schema = `test_outbox_ops_${process.pid}`;
const pools: pg.Pool[] = [];
const newPool = (max = 6) => {
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max });
  pools.push(pool);
  return pool;
};
let admin: pg.Pool;
let tables = 0;
const freshTable = () => `ops_${++tables}`;
const row = (track: string | undefined, hash: string, panel = 'panel-a') => ({ panel, remoteTrackId: track, body: `{"h":"${hash}"}`, contentHash: hash });

beforeAll(async () => {
  if (!havePostgres) return;
  admin = newPool();
  await admin.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
});
afterAll(async () => {
  if (!havePostgres) return;
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await Promise.all(pools.map((pool) => pool.end()));
});

/** Delivers every due row of `panel` through `store` (claim then settle), as a worker would. */
async function deliverAll(store: ReturnType<typeof postgresOutboxStore>, owner: string, panel = 'panel-a'): Promise<number> {
  let delivered = 0;
  for (;;) {
    const claimed = await store.claimDue({ panel, owner, limit: 10, nowMs: Date.now(), leaseMs: 60_000 });
    if (claimed.length === 0) return delivered;
    for (const claim of claimed) await store.settle(claim, owner, { kind: 'delivered', releaseId: claim.id * 10 }, Date.now());
    delivered += claimed.length;
  }
}

if (havePostgres)
  describe('postgresOutboxStore() operator operations', () => {
    it('upgrades a v5 table holding rows (a 52-character name too): cancelled allowed, old deliveries fed on first read, idempotent', async () => {
      for (const table of [freshTable(), `ops_long_${'x'.repeat(43)}`]) {
        const names = `"${schema}"."${table}"`;
        const store = postgresOutboxStore({ pool: admin, schema, table });
        await store.enqueue(row('t1', 'a'), 1000);
        await store.enqueue(row('t2', 'b'), 1000);
        await store.enqueue(row('t3', 'c'), 1000);
        expect(await deliverAll(store, 'w')).toBe(3);
        await store.enqueue(row('t4', 'd'), 1000);
        // Back to v5: its CHECK as PostgreSQL named it, no feed position, no controls table.
        await admin.query(`ALTER TABLE ${names} DROP CONSTRAINT "${table}_states", DROP COLUMN feed_position`);
        await admin.query(`ALTER TABLE ${names} ADD CHECK (state IN ('pending', 'delivered', 'dead'))`);
        await admin.query(`DROP TABLE "${schema}"."${table}_controls"`);
        await admin.query(`DELETE FROM "${schema}"."${table}_migrations" WHERE version >= 6`);
        const checks = `SELECT conname FROM pg_constraint WHERE conrelid = '${names}'::regclass AND contype = 'c'`;
        expect((await admin.query(checks)).rows.map((r) => r.conname)).toEqual([`${table.slice(0, 51)}_state_check`]);
        // A v5 row cannot be cancelled yet.
        await expect(admin.query(`UPDATE ${names} SET state = 'cancelled' WHERE remote_track_id = 't4'`)).rejects.toThrow(/check constraint/);

        const upgraded = postgresOutboxStore({ pool: newPool(), schema, table });
        await upgraded.migrate();
        const versions = await admin.query(`SELECT version FROM "${schema}"."${table}_migrations" ORDER BY version`);
        expect(versions.rows.map((r) => r.version)).toEqual([1, 2, 3, 4, 5, 6, 7]);
        expect((await admin.query(checks)).rows.map((r) => r.conname)).toEqual([`${table}_states`]);
        expect(await upgraded.counts()).toEqual({ pending: 1, delivered: 3, dead: 0, cancelled: 0 });
        // Deliveries made before the upgrade get their positions on the first feed read, in delivery order.
        const fed = await upgraded.deliveries({ after: 0, limit: 10 });
        expect(fed.map((r) => [r.position, r.remoteTrackId])).toEqual([
          [1, 't1'],
          [2, 't2'],
          [3, 't3'],
        ]);
        expect(await upgraded.cancel({ panel: 'panel-a', track: 't4', nowMs: 5000, note: 'track deleted' })).toMatchObject({ result: 'cancelled' });

        // Run again over a v6 table (its record lost): every step is idempotent, nothing is lost.
        await admin.query(`DELETE FROM "${schema}"."${table}_migrations" WHERE version = 6`);
        await upgraded.setControl('pause', '1', 6000);
        await postgresOutboxStore({ pool: newPool(), schema, table }).migrate();
        expect((await admin.query(checks)).rows.map((r) => r.conname)).toEqual([`${table}_states`]);
        expect(await upgraded.counts()).toEqual({ pending: 0, delivered: 3, dead: 0, cancelled: 1 });
        expect((await upgraded.deliveries({ after: 0, limit: 10 })).map((r) => r.position)).toEqual([1, 2, 3]);
        expect(await upgraded.controls()).toMatchObject({ pause: '1' });
      }
    });

    it('never lets a claim and a cancel both win one row (60 rounds, two pools)', async () => {
      const table = freshTable();
      const [claimer, canceller] = [postgresOutboxStore({ pool: newPool(), schema, table }), postgresOutboxStore({ pool: newPool(), schema, table })];
      const outcomes = { cancelled: 0, claimed: 0 };
      for (let round = 0; round < 60; round++) {
        const { id } = await claimer.enqueue(row(`t${round}`, `h${round}`), Date.now());
        const cancelling = () => canceller.cancel({ id, nowMs: Date.now(), note: 'operator' });
        const claiming = () => claimer.claimDue({ panel: 'panel-a', owner: 'w', limit: 5, nowMs: Date.now(), leaseMs: 60_000 });
        // Alternate which starts first, so both orders race.
        const [answer, claimed] = round % 2 === 0 ? await Promise.all([cancelling(), claiming()]) : (await Promise.all([claiming(), cancelling()])).reverse();
        const took = (claimed as ClaimedRow[]).some((r) => r.id === id);
        const cancelAnswer = answer as Awaited<ReturnType<typeof cancelling>>;
        const [stored] = await claimer.list({ state: undefined, id, limit: 1 });
        if (took) {
          expect(cancelAnswer).toMatchObject({ result: 'in-flight', id, state: 'pending' });
          expect(cancelAnswer.leaseExpiresAt).toBeGreaterThan(Date.now() + 50_000);
          expect(stored).toMatchObject({ state: 'pending', leaseOwner: 'w' });
          await claimer.settle((claimed as ClaimedRow[])[0] as ClaimedRow, 'w', { kind: 'delivered', releaseId: 1 }, Date.now());
          outcomes.claimed++;
        } else {
          expect(cancelAnswer).toMatchObject({ result: 'cancelled', id, state: 'cancelled' });
          expect(stored).toMatchObject({ state: 'cancelled', lastError: 'operator', leaseOwner: undefined });
          outcomes.cancelled++;
        }
      }
      expect(outcomes.cancelled + outcomes.claimed).toBe(60);
      // Nothing left pending: no row was both given to the claim and cancelled, nor neither.
      expect((await claimer.counts()).pending).toBe(0);
    });

    it('treats a cancelled row as no longer pending: recheck says so, a late delivery is stale, a dead row before it stays dead', async () => {
      const table = freshTable();
      const store = postgresOutboxStore({ pool: newPool(), schema, table, leaseClock: 'outbox' });
      const { id: deadId } = await store.enqueue(row('t1', 'old'), 1000);
      const [old] = await store.claimDue({ panel: 'panel-a', owner: 'w', limit: 1, nowMs: 1000, leaseMs: 100 });
      await store.settle(old as ClaimedRow, 'w', { kind: 'dead', error: 'HTTP 422' }, 1001);
      const { id } = await store.enqueue(row('t1', 'new'), 2000);
      const [held] = await store.claimDue({ panel: 'panel-a', owner: 'w', limit: 1, nowMs: 2000, leaseMs: 100 });
      // The lease ran out (the worker hung): the operator cancels it.
      expect(await store.cancel({ panel: 'panel-a', track: 't1', nowMs: 2200, note: 'deleted' })).toMatchObject({ result: 'cancelled', id });
      expect(await store.recheck?.([{ id, contentHash: 'new' }])).toEqual([{ id, state: 'cancelled', body: '{"h":"new"}', contentHash: 'new' }]);
      expect(await store.settle(held as ClaimedRow, 'w', { kind: 'delivered', releaseId: 9 }, 2300)).toBe('stale');
      expect(await store.requeueDead(deadId, 2400)).toBe(0);
      expect((await store.list({ state: undefined, limit: 10 })).map((r) => [r.id, r.state])).toEqual([
        [deadId, 'dead'],
        [id, 'cancelled'],
      ]);
      expect(await store.panelCounts?.(10)).toEqual([{ panel: 'panel-a', pending: 0, dead: 1, oldestPendingAt: undefined }]);
      await expect(store.setControl('feed-position', '0', 1)).rejects.toThrow(/the store's own/);
    });

    it('gives each delivery one position, in commit order, to four readers stamping while deliveries commit', async () => {
      const table = freshTable();
      const writers = [postgresOutboxStore({ pool: newPool(), schema, table }), postgresOutboxStore({ pool: newPool(), schema, table })];
      const readers = Array.from({ length: 4 }, () => postgresOutboxStore({ pool: newPool(2), schema, table }));
      const total = 400;
      for (let i = 0; i < total; i++) await writers[0]?.enqueue(row(undefined, `h${i}`, i % 2 === 0 ? 'panel-a' : 'panel-b'), Date.now());
      let settling = true;
      const delivering = Promise.all(writers.flatMap((store, w) => ['panel-a', 'panel-b'].map((panel) => deliverAll(store, `w${w}-${panel}`, panel)))).finally(
        () => {
          settling = false;
        },
      );
      const seen = await Promise.all(
        readers.map(async (store) => {
          const rows: FeedRow[] = [];
          for (;;) {
            const done = !settling;
            const page = await store.deliveries({ after: rows.at(-1)?.position ?? 0, limit: 17 });
            rows.push(...page);
            if (done && page.length === 0) return rows;
          }
        }),
      );
      expect((await delivering).reduce((sum, n) => sum + n, 0)).toBe(total);
      const byPosition = new Map<number, number>();
      for (const rows of seen) {
        // Every reader: each delivery once, positions rising, none missed although it read ahead of commits.
        expect(rows).toHaveLength(total);
        expect(new Set(rows.map((r) => r.id)).size).toBe(total);
        for (let i = 1; i < rows.length; i++) expect((rows[i] as FeedRow).position).toBeGreaterThan((rows[i - 1] as FeedRow).position);
        for (const r of rows) {
          expect(byPosition.get(r.position) ?? r.id).toBe(r.id);
          byPosition.set(r.position, r.id);
        }
      }
      expect(byPosition.size).toBe(total);
      const positions = await admin.query(`SELECT COUNT(DISTINCT feed_position) AS n, MAX(feed_position) AS top FROM "${schema}"."${table}"`);
      expect(positions.rows[0]).toEqual({ n: String(total), top: String(total) });
      // A panel's feed is that panel's deliveries, in the same order.
      const ofA = await readers[0]?.deliveries({ after: 0, limit: total, panel: 'panel-b' });
      expect(ofA?.map((r) => r.id)).toEqual(seen[0]?.filter((r) => r.panel === 'panel-b').map((r) => r.id));
    });

    it('reads a backlog of 100,000 deliveries in pages, stamping a bounded amount per read', async () => {
      const table = freshTable();
      const store = postgresOutboxStore({ pool: newPool(), schema, table });
      await store.migrate();
      await admin.query(`INSERT INTO "${schema}"."${table}" (panel, body, content_hash, state, attempts, next_attempt_at, release_id, delivered_at, created_at, updated_at)
        SELECT 'panel-a', '{}', 'h' || n, 'delivered', 1, 0, n, 200000 - n, 0, 0 FROM generate_series(1, 100000) AS n`);
      const stamped = async () => Number((await admin.query(`SELECT COUNT(feed_position) AS n FROM "${schema}"."${table}"`)).rows[0]?.n);
      const first = await store.deliveries({ after: 0, limit: 1000 });
      expect(first).toHaveLength(1000);
      // Delivery time order: the last inserted was delivered first.
      expect(first[0]).toMatchObject({ position: 1, releaseId: 100000, deliveredAt: 100000 });
      expect(await stamped()).toBe(STAMP_BATCH);
      let after = first.at(-1)?.position ?? 0;
      let read = first.length;
      for (;;) {
        const page = await store.deliveries({ after, limit: 10_000 });
        if (page.length === 0) break;
        expect(page[0]?.position).toBe(after + 1);
        read += page.length;
        after = page.at(-1)?.position ?? after;
      }
      expect(read).toBe(100_000);
      expect(await stamped()).toBe(100_000);
      // 100,000 rows written twice (inserted, then stamped): about 10 s on a loaded 2-core machine.
    }, 120_000);
  });

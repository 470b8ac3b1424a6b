import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mysqlOutboxStore } from '../../../../src/mysql.js';
import type { ClaimedRow, FeedRow } from '../../../../src/outbox/store.js';
import { mysqlOperationStatements, STAMP_BATCH } from '../../../../src/outbox/stores/mysql/mysql-operations.js';
import { checkServerVersion, migrationV1, mysqlTableNames } from '../../../../src/outbox/stores/mysql/mysql-schema.js';
import { mysqlStatements } from '../../../../src/outbox/stores/mysql/mysql-sql.js';
import { onEverySession } from '../../../support/mysql-sessions.js';
import { MYSQL_URL, mysqlAnswers, serviceAvailable } from '../../../support/services.js';

// What the shared contract suite (operator-contract.test.ts) cannot see of the MySQL store's
// operator calls: the upgrade of a v1 table with rows in it, the plans of the feed's statements,
// a cancel racing a claim, stampers racing each other, a backlog of 100,000 deliveries, and names
// of controls compared byte for byte.
const haveMysql = serviceAvailable('MySQL/MariaDB', MYSQL_URL, await mysqlAnswers());
const PREFIX = `test_outbox_ops_${process.pid}`;
const pools: mysql.Pool[] = [];
const newPool = (connectionLimit = 6) => {
  const pool = mysql.createPool({ uri: MYSQL_URL, connectionLimit });
  pools.push(pool);
  return pool;
};
let tables = 0;
const freshTable = () => `${PREFIX}_${++tables}`;
let admin: mysql.Pool;
const rowsOf = async (sql: string, values: unknown[] = []) => (await admin.query(sql, values))[0] as Record<string, unknown>[];
const newRow = (panel: string, body: string, remoteTrackId?: string) => ({ panel, remoteTrackId, body, contentHash: `h:${body}` });

beforeAll(() => {
  if (haveMysql) admin = newPool();
});
afterAll(async () => {
  if (!haveMysql) return;
  for (let i = 1; i <= tables; i++)
    await admin.query(`DROP TABLE IF EXISTS ${PREFIX}_${i}, ${PREFIX}_${i}_tracks, ${PREFIX}_${i}_migrations, ${PREFIX}_${i}_controls`);
  await Promise.all(pools.map((pool) => pool.end()));
});

/** `count` rows made with one INSERT … SELECT over a cross join of digits (MySQL and MariaDB alike). */
async function insertMany(table: string, count: number, select: string): Promise<void> {
  const digits =
    'SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9';
  const n = 'a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d';
  await admin.query(
    `INSERT INTO ${table} (panel, remote_track_id, body, content_hash, state, attempts, next_attempt_at, release_id, delivered_at, created_at, updated_at)
     SELECT ${select} FROM (SELECT ${n} AS n FROM (${digits}) a, (${digits}) b, (${digits}) c, (${digits}) e, (${digits}) f) AS s WHERE s.n < ?`,
    [count],
  );
}

/** Every delivery a feed gives from `after`, read `limit` at a time. */
async function readAll(store: ReturnType<typeof mysqlOutboxStore>, limit: number, panel?: string): Promise<FeedRow[]> {
  const all: FeedRow[] = [];
  for (;;) {
    const page = await store.deliveries?.({ after: all.at(-1)?.position ?? 0, limit, panel });
    if (!page || page.length === 0) return all;
    all.push(...page);
  }
}

if (haveMysql)
  describe('the MySQL store for operators', () => {
    it('upgrades a v1 table with rows in it: cancelled allowed, old deliveries positioned on the first feed read, and again after a half-done step', async () => {
      const table = freshTable();
      const names = mysqlTableNames(undefined, table);
      const [{ version }] = (await rowsOf('SELECT VERSION() AS version')) as [{ version: string }];
      await admin.query(`CREATE TABLE ${names.migrations} (version INT PRIMARY KEY, applied_at BIGINT NOT NULL) ENGINE=InnoDB`);
      for (const statement of migrationV1(names, checkServerVersion(version))) await admin.query(statement);
      await admin.query(`INSERT INTO ${names.migrations} VALUES (1, 0)`);
      const v1 = `INSERT INTO ${table} (panel, remote_track_id, body, content_hash, state, attempts, next_attempt_at, release_id, delivered_at, created_at, updated_at) VALUES ?`;
      await admin.query(v1, [
        [
          ['p', 't-late', '{"a":1}', 'h1', 'delivered', 1, 0, 11, 300, 1, 300],
          ['p', 't-pending', '{"a":2}', 'h2', 'pending', 0, 0, null, null, 2, 2],
          ['p', null, '{"a":3}', 'h3', 'delivered', 1, 0, 13, 100, 3, 100],
          ['p', 't-dead', '{"a":4}', 'h4', 'dead', 3, 0, null, null, 4, 4],
        ],
      ]);
      await expect(
        admin.query(
          `INSERT INTO ${table} (panel, body, content_hash, state, next_attempt_at, created_at, updated_at) VALUES ('p', '{}', 'x', 'cancelled', 0, 0, 0)`,
        ),
      ).rejects.toThrow(/CHECK|constraint/i);

      const store = mysqlOutboxStore({ pool: newPool(), table });
      await store.migrate();
      expect(await rowsOf(`SELECT version FROM ${names.migrations} ORDER BY version`)).toEqual([{ version: 1 }, { version: 2 }, { version: 3 }]);
      expect(await rowsOf(`SELECT id, state, feed_position FROM ${table} ORDER BY id`)).toEqual([
        { id: 1, state: 'delivered', feed_position: null },
        { id: 2, state: 'pending', feed_position: null },
        { id: 3, state: 'delivered', feed_position: null },
        { id: 4, state: 'dead', feed_position: null },
      ]);
      expect(await store.cancel?.({ panel: 'p', track: 't-pending', nowMs: 50, note: 'deleted' })).toEqual({ result: 'cancelled', id: 2, state: 'cancelled' });
      await expect(admin.query(`UPDATE ${table} SET state = 'bogus' WHERE id = 4`)).rejects.toThrow(/CHECK|constraint/i);
      // Delivered before the upgrade: positions on the first read, in delivery time order.
      expect((await store.deliveries?.({ after: 0, limit: 10 }))?.map(({ id, position }) => [id, position])).toEqual([
        [3, 1],
        [1, 2],
      ]);

      // A step cut off half-way (an index and the controls table made, the version not recorded) runs again.
      const shape = async () => String((await rowsOf(`SHOW CREATE TABLE ${table}`))[0]?.['Create Table']);
      const upgraded = await shape();
      await admin.query(`ALTER TABLE ${table} DROP KEY feed_of_panel`);
      await admin.query(`DROP TABLE ${names.controls}`);
      await admin.query(`DELETE FROM ${names.migrations} WHERE version >= 2`);
      await mysqlOutboxStore({ pool: newPool(), table }).migrate();
      expect(await shape()).toBe(upgraded);
      expect(upgraded.match(/CHECK/g)).toHaveLength(1);
      expect(await rowsOf(`SELECT version FROM ${names.migrations} ORDER BY version`)).toEqual([{ version: 1 }, { version: 2 }, { version: 3 }]);
    });

    it('reads the feed, and finds deliveries waiting for a position, in their indexes', async () => {
      const table = freshTable();
      const store = mysqlOutboxStore({ pool: newPool(), table });
      await store.migrate();
      const at = "CONCAT('panel-', s.n % 50), CONCAT('t-', s.n), '{}', CONCAT('h', s.n)";
      await insertMany(table, 20_000, `${at}, 'pending', 0, s.n, NULL, NULL, s.n, s.n`);
      await insertMany(table, 4000, `${at}, 'delivered', 1, s.n, s.n, s.n, s.n, s.n`);
      await store.deliveries?.({ after: 0, limit: 1 }); // 4,000 given positions; more waiting:
      await insertMany(table, 2000, `${at}, 'delivered', 1, s.n, s.n, 5000 + s.n, s.n, s.n`);
      await admin.query(`ANALYZE TABLE ${table}`);
      const sql = mysqlOperationStatements(mysqlTableNames(undefined, table), mysqlStatements(mysqlTableNames(undefined, table), 'database').now);
      const plan = async (statement: string, values: (string | number)[]) =>
        (await admin.execute(`EXPLAIN ${statement}`, values))[0] as Record<string, unknown>[];
      const only = (rows: Record<string, unknown>[]) => {
        expect(rows).toHaveLength(1);
        return rows[0] as Record<string, unknown>;
      };
      expect(only(await plan(sql.feed, [100, '50']))).toMatchObject({ key: 'feed' });
      expect(only(await plan(sql.feedOfPanel, ['panel-7', 100, '50']))).toMatchObject({ key: 'feed_of_panel' });
      expect(only(await plan(sql.unstamped, []))).toMatchObject({ key: 'feed' });
      // The stamping: the waiting deliveries read in the `feed` index in delivery order (no sort of
      // the 20,000 pending rows), then joined by primary key.
      const stamping = await plan(sql.stamp, [String(STAMP_BATCH), 4000]);
      const waiting = stamping.find((row) => row.table === table && row.key === 'feed');
      expect(waiting, JSON.stringify(stamping)).toBeDefined();
      expect(String(waiting?.Extra)).not.toMatch(/filesort/);
      expect(stamping.find((row) => row.table === 'target')).toMatchObject({ key: 'PRIMARY' });
      for (const row of [...(await plan(sql.feed, [100, '50'])), ...(await plan(sql.feedOfPanel, ['panel-7', 100, '50']))])
        expect(String(row.Extra)).not.toMatch(/filesort/);
    });

    it('cancels or lets a claim take a release, never both, when they race', async () => {
      const store = mysqlOutboxStore({ pool: newPool(8), table: freshTable() });
      const claimer = mysqlOutboxStore({ pool: newPool(8), table: `${PREFIX}_${tables}` });
      const outcomes = { cancelled: 0, claimed: 0 };
      for (let round = 0; round < 40; round++) {
        const track = `race-${round}`;
        const { id } = await store.enqueue(newRow('p', `{"r":${round}}`, track), 1000);
        const byTrack = round % 2 === 0;
        const [answer, claimed] = await Promise.all([
          store.cancel?.(byTrack ? { panel: 'p', track, nowMs: Date.now(), note: 'deleted' } : { id, nowMs: Date.now(), note: 'deleted' }),
          claimer.claimDue({ panel: 'p', owner: 'worker', limit: 5, nowMs: Date.now(), leaseMs: 60_000 }),
        ]);
        const [row] = await rowsOf(`SELECT state, lease_owner FROM ${PREFIX}_${tables} WHERE id = ?`, [id]);
        if (answer?.result === 'cancelled') {
          outcomes.cancelled++;
          expect(claimed).toEqual([]);
          expect(row).toEqual({ state: 'cancelled', lease_owner: null });
        } else {
          outcomes.claimed++;
          expect(answer).toMatchObject({ result: 'in-flight', id, state: 'pending', leaseExpiresAt: expect.any(Number) });
          expect(claimed.map((c) => c.id)).toEqual([id]);
          expect(row).toEqual({ state: 'pending', lease_owner: 'worker' });
          await claimer.settle(claimed[0] as ClaimedRow, 'worker', { kind: 'delivered', releaseId: round }, Date.now());
        }
      }
      // Both orders happened (else the race was not run), and each round had one winner.
      expect(outcomes.cancelled + outcomes.claimed).toBe(40);
      expect(outcomes.cancelled).toBeGreaterThan(0);
      expect(outcomes.claimed).toBeGreaterThan(0);
    });

    it('gives every delivery one position, in the order deliveries commit, with 4 readers at once while releases settle', async () => {
      const table = freshTable();
      const writer = mysqlOutboxStore({ pool: newPool(8), table });
      const readers = Array.from({ length: 4 }, () => mysqlOutboxStore({ pool: newPool(3), table }));
      const total = 400;
      for (let i = 0; i < total; i++) await writer.enqueue(newRow(`panel-${i % 3}`, `{"i":${i}}`, `t-${i}`), 1000);
      let settled = 0;
      const settling = (async () => {
        // Settled in a shuffled order, 12 at a time: ids commit out of order.
        for (let turn = 0; settled < total; turn++) {
          const claimed = await writer.claimDue({ panel: `panel-${turn % 3}`, owner: 'w', limit: 12, nowMs: Date.now(), leaseMs: 60_000 });
          claimed.sort(() => Math.random() - 0.5);
          await Promise.all(claimed.map((row) => writer.settle(row, 'w', { kind: 'delivered', releaseId: row.id }, Date.now())));
          settled += claimed.length;
        }
      })();
      const seen = readers.map(async (reader) => {
        const got: FeedRow[] = [];
        while (got.length < total) {
          const page = (await reader.deliveries?.({ after: got.at(-1)?.position ?? 0, limit: 17 })) ?? [];
          got.push(...page);
          if (page.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
        }
        return got;
      });
      const [all, ...others] = await Promise.all(seen);
      await settling;
      const positions = (all as FeedRow[]).map((row) => row.position);
      expect(new Set((all as FeedRow[]).map((row) => row.id)).size).toBe(total);
      expect(new Set(positions).size).toBe(total);
      expect(positions).toEqual([...positions].sort((a, b) => a - b));
      // Every reader, resuming after the last position it read, saw the same deliveries at the same positions.
      for (const other of others) expect(other).toEqual(all);
      expect(await readAll(writer, 1000)).toEqual(all);
      const [{ n }] = (await rowsOf(`SELECT COUNT(*) AS n FROM ${table} WHERE state = 'delivered' AND feed_position IS NULL`)) as [{ n: number }];
      expect(n).toBe(0);
    });

    it('reads a backlog of 100,000 deliveries in pages, giving positions a batch at a time', async () => {
      const table = freshTable();
      const store = mysqlOutboxStore({ pool: newPool(), table });
      await store.migrate();
      // Delivery times not in id order: positions follow delivery time, then id.
      await insertMany(
        table,
        100_000,
        "CONCAT('panel-', s.n % 7), NULL, '{}', CONCAT('h', s.n), 'delivered', 1, 0, s.n, 1000 + (s.n * 7919) % 100000, s.n, s.n",
      );
      const first = await store.deliveries?.({ after: 0, limit: 1000 });
      expect(first).toHaveLength(1000);
      // One call gave positions to what its page needed, not to the whole backlog.
      expect((await store.controls?.())?.['feed-position']).toBe('1000');
      // Pages larger than one statement's batch: several statements in one call.
      expect(await store.deliveries?.({ after: 1000, limit: 2 * STAMP_BATCH + 1 })).toHaveLength(2 * STAMP_BATCH + 1);
      const given = Number((await store.controls?.())?.['feed-position']);
      expect(given).toBeGreaterThanOrEqual(1000 + 2 * STAMP_BATCH + 1);
      expect(given).toBeLessThanOrEqual(1000 + 2 * STAMP_BATCH + 100);
      const all = [...(first ?? []), ...(await readAllFrom(store, 1000, 1000))];
      expect(all.map((row) => row.position)).toEqual(Array.from({ length: 100_000 }, (_, i) => i + 1));
      const order = all.map((row) => [row.deliveredAt, row.id]);
      expect(order).toEqual([...order].sort((a, b) => (a[0] as number) - (b[0] as number) || (a[1] as number) - (b[1] as number)));
      // One panel's feed: its deliveries only, in the same order.
      const panel3 = await readAll(store, 5000, 'panel-3');
      expect(panel3.map((row) => row.id)).toEqual(all.filter((row) => row.panel === 'panel-3').map((row) => row.id));
    }, 120_000);

    it('keeps control names byte for byte, within their limits, also under EMPTY_STRING_IS_NULL', async () => {
      const pool = newPool(3);
      const store = mysqlOutboxStore({ pool, table: freshTable() });
      const long = `feed:${'x'.repeat(215)}`;
      for (const [name, value] of [
        ['pause:acme', '1'],
        ['pause:acme ', '2'],
        ['pause:ACME', '3'],
        ['pause:café', '4'],
        ['pause:cafe\u0301', '5'],
        ['pause:🎵', '6'],
        [long, '9'.repeat(64)],
      ] as const)
        await store.setControl?.(name, value, 1000);
      await store.setControl?.('pause:acme', '7', 2000);
      await store.setControl?.('pause:ACME', undefined, 2000);
      expect(await store.controls?.()).toEqual({
        'pause:acme': '7',
        'pause:acme ': '2',
        'pause:café': '4',
        'pause:cafe\u0301': '5',
        'pause:🎵': '6',
        [long]: '9'.repeat(64),
      });
      await expect(Promise.resolve(store.setControl?.(`${long}x`, '1', 1))).rejects.toThrow(/at most 220 characters/);
      await expect(Promise.resolve(store.setControl?.('pause', '1'.repeat(65), 1))).rejects.toThrow(/at most 64 characters/);
      // MariaDB's EMPTY_STRING_IS_NULL on every pooled session: an empty value is still a value.
      if ((await onEverySession(pool, 3, "SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',EMPTY_STRING_IS_NULL')").catch(() => undefined)) === undefined)
        return;
      await store.setControl?.('feed:empty', '', 3000);
      expect((await store.controls?.())?.['feed:empty']).toBe('');
      await store.setControl?.('feed:empty', undefined, 3000);
      expect((await store.controls?.())?.['feed:empty']).toBeUndefined();
    });

    it('keeps a delivery a feed has not acknowledged, and prunes cancelled rows as dead ones', async () => {
      const table = freshTable();
      const store = mysqlOutboxStore({ pool: newPool(), table, leaseClock: 'outbox' });
      for (let i = 0; i < 3; i++) await store.enqueue(newRow('p', `{"d":${i}}`), 1000);
      const claimed = await store.claimDue({ panel: 'p', owner: 'w', limit: 3, nowMs: 1000, leaseMs: 60_000 });
      for (const row of claimed) await store.settle(row, 'w', { kind: 'delivered', releaseId: row.id }, 2000);
      const { id: gone } = await store.enqueue(newRow('p', '{"c":1}', 'c'), 1000);
      await store.cancel?.({ id: gone, nowMs: 2000, note: 'deleted' });
      const prune = (feedHold: number | undefined) =>
        store.prune?.({ deliveredBefore: 10_000, deadBefore: 1000, feedHold, afterId: 0, limit: 100 }) as Promise<{ deleted: number }>;
      // Not positioned yet: no feed has read them.
      expect((await prune(5)).deleted).toBe(0);
      expect((await store.deliveries?.({ after: 0, limit: 10 }))?.map((row) => row.position)).toEqual([1, 2, 3]);
      expect((await prune(2)).deleted).toBe(2);
      expect((await store.list({ state: undefined, limit: 10 })).map((row) => [row.state, row.id])).toEqual([
        ['delivered', 3],
        ['cancelled', gone],
      ]);
      expect((await store.prune?.({ deliveredBefore: 10_000, deadBefore: 3000, feedHold: undefined, afterId: 0, limit: 100 }))?.deleted).toBe(2);
    });
  });

/** Every delivery after `after`, `limit` at a time. */
async function readAllFrom(store: ReturnType<typeof mysqlOutboxStore>, limit: number, after: number): Promise<FeedRow[]> {
  const all: FeedRow[] = [];
  for (;;) {
    const page = (await store.deliveries?.({ after: all.at(-1)?.position ?? after, limit })) ?? [];
    if (page.length === 0) return all;
    all.push(...page);
  }
}

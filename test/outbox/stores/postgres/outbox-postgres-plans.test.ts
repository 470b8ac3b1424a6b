import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operationStatements } from '../../../../src/outbox/stores/postgres/postgres-operations-sql.js';
import { tableNames } from '../../../../src/outbox/stores/postgres/postgres-schema.js';
import { statements } from '../../../../src/outbox/stores/postgres/postgres-sql.js';
import { postgresOutboxStore } from '../../../../src/postgres.js';
import { DATABASE_URL, postgresAnswers, serviceAvailable } from '../../../support/services.js';

// What the PostgreSQL store's hot statements read, in pages (EXPLAIN ANALYZE's buffer counts:
// deterministic, unlike timings). An enqueue and a claim look up a track's pending row; that
// lookup must stay one index seek however many rows are pending, on a table PostgreSQL has no
// statistics for yet (a new table, or autovacuum off), where the planner cannot tell indexes
// apart by their selectivity. A batch of outcomes must find its rows by id, never by walking
// the pending rows.
const havePostgres = serviceAvailable('PostgreSQL', DATABASE_URL, await postgresAnswers());
const schema = `test_outbox_plans_${process.pid}`;
const PANEL = 'panel-a';
let pool: pg.Pool;

beforeAll(async () => {
  if (!havePostgres) return;
  pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
});
afterAll(async () => {
  if (!havePostgres) return;
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
});

/** Pages (shared buffers hit or read) `text` touches, run and rolled back. */
async function pagesRead(text: string, values: unknown[]): Promise<number> {
  return (await planOf(text, values)).pages;
}

/** What `text` touches when run (and rolled back): its pages, those it read, and the indexes its plan scans. */
async function planOf(text: string, values: unknown[], prelude?: string): Promise<{ pages: number; readPages: number; indexes: string[] }> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    if (prelude) await client.query(prelude);
    const { rows } = await client.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${text}`, values);
    const [{ Plan: plan }] = (rows[0] as { 'QUERY PLAN': [{ Plan: PlanNode }] })['QUERY PLAN'];
    const indexes: string[] = [];
    const visit = (node: PlanNode) => {
      if (node['Index Name']) indexes.push(node['Index Name']);
      for (const child of node.Plans ?? []) visit(child);
    };
    visit(plan);
    // An UPDATE's own pages are its writes (a row version, its index entries: where they land
    // varies with the table's free space); what it read to find its rows is its input's.
    const reading = plan['Node Type'] === 'ModifyTable' ? (plan.Plans?.[0] ?? plan) : plan;
    const pages = (node: PlanNode) => (node['Shared Hit Blocks'] ?? 0) + (node['Shared Read Blocks'] ?? 0);
    return { pages: pages(plan), readPages: pages(reading), indexes };
  } finally {
    await client.query('ROLLBACK');
    client.release();
  }
}

interface PlanNode {
  'Node Type'?: string;
  'Index Name'?: string;
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
  Plans?: PlanNode[];
}

describe.skipIf(!havePostgres)('postgresOutboxStore() query plans', () => {
  it('reads about the same pages per enqueue, per claim (one panel or many) and per batch of outcomes with 10,000 releases pending as with 100', async () => {
    const table = 'plans';
    const store = postgresOutboxStore({ pool, schema, table });
    const sql = statements(tableNames(schema, table), 'database');
    /** Pending rows so far: tracks t0 … t(n-1). */
    let pending = 0;
    const fill = async (upTo: number) => {
      const tracks = Array.from({ length: upTo - pending }, (_, i) => `t${pending + i}`);
      await pool.query(
        `INSERT INTO "${schema}"."${table}" (panel, remote_track_id, body, content_hash, state, attempts, next_attempt_at, created_at, updated_at)
          SELECT $1, track, '{}', 'h', 'pending', 0, 0, 0, 0 FROM unnest($2::text[]) AS track`,
        [PANEL, tracks],
      );
      pending = upTo;
    };
    const measure = async () => {
      const fresh = Array.from({ length: 8 }, (_, i) => `new-${pending}-${i}`);
      const none = fresh.map(() => null);
      const enqueue = await pagesRead(sql.insertManyIfNew, [
        fresh,
        fresh.map(() => '{}'),
        fresh.map(() => 'h'),
        fresh.map(() => PANEL),
        fresh.map(() => 1),
        none,
        none,
        none,
      ]);
      const claim = await pagesRead(sql.claim, [0, 8, 'owner', 60_000, [], PANEL]);
      // With many panels: visit up to 8 panels from the start, none held or probing.
      const fairClaim = await pagesRead(sql.claimFair, [0, 8, 'owner', 60_000, [], '', 8, [], []]);
      // Outcomes of 8 rows leased to 'owner' (the oldest 8), as a worker records them.
      const { rows: leased } = await pool.query(
        `UPDATE "${schema}"."${table}" SET lease_owner = 'owner', lease_expires_at = 1 WHERE id IN (SELECT id FROM "${schema}"."${table}" ORDER BY id LIMIT 8) RETURNING id`,
      );
      const ids = leased.map((row) => Number(row.id));
      const each = <T>(value: T) => ids.map(() => value);
      const outcomes = [each('delivered'), each(1), each(null), each(null), each(7), each(2), each(2), each('owner')];
      const settle = await pagesRead(sql.settleMany, [ids, ...outcomes, each('h'), 'owner']);
      return { enqueue, claim, fairClaim, settle };
    };
    await store.migrate();
    await fill(100);
    const few = await measure();
    await fill(10_000);
    const many = await measure();
    // Deeper indexes cost a page or two per lookup (about 1.7 times the pages here); a lookup that
    // walked every pending row of the panel cost 20 times per enqueue and 4 times per claim.
    expect(many.enqueue, `pages per batch of 8 enqueues: ${few.enqueue} with 100 pending, ${many.enqueue} with 10,000`).toBeLessThan(few.enqueue * 3);
    expect(many.claim, `pages per claim of 8: ${few.claim} with 100 pending, ${many.claim} with 10,000`).toBeLessThan(few.claim * 3);
    expect(many.fairClaim, `pages per claim of 8 across panels: ${few.fairClaim} with 100 pending, ${many.fairClaim} with 10,000`).toBeLessThan(
      few.fairClaim * 3,
    );
    // Most of a batch's pages are its writes, the same however many are pending. Found through the
    // one-pending-row index (walking it), 8 outcomes read 54 pages more with 10,000 pending than
    // with 100; by id, 7 more (deeper indexes): at most 3 a row is allowed.
    expect(many.settle, `pages per batch of 8 outcomes: ${few.settle} with 100 pending, ${many.settle} with 10,000`).toBeLessThan(few.settle + 3 * 8);
  });

  it('finds the deliveries a feed read must stamp, and reads a page of the feed, through their indexes however many releases are pending or delivered', async () => {
    const table = 'feed_plans';
    const store = postgresOutboxStore({ pool, schema, table });
    const sql = operationStatements(tableNames(schema, table), 'database');
    const t = `"${schema}"."${table}"`;
    await store.migrate();
    /** `n` more rows of `state`, of two panels; delivered ones given the next positions when `fed`. */
    const add = (n: number, state: 'pending' | 'delivered', fed = false) =>
      pool.query(
        `INSERT INTO ${t} (panel, body, content_hash, state, attempts, next_attempt_at, delivered_at, created_at, updated_at, feed_position)
          SELECT CASE WHEN n % 2 = 0 THEN '${PANEL}' ELSE 'panel-b' END, '{}', 'h', $1, 0, 0, CASE WHEN $1 = 'delivered' THEN n END, 0, 0,
            CASE WHEN $2 THEN (SELECT COALESCE(MAX(feed_position), 0) FROM ${t}) + n END
          FROM generate_series(1, $3::int) AS n`,
        [state, fed, n],
      );
    await add(2_000, 'delivered', true);
    await add(100, 'delivered');
    await add(100, 'pending');
    // As the store reads a page (postgres-operations.ts, inIndexOrder).
    const inOrder = 'SET LOCAL enable_bitmapscan = off';
    /** The highest position given (stamping goes on above it; the unique index refuses one given twice). */
    let top = 2_000;
    const measure = async () => ({
      probe: await planOf(sql.unstamped, []),
      stamp: await planOf(sql.stamp, [top, 50]),
      feed: await planOf(sql.feed, [1_000, 50], inOrder),
      panelFeed: await planOf(sql.feedOfPanel, [1_000, 50, PANEL], inOrder),
      panelAfter: await planOf(sql.panelAfter, [1_000, 50, PANEL], inOrder),
    });
    const few = await measure();
    await add(10_000, 'pending');
    await add(20_000, 'delivered', true);
    top += 20_000;
    const many = await measure();
    for (const [name, index] of [
      ['probe', 'unfed'],
      ['stamp', 'unfed'],
      ['feed', 'feed'],
      ['panelFeed', 'panel_feed'],
      ['panelAfter', 'panel_feed'],
    ] as const) {
      expect(many[name].indexes, `${name}'s plan`).toContain(`${table}_${index}`);
      // Neither one page per pending row nor per delivery ahead of the cursor (10,000 rows fill
      // about 100 pages); as a bitmap and a sort, a page of one panel's feed read 346 pages, not 4.
      const [before, after] = [few[name].readPages, many[name].readPages];
      expect(after, `pages ${name} read: ${before} with 1,000 deliveries ahead and 100 pending, ${after} with 21,000 and 10,100`).toBeLessThan(before + 10);
    }
  });
});

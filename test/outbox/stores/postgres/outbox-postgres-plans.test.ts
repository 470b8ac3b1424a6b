import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${text}`, values);
    const [{ Plan: plan }] = (rows[0] as { 'QUERY PLAN': [{ Plan: Record<string, number> }] })['QUERY PLAN'];
    return (plan['Shared Hit Blocks'] ?? 0) + (plan['Shared Read Blocks'] ?? 0);
  } finally {
    await client.query('ROLLBACK');
    client.release();
  }
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
});

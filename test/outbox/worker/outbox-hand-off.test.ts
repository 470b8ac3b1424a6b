import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createReleaseOutbox } from '../../../src/outbox/outbox.js';
import type { ClaimRequest, OutboxStore } from '../../../src/outbox/store.js';
import { postgresOutboxStore } from '../../../src/postgres.js';
import { waitFor } from '../../support/helpers.js';
import { DATABASE_URL, postgresAnswers, serviceAvailable } from '../../support/services.js';
import { enqueueTracks, gatedSender, watchedStore } from '../../support/worker-fakes.js';

// Hand-offs: once a claim has found every due row, a release this process enqueues is stored
// already leased to its worker, and goes out without a claim. Never past a backlog, never from a
// caller's transaction, and a row handed off but not sent goes back when the outbox closes.
const dir = mkdtempSync(join(tmpdir(), 'outbox-hand-off-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const freshFile = () => join(dir, `hand-off-${++files}.db`);
const silent = { warn() {}, error() {} };
/** No poll while a test runs: every claim it sees was asked for by the worker. */
const NO_POLL = 60_000;
const trackOf = (body: string) => (JSON.parse(body) as { release: { remote_track_id: string } }).release.remote_track_id;

/** An outbox on a watched SQLite store whose first claim found nothing: it hands releases off from now on. */
async function handingOff(concurrency: number) {
  const gate = gatedSender();
  const { store, inner, claims } = watchedStore(freshFile());
  const outbox = createReleaseOutbox({ client: gate.sender, store, concurrency, pollIntervalMs: NO_POLL, logger: silent });
  await waitFor(() => claims.length === 1, 'the first claim');
  await new Promise((resolve) => setImmediate(resolve));
  return { gate, inner, claims, outbox };
}

describe('hand-offs to the worker (SQLite)', () => {
  it('sends releases enqueued while it runs without a claim each, every one stored leased to the worker first', async () => {
    const { gate, inner, claims, outbox } = await handingOff(2);
    try {
      const { id } = await outbox.enqueue({ title: 'Held', remote_track_id: 'held' });
      await waitFor(() => gate.active() === 1, 'its push under way');
      const [row] = inner.list({ state: 'pending', limit: 10, id }) as Awaited<ReturnType<OutboxStore['list']>>;
      expect(row?.leaseOwner).toMatch(/./);
      gate.open();
      await enqueueTracks(outbox, 30);
      await outbox.drain({ signal: AbortSignal.timeout(10_000) });
      expect(gate.bodies).toHaveLength(31);
      // One claim at the start; none for the 31 releases.
      expect(claims).toHaveLength(1);
    } finally {
      await outbox.close();
      await inner.close();
    }
  });

  it('never hands off a release past a backlog: it goes out after the releases enqueued before it', async () => {
    const gate = gatedSender();
    const { store, inner } = watchedStore(freshFile());
    const outbox = createReleaseOutbox({ client: gate.sender, store, concurrency: 1, autoStart: false, pollIntervalMs: NO_POLL, logger: silent });
    try {
      await enqueueTracks(outbox, 100);
      outbox.start();
      // A few answered one by one, so the rows claimed ahead leave room for one more.
      for (let answered = 0; answered < 5; answered++) {
        await waitFor(() => gate.active() === 1, `push ${answered + 1}`);
        gate.answerWaiting();
      }
      await waitFor(() => gate.active() === 1, 'push 6');
      await outbox.enqueue({ title: 'Late', remote_track_id: 'late' });
      gate.open();
      await outbox.drain({ signal: AbortSignal.timeout(10_000) });
      expect(gate.bodies.map(trackOf).indexOf('late')).toBe(100);
    } finally {
      await outbox.close();
      await inner.close();
    }
  });

  it('sends releases enqueued one after another in their order when the caller outpaces the mother (some then wait in the store)', async () => {
    const { gate, inner, outbox } = await handingOff(1);
    try {
      // Three enqueues per push answered: more than the worker takes ahead (up to 64) soon wait in the store.
      const order: string[] = [];
      for (let i = 0; i < 240; i++) {
        await outbox.enqueue({ title: `Track ${i}`, remote_track_id: `t-${i}` });
        order.push(`t-${i}`);
        if (i % 3 === 2) {
          await waitFor(() => gate.active() === 1, `push ${i / 3}`);
          gate.answerWaiting();
        }
      }
      gate.open();
      await outbox.drain({ signal: AbortSignal.timeout(10_000) });
      expect(gate.bodies.map(trackOf)).toEqual(order);
    } finally {
      await outbox.close();
      await inner.close();
    }
  });

  it('hands back a release handed off but not sent when the outbox closes, due at once for the next one', async () => {
    const { gate, inner, outbox } = await handingOff(1);
    try {
      await outbox.enqueue({ title: 'Sent', remote_track_id: 'sent' });
      await waitFor(() => gate.active() === 1, 'its push under way');
      // Handed off behind the push that waits; the third is still being stored as close() starts.
      await outbox.enqueue({ title: 'Waiting', remote_track_id: 'waiting' });
      const storing = outbox.enqueue({ title: 'Storing', remote_track_id: 'storing' });
      const closing = outbox.close();
      gate.open();
      await Promise.all([storing, closing]);
      const pending = inner.list({ state: 'pending', limit: 10 }) as Awaited<ReturnType<OutboxStore['list']>>;
      expect(pending.map((row) => [row.remoteTrackId, row.leaseOwner, row.attempts])).toEqual([
        ['waiting', undefined, 0],
        ['storing', undefined, 0],
      ]);
      expect(pending.every((row) => row.nextAttemptAt <= Date.now())).toBe(true);
      expect(gate.bodies.map(trackOf)).toEqual(['sent']);
    } finally {
      await outbox.close();
      await inner.close();
    }
  });
});

const havePostgres = serviceAvailable('PostgreSQL', DATABASE_URL, await postgresAnswers());
const schema = `test_outbox_hand_off_${process.pid}`;
let pool: pg.Pool;

describe.skipIf(!havePostgres)('hand-offs to the worker (PostgreSQL)', () => {
  beforeAll(() => {
    pool = new pg.Pool({ connectionString: DATABASE_URL, max: 6 });
  });
  afterAll(async () => {
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await pool.end();
  });

  /** The PostgreSQL store, recording its claims and the ids they leased. */
  function countedStore(table: string) {
    const inner = postgresOutboxStore({ pool, schema, table });
    const claims: ClaimRequest[] = [];
    const claimedIds: number[] = [];
    const store: OutboxStore = {
      ...inner,
      async claimDue(request) {
        claims.push(request);
        const rows = await inner.claimDue(request);
        claimedIds.push(...rows.map((row) => row.id));
        return rows;
      },
    };
    return { store, inner, claims, claimedIds };
  }

  it('stores a release leased to the worker on the database clock; one enqueued in a caller’s transaction is left to a claim', async () => {
    const { store, inner, claims, claimedIds } = countedStore('leased');
    await inner.migrate();
    const gate = gatedSender();
    const leaseMs = 45_000;
    const outbox = createReleaseOutbox({ client: gate.sender, store, concurrency: 1, leaseMs, pollIntervalMs: 300, logger: silent });
    const db = await pool.connect();
    const table = `"${schema}"."leased"`;
    const databaseNow = async () => Number((await pool.query('SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint AS now')).rows[0].now);
    try {
      await waitFor(() => claims.length === 1, 'the first claim');
      await new Promise((resolve) => setTimeout(resolve, 20));
      const before = await databaseNow();
      const alone = await outbox.enqueue({ title: 'Handed off', remote_track_id: 'alone' });
      const after = await databaseNow();
      await waitFor(() => gate.active() === 1, 'its push under way');
      const leased = (await pool.query(`SELECT lease_owner, lease_expires_at FROM ${table} WHERE id = $1`, [alone.id])).rows[0];
      expect(leased.lease_owner).toMatch(/./);
      expect(Number(leased.lease_expires_at)).toBeGreaterThanOrEqual(before + leaseMs);
      expect(Number(leased.lease_expires_at)).toBeLessThanOrEqual(after + leaseMs);
      // No claim leased it (the poll may have claimed meanwhile, and found nothing).
      expect(claimedIds).not.toContain(alone.id);
      await db.query('BEGIN');
      const inTransaction = await outbox.enqueue({ title: 'Committed later', remote_track_id: 'tx' }, { transaction: db });
      const seen = (await db.query(`SELECT lease_owner, lease_expires_at FROM ${table} WHERE id = $1`, [inTransaction.id])).rows[0];
      expect(seen).toEqual({ lease_owner: null, lease_expires_at: null });
      await db.query('COMMIT');
      gate.open();
      await outbox.drain({ signal: AbortSignal.timeout(10_000) });
      expect(gate.bodies.map(trackOf)).toEqual(['alone', 'tx']);
    } finally {
      db.release();
      await outbox.close();
    }
  });
});

// Every store keeps an enqueue's trace context with its row and hands it back on claims (the
// delivery span links to it, from whichever process claims the row), through every write path:
// a new track, a row without a track, a replaced payload, a batch of enqueues, a caller's
// transaction; and a table of the version before keeps its rows and gains the column.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { loadSqliteDriver } from '../../../src/db/sqlite-driver.js';
import type { ClaimedRow, NewOutboxRow, OutboxStore } from '../../../src/outbox/store.js';
import { mysqlOutboxStore } from '../../../src/outbox/stores/mysql/mysql-store.js';
import { postgresOutboxStore } from '../../../src/outbox/stores/postgres/postgres-store.js';
import { sqliteOutboxStore } from '../../../src/outbox/stores/sqlite/sqlite-store.js';
import { STORE_KINDS } from '../../support/four-stores.js';
import { DATABASE_URL, MYSQL_URL, mysqlAnswers, postgresAnswers } from '../../support/services.js';

const T0 = 1_700_000_000_000;
const PANEL = 'panel-a';
const CONTEXT_A = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
const CONTEXT_B = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 congo=t61rcWkgMzE,rojo=00f067aa0ba902b7';

function row(title: string, remoteTrackId: string | undefined, traceContext: string | undefined): NewOutboxRow {
  const body = JSON.stringify({ release: { title, remote_track_id: remoteTrackId } });
  return { panel: PANEL, remoteTrackId, body, contentHash: `hash:${body}`, traceContext };
}

async function claimAll(store: OutboxStore): Promise<Map<number, ClaimedRow>> {
  const rows = await store.claimDue({ panel: PANEL, owner: 'w', limit: 50, nowMs: T0 + 1, leaseMs: 60_000 });
  return new Map(rows.map((claimed) => [claimed.id, claimed]));
}

describe.each(STORE_KINDS)('the %s store', (_kind, make) => {
  it('hands back the trace context each row was enqueued with, on claims of one panel and fair claims', async () => {
    const { store, close } = make('outbox');
    try {
      const tracked = await store.enqueue(row('Tracked', 't-1', CONTEXT_A), T0);
      const untracked = await store.enqueue(row('No track', undefined, CONTEXT_B), T0);
      const untraced = await store.enqueue(row('Untraced', 't-2', undefined), T0);
      // Concurrent enqueues of new tracks (one statement on PostgreSQL) keep each row's own.
      const batch = await Promise.all(
        Array.from({ length: 6 }, (_, i) => store.enqueue(row(`Batch ${i}`, `b-${i}`, `00-${'1'.repeat(31)}${i}-${'2'.repeat(16)}-01`), T0)),
      );
      const claimed = await claimAll(store);
      expect(claimed.get(tracked.id)?.traceContext).toBe(CONTEXT_A);
      expect(claimed.get(untracked.id)?.traceContext).toBe(CONTEXT_B);
      expect(claimed.get(untraced.id)?.traceContext).toBeUndefined();
      expect(batch.map((result) => claimed.get(result.id)?.traceContext)).toEqual(batch.map((_, i) => `00-${'1'.repeat(31)}${i}-${'2'.repeat(16)}-01`));

      const fresh = await store.enqueue({ ...row('Fair', 't-9', CONTEXT_B), panel: 'panel-b' }, T0);
      const fair = await store.claimFair?.({
        owner: 'w',
        limit: 10,
        nowMs: T0 + 1,
        leaseMs: 60_000,
        after: '',
        maxPanels: 10,
        skipPanels: [],
        probePanels: [],
      });
      expect(fair?.rows.find((r) => r.id === fresh.id)?.traceContext).toBe(CONTEXT_B);
    } finally {
      await close();
    }
  });

  it('gives a replaced payload the newer enqueue’s context, and keeps the first for an identical one', async () => {
    const { store, close } = make('outbox');
    try {
      const first = await store.enqueue(row('One', 't-1', CONTEXT_A), T0);
      const same = await store.enqueue(row('One', 't-1', CONTEXT_B), T0 + 1);
      expect(same.id).toBe(first.id); // the same content: the row is left as it was
      expect((await claimAll(store)).get(first.id)?.traceContext).toBe(CONTEXT_A);
    } finally {
      await close();
    }
    const other = make('outbox');
    try {
      const first = await other.store.enqueue(row('One', 't-1', CONTEXT_A), T0);
      const replaced = await other.store.enqueue(row('Two', 't-1', CONTEXT_B), T0 + 1);
      expect(replaced).toMatchObject({ id: first.id, deduplicated: 'replaced-pending' });
      expect((await claimAll(other.store)).get(first.id)?.traceContext).toBe(CONTEXT_B);
    } finally {
      await other.close();
    }
  });
});

const dir = mkdtempSync(join(tmpdir(), 'outbox-trace-'));
const pool = (await postgresAnswers()) ? new pg.Pool({ connectionString: DATABASE_URL, max: 4 }) : undefined;
const mysqlPool = (await mysqlAnswers()) ? mysql.createPool({ uri: MYSQL_URL, connectionLimit: 4 }) : undefined;
const schema = `test_trace_${process.pid}`;
const table = `test_trace_${process.pid}`;
afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  await pool?.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).finally(() => pool.end());
  await mysqlPool?.query(`DROP TABLE IF EXISTS ${table}, ${table}_tracks, ${table}_migrations, ${table}_controls`).finally(() => mysqlPool.end());
});

describe('a table written before trace contexts', () => {
  it('SQLite (v5): gains the column, keeps its rows, stores contexts from then on', async () => {
    const file = join(dir, 'v5.db');
    const before = sqliteOutboxStore({ file });
    const old = await before.enqueue(row('Old', 't-old', undefined), T0);
    await before.close();
    const Driver = loadSqliteDriver();
    const raw = new Driver(file);
    raw.exec('ALTER TABLE release_outbox DROP COLUMN trace_context');
    raw.pragma('user_version = 5');
    raw.close();
    const after = sqliteOutboxStore({ file });
    try {
      const fresh = await after.enqueue(row('New', 't-new', CONTEXT_A), T0);
      const claimed = await claimAll(after);
      expect(claimed.get(old.id)?.traceContext).toBeUndefined();
      expect(claimed.get(fresh.id)?.traceContext).toBe(CONTEXT_A);
    } finally {
      await after.close();
    }
  });

  if (pool)
    it('PostgreSQL (v6): gains the column, keeps its rows, stores contexts in a caller’s transaction too', async () => {
      const before = postgresOutboxStore({ pool, schema, leaseClock: 'outbox' });
      const old = await before.enqueue(row('Old', 't-old', undefined), T0);
      await before.close();
      await pool.query(`ALTER TABLE "${schema}".release_outbox DROP COLUMN trace_context`);
      await pool.query(`DELETE FROM "${schema}".release_outbox_migrations WHERE version = 7`);
      const after = postgresOutboxStore({ pool, schema, leaseClock: 'outbox' });
      try {
        await after.migrate?.();
        const client = await pool.connect();
        let inCaller: number;
        try {
          await client.query('BEGIN');
          inCaller = (await after.enqueue(row('In caller', 't-caller', CONTEXT_B), T0, { transaction: client })).id;
          const untracked = (await after.enqueue(row('No track', undefined, CONTEXT_A), T0, { transaction: client })).id;
          await after.enqueue(row('Replaced', 't-caller', CONTEXT_A), T0 + 1, { transaction: client });
          await client.query('COMMIT');
          const claimed = await claimAll(after);
          expect(claimed.get(old.id)?.traceContext).toBeUndefined();
          expect(claimed.get(inCaller)?.traceContext).toBe(CONTEXT_A);
          expect(claimed.get(untracked)?.traceContext).toBe(CONTEXT_A);
        } finally {
          client.release();
        }
      } finally {
        await after.close();
      }
    });

  if (mysqlPool)
    it('MySQL (v2): gains the column, keeps its rows, stores contexts in a caller’s transaction too', async () => {
      const before = mysqlOutboxStore({ pool: mysqlPool, table, leaseClock: 'outbox' });
      const old = await before.enqueue(row('Old', 't-old', undefined), T0);
      await before.close();
      await mysqlPool.query(`ALTER TABLE ${table} DROP COLUMN trace_context`);
      await mysqlPool.query(`DELETE FROM ${table}_migrations WHERE version = 3`);
      const after = mysqlOutboxStore({ pool: mysqlPool, table, leaseClock: 'outbox' });
      try {
        await after.migrate?.();
        const connection = await mysqlPool.getConnection();
        try {
          await connection.beginTransaction();
          const inCaller = (await after.enqueue(row('In caller', 't-caller', CONTEXT_B), T0, { transaction: connection })).id;
          await after.enqueue(row('Replaced', 't-caller', CONTEXT_A), T0 + 1, { transaction: connection });
          const untracked = (await after.enqueue(row('No track', undefined, CONTEXT_B), T0, { transaction: connection })).id;
          await connection.commit();
          const claimed = await claimAll(after);
          expect(claimed.get(old.id)?.traceContext).toBeUndefined();
          expect(claimed.get(inCaller)?.traceContext).toBe(CONTEXT_A);
          expect(claimed.get(untracked)?.traceContext).toBe(CONTEXT_B);
        } finally {
          connection.release();
        }
      } finally {
        await after.close();
      }
    });
});

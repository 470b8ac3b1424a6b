// PostgreSQL transactions as apps run them: sessions reset with DISCARD ALL between requests
// (the store sends its statements unnamed on the caller's client), READ UNCOMMITTED (which
// PostgreSQL runs as READ COMMITTED), and a statement_timeout that fires during an enqueue.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../../../../src/emulator/emulator.js';
import { createReleaseOutbox } from '../../../../src/outbox/outbox.js';
import { postgresOutboxStore } from '../../../../src/outbox/stores/postgres/postgres-store.js';
import { clientFor, startEmulator } from '../../../support/helpers.js';
import { DATABASE_URL, postgresAnswers, serviceAvailable } from '../../../support/services.js';

const havePostgres = serviceAvailable('PostgreSQL', DATABASE_URL, await postgresAnswers());
let emulator: MotherEmulator;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(() => emulator.close());

async function withStore<T>(name: string, work: (ctx: { schema: string; appPool: pg.Pool; outbox: ReturnType<typeof createReleaseOutbox> }) => Promise<T>) {
  const schema = `test_caller_${name}_${process.pid}`;
  const storePool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
  const appPool = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
  const store = postgresOutboxStore({ pool: storePool, schema });
  await store.migrate();
  const outbox = createReleaseOutbox({ client: clientFor(emulator), store, pollIntervalMs: 60_000 });
  try {
    await storePool.query(`CREATE TABLE "${schema}".own (id serial PRIMARY KEY, title text)`);
    return await work({ schema, appPool, outbox });
  } finally {
    await outbox.close();
    await storePool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await Promise.all([storePool.end(), appPool.end()]);
  }
}

describe.skipIf(!havePostgres)('named statements on the app’s clients', () => {
  it('an app that resets its pooled sessions with DISCARD ALL between requests can still enqueue in its transaction', async () => {
    await withStore('discard', async ({ schema, appPool, outbox }) => {
      const answers: string[] = [];
      for (let request = 0; request < 3; request++) {
        const client = await appPool.connect();
        try {
          await client.query('BEGIN');
          await client.query(`INSERT INTO "${schema}".own (title) VALUES ($1)`, [`request ${request}`]);
          await outbox.enqueue({ title: `Discard ${request}`, remote_track_id: `discard-${request}` }, { transaction: client });
          await client.query('COMMIT');
          answers.push('committed');
        } catch (error) {
          answers.push(`failed: ${(error as Error).message.slice(0, 140)}`);
          await client.query('ROLLBACK');
        } finally {
          // A common reset of a pooled session (role, search_path, temp tables) before the next request.
          await client.query('DISCARD ALL');
          client.release();
        }
      }
      expect(answers).toEqual(['committed', 'committed', 'committed']);
    });
  });
});

describe.skipIf(!havePostgres)('isolation levels PostgreSQL treats as READ COMMITTED', () => {
  it('enqueues in a READ UNCOMMITTED transaction (PostgreSQL runs it as READ COMMITTED)', async () => {
    await withStore('ru', async ({ appPool, outbox }) => {
      const client = await appPool.connect();
      try {
        await client.query('BEGIN ISOLATION LEVEL READ UNCOMMITTED');
        const answer = await outbox.enqueue({ title: 'RU', remote_track_id: 'ru-1' }, { transaction: client }).then(
          () => 'resolved',
          (e: Error) => `rejected: ${e.message}`,
        );
        await client.query('COMMIT');
        expect(answer).toBe('resolved');
      } finally {
        client.release();
      }
    });
  });
});

describe.skipIf(!havePostgres)('statement_timeout in the caller’s session', () => {
  it('a timed-out enqueue says the transaction is aborted, and stores nothing', async () => {
    await withStore('st', async ({ schema, appPool, outbox }) => {
      // Another transaction holds the track's pending slot, uncommitted.
      const otherPool = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
      const other = await otherPool.connect();
      try {
        await other.query('BEGIN');
        await outbox.enqueue({ title: 'Holder', remote_track_id: 'st-1' }, { transaction: other });
        const client = await appPool.connect();
        try {
          await client.query("SET statement_timeout = '200ms'");
          await client.query('BEGIN');
          await client.query(`INSERT INTO "${schema}".own (title) VALUES ('mine')`);
          const answer = await outbox.enqueue({ title: 'Timed out', remote_track_id: 'st-1' }, { transaction: client }).then(
            () => 'resolved',
            (e: Error) => `rejected: ${e.message}`,
          );
          await client.query('ROLLBACK');
          await client.query('RESET statement_timeout');
          expect(answer).toMatch(/^rejected: .*aborted the transaction/);
        } finally {
          client.release();
        }
      } finally {
        await other.query('ROLLBACK');
        other.release();
        await otherPool.end();
      }
      expect(await outbox.list()).toEqual([]);
    });
  });
});

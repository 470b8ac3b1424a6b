import { CamelCasePlugin, type Kysely } from 'kysely';
import mysqlCallback from 'mysql2';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../../../../src/emulator/emulator.js';
import { TransactionEndedError } from '../../../../src/errors.js';
import { createReleaseOutbox } from '../../../../src/outbox/outbox.js';
import { clientFor, sleep, startEmulator, waitFor } from '../../../support/helpers.js';
import { NO_BACKSLASH_ESCAPES_ON } from '../../../support/mysql-sessions.js';
import { BUILDERS, type Database, type Kit, ownTable, SCHEMA, storeOn } from '../../../support/query-builders.js';
import { DATABASE_URL, MYSQL_URL, mysqlAnswers, postgresAnswers, serviceAvailable } from '../../../support/services.js';

// The transactional outbox with the transactions of Knex, Kysely and Drizzle, on real PostgreSQL
// and MySQL/MariaDB servers: the release commits or rolls back with the panel's own rows, a
// refusal leaves the transaction usable, and what cannot be joined is refused with the list.
const available: Record<Database, boolean> = {
  postgres: serviceAvailable('PostgreSQL', DATABASE_URL, await postgresAnswers()),
  mysql: serviceAvailable('MySQL/MariaDB', MYSQL_URL, await mysqlAnswers()),
};
const COMBINATIONS = (Object.keys(BUILDERS) as (keyof typeof BUILDERS)[]).flatMap((builder) =>
  (['postgres', 'mysql'] as const).map((database) => ({ builder, database, name: `${builder} on ${database === 'postgres' ? 'PostgreSQL' : 'MySQL'}` })),
);

let emulator: MotherEmulator;
const cleanups: (() => Promise<unknown>)[] = [];
let tables = 0;
const freshTable = () => `qb_${process.pid}_${++tables}`;
const release = (title: string, remote_track_id?: string) => ({ title, primary_artist: 'Ada', ...(remote_track_id === undefined ? {} : { remote_track_id }) });
/** Runs of the not-awaited enqueue per combination: the race goes either way from one run to the next. */
const ABANDONED_RUNS = 12;
const delivered = (title: string) => emulator.releases.filter((r) => r.release.title === title);

beforeAll(async () => {
  emulator = await startEmulator();
  if (available.postgres) {
    const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
    await admin.query(`CREATE SCHEMA IF NOT EXISTS "${SCHEMA}"`);
    cleanups.push(async () => {
      await admin.query(`DROP SCHEMA IF EXISTS "${SCHEMA}" CASCADE`);
      await admin.end();
    });
  }
  if (available.mysql) {
    const admin = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 1 });
    cleanups.push(async () => {
      const [rows] = await admin.query('SELECT table_name AS name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE ?', [
        `%qb\\_${process.pid}\\_%`,
      ]);
      for (const { name } of rows as { name: string }[]) await admin.query(`DROP TABLE IF EXISTS \`${name}\``);
      await admin.end();
    });
  }
});
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await emulator.close();
});

/** The builder's kit, an outbox on a fresh table of `database`, and the panel's own table beside it. */
async function setUp(builder: keyof typeof BUILDERS, database: Database, { migrate = true } = {}) {
  const kit: Kit = BUILDERS[builder](database);
  const table = freshTable();
  const own = ownTable(database, table);
  const { store, end } = storeOn(database, table);
  if (migrate) await store.migrate();
  // Not started before migrate(): the worker's first poll would create the table.
  const outbox = createReleaseOutbox({ client: clientFor(emulator), store, pollIntervalMs: 50, autoStart: migrate });
  cleanups.push(async () => {
    await outbox.close();
    await end();
    await kit.close();
  });
  return { kit, outbox, store, own };
}

describe.each(COMBINATIONS)('$name', ({ builder, database, name }) => {
  // The emulator is shared by every combination: titles say which one sent them.
  const title = (what: string) => `${what} (${name})`;
  it.skipIf(!available[database])('delivers what its transaction committed, and never what it rolled back', async () => {
    const { kit, outbox, own } = await setUp(builder, database);
    await createOwnTable(database, own);

    await kit.transaction(async (trx) => {
      await kit.insertOwn(trx, own, 'Kept');
      await outbox.enqueue(release(title('Kept'), `kept-${builder}`), { transaction: trx });
      // Not visible outside the transaction before it commits.
      expect((await outbox.stats()).pending).toBe(0);
    });
    await expect(
      kit.transaction(async (trx) => {
        await kit.insertOwn(trx, own, 'Dropped');
        await outbox.enqueue(release(title('Dropped')), { transaction: trx });
        throw new Error('the upload failed after the enqueue');
      }),
    ).rejects.toThrow(/the upload failed/);
    // The panel's own insert fails after the enqueue: the builder rolls the whole transaction back.
    await expect(
      kit.transaction(async (trx) => {
        await outbox.enqueue(release(title('Duplicate title')), { transaction: trx });
        await kit.insertOwn(trx, own, 'Kept');
      }),
    ).rejects.toSatisfy(isDuplicateKey);

    await waitFor(() => delivered(title('Kept')).length === 1, 'the committed release delivered', 5000);
    await sleep(300);
    expect(delivered(title('Kept'))).toHaveLength(1);
    expect(delivered(title('Dropped'))).toEqual([]);
    expect(delivered(title('Duplicate title'))).toEqual([]);
    expect((await outbox.list()).map((row) => row.release.title)).toEqual([title('Kept')]);
  });

  it.skipIf(!available[database])('never stores an enqueue still running when the callback throws, and never resolves it with an id', async () => {
    const { kit, outbox } = await setUp(builder, database);
    const running: unknown[] = [];
    for (let run = 0; run < ABANDONED_RUNS; run++) {
      let enqueued: Promise<unknown> = Promise.resolve();
      let settled = false;
      await expect(
        kit.transaction(async (trx) => {
          // Not awaited (with a track, and without); the callback throws at once or a little later,
          // so that the library's ROLLBACK reaches the connection before, between or after its statements.
          enqueued = outbox.enqueue(release(title(`Abandoned ${run}`), run % 2 === 0 ? `abandoned-${run}` : undefined), { transaction: trx });
          enqueued.then(
            () => (settled = true),
            () => {},
          );
          await [undefined, new Promise(setImmediate), sleep(1), sleep(3)][run % 4];
          if (!settled)
            running.push(
              enqueued.then(
                (result) => ({ resolved: result, atOnce: run % 4 === 0 }),
                (error: unknown) => error,
              ),
            );
          throw new Error('the upload failed');
        }),
      ).rejects.toThrow(/the upload failed/);
    }
    // An enqueue still running when the callback threw rejects, saying the release was not stored
    // (Drizzle cannot tell whether the transaction committed, and may say it does not know, or
    // that there is no open transaction). Only
    // Knex says it is ending the transaction as it sends ROLLBACK: with Kysely and Drizzle, an
    // enqueue whose last statement was already on its way may still resolve (docs/outbox.md), but
    // not one whose callback threw at once, and whatever it answers, nothing of it is stored.
    expect(running.length).toBeGreaterThanOrEqual(ABANDONED_RUNS / 2);
    for (const outcome of await Promise.all(running)) {
      if (builder !== 'Knex' && (outcome as { atOnce?: boolean }).atOnce === false) continue;
      // Drizzle tells nothing: a transaction that ended before the enqueue's first statement is no transaction.
      if (builder === 'Drizzle' && outcome instanceof TypeError) expect(outcome.message).toMatch(/no open transaction|already ended/);
      else expect(outcome).toBeInstanceOf(TransactionEndedError);
      if (builder !== 'Drizzle') expect(outcome).toMatchObject({ code: 'TRANSACTION_ENDED', stored: false });
    }
    await sleep(300);
    expect(await outbox.list()).toEqual([]);
    expect(emulator.releases.filter((r) => String(r.release.title).startsWith('Abandoned') && String(r.release.title).endsWith(`(${name})`))).toEqual([]);
  });

  it.skipIf(!available[database])('leaves its transaction usable when the outbox refuses, and takes turns on one transaction', async () => {
    const { kit, outbox, store, own } = await setUp(builder, database, { migrate: false });
    await createOwnTable(database, own);
    // Before migrate(): refused (creating the table inside the caller's transaction is not ours to do).
    await kit.transaction(async (trx) => {
      await expect(outbox.enqueue(release(title('Early')), { transaction: trx })).rejects.toThrow(/call `await store.migrate\(\)` at start-up/);
      await kit.insertOwn(trx, own, 'after the refusal');
    });
    expect(await ownTitles(database, own)).toEqual(['after the refusal']);
    await store.migrate();
    if (database === 'postgres') {
      // A transaction-wide snapshot could miss a release another host just stored.
      await kit.transaction(async (trx) => {
        await kit.insertOwn(trx, own, 'before the isolation refusal');
        await expect(outbox.enqueue(release(title('Snapshot'), 'snap'), { transaction: trx })).rejects.toThrow(/only enqueue in a READ COMMITTED transaction/);
        await kit.insertOwn(trx, own, 'after the isolation refusal');
      }, 'repeatable read');
      expect(await ownTitles(database, own)).toEqual(expect.arrayContaining(['before the isolation refusal', 'after the isolation refusal']));
    }
    await kit.transaction((trx) => Promise.all([1, 2, 3].map((v) => outbox.enqueue(release(title(`v${v}`), 'one-track'), { transaction: trx }))));
    expect((await outbox.list({ state: 'pending' })).map((entry) => entry.release.title)).toEqual([title('v3')]);
  });

  it.skipIf(!available[database])('refuses its database object, a finished transaction and anything else, naming what it takes', async () => {
    const { kit, outbox } = await setUp(builder, database);
    await expect(outbox.enqueue(release(title('Not a transaction')), { transaction: kit.db })).rejects.toThrow(
      /not a transaction: pass the `tx|not a transaction: pass the `trx/,
    );
    const finished = await kit.transaction(async (trx) => trx);
    await expect(outbox.enqueue(release(title('Too late')), { transaction: finished })).rejects.toThrow(/already committed|open transaction/);
    await expect(outbox.enqueue(release(title('Unknown')), { transaction: { query: 1 } })).rejects.toThrow(
      /a Knex transaction on .*a Kysely transaction.*a Drizzle transaction on/,
    );
    expect(await outbox.stats()).toMatchObject({ pending: 0, delivered: 0 });
  });
});

describe.each(Object.keys(BUILDERS) as (keyof typeof BUILDERS)[])('%s on MySQL, its session with NO_BACKSLASH_ESCAPES', (builder) => {
  it.skipIf(!available.mysql)('stores the release’s text byte for byte (never read as SQL)', async () => {
    const { kit, outbox } = await setUp(builder, 'mysql');
    // Text that ends its quotes when backslashes are not escapes.
    const attack = release(`x', 'y', 'z', 'pending', 0, 0, 0, 0)# \\' é😀 (${builder})`, `t\\', 1)# ${builder}`);
    await kit.transaction(async (trx) => {
      await kit.raw(trx, NO_BACKSLASH_ESCAPES_ON);
      await outbox.enqueue(attack, { transaction: trx });
    });
    expect((await outbox.list()).map((entry) => entry.release)).toEqual([attack]);
  });
});

describe.each(['postgres', 'mysql'] as const)('Kysely on %s', (database) => {
  it.skipIf(!available[database])('serializes enqueues through copies of one transaction (withPlugin, withoutPlugins)', async () => {
    const { kit, outbox } = await setUp('Kysely', database);
    await kit.transaction(async (trx) => {
      const one = trx as Kysely<unknown>;
      // Each copy would run its own savepoint on the one connection, interleaved, without the turns.
      const copies = [one, one.withPlugin(new CamelCasePlugin()), one.withoutPlugins(), one.withPlugin(new CamelCasePlugin())];
      await Promise.all(copies.map((copy, i) => outbox.enqueue(release(`copy ${i} (${database})`, `copy-${i}`), { transaction: copy })));
    });
    expect((await outbox.list({ state: 'pending' })).map((entry) => entry.release.remote_track_id).sort()).toEqual(['copy-0', 'copy-1', 'copy-2', 'copy-3']);
  });
});

describe.skipIf(!available.mysql)('a mysql2 callback connection', () => {
  it('is joined through its promise() wrapper', async () => {
    const { outbox } = await setUp('Knex', 'mysql');
    const pool = mysqlCallback.createPool({ uri: MYSQL_URL, connectionLimit: 1 });
    cleanups.push(() => new Promise((done) => pool.end(done)));
    const connection = await new Promise<mysqlCallback.PoolConnection>((done, fail) => pool.getConnection((error, got) => (error ? fail(error) : done(got))));
    const db = connection.promise();
    await db.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
    await db.beginTransaction();
    await outbox.enqueue(release('Through a callback connection', 'callback'), { transaction: connection });
    await db.rollback();
    connection.release();
    expect(await outbox.stats()).toMatchObject({ pending: 0 });
  });
});

describe.skipIf(!available.postgres || !available.mysql)('a transaction on the other database', () => {
  it('is refused with the database it is on and the one the store needs', async () => {
    for (const builder of Object.keys(BUILDERS) as (keyof typeof BUILDERS)[]) {
      const { outbox } = await setUp(builder, 'postgres');
      const other = BUILDERS[builder]('mysql');
      cleanups.push(() => other.close());
      await other.transaction(async (trx) => {
        await expect(outbox.enqueue(release('Elsewhere'), { transaction: trx })).rejects.toThrow(
          /on mysql2; this store needs one on pg|MysqlAdapter; this store needs PostgresAdapter|MySql2Transaction; this store joins Drizzle transactions on node-postgres/,
        );
      });
    }
  });
});

/** The database refused the panel's second row of one title (some builders wrap the driver's error). */
function isDuplicateKey(error: unknown): boolean {
  return /duplicate/i.test(`${(error as Error).message} ${((error as Error).cause as Error | undefined)?.message}`);
}

async function createOwnTable(database: Database, own: string): Promise<void> {
  const kit = BUILDERS.Knex(database);
  await (kit.db as import('knex').Knex).raw(`CREATE TABLE ${own} (title VARCHAR(100) PRIMARY KEY)`);
  await kit.close();
}

async function ownTitles(database: Database, own: string): Promise<string[]> {
  const kit = BUILDERS.Knex(database);
  const rows = (await (kit.db as import('knex').Knex)(own).select('title').orderBy('title')) as { title: string }[];
  await kit.close();
  return rows.map((row) => row.title);
}

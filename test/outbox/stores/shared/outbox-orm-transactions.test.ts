import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../../../../src/emulator/emulator.js';
import { createReleaseOutbox } from '../../../../src/outbox/outbox.js';
import { clientFor, sleep, startEmulator, waitFor } from '../../../support/helpers.js';
import { ORMS, type OrmKit } from '../../../support/orm-kits.js';
import { type Database, ownTable, SCHEMA, storeOn } from '../../../support/query-builders.js';
import { DATABASE_URL, MYSQL_URL, mysqlAnswers, postgresAnswers, serviceAvailable } from '../../../support/services.js';

// The transactional outbox with the transactions of Prisma (its pg and MariaDB driver adapters),
// TypeORM, Sequelize (managed and unmanaged), postgres.js and MikroORM, on the real servers,
// through the one contract any library meets: `{ transaction, query }` (MikroORM: its Knex
// transaction). Committed → delivered once; rolled back → never sent; a refusal leaves the
// transaction usable; enqueues on one transaction take turns; statements outside any transaction
// are refused and store nothing.
const available: Record<Database, boolean> = {
  postgres: serviceAvailable('PostgreSQL', DATABASE_URL, await postgresAnswers()),
  mysql: serviceAvailable('MySQL/MariaDB', MYSQL_URL, await mysqlAnswers()),
};
const COMBINATIONS = (Object.keys(ORMS) as (keyof typeof ORMS)[]).flatMap((orm) =>
  (['postgres', 'mysql'] as const)
    .filter((database) => orm !== 'postgres.js' || database === 'postgres')
    .map((database) => ({ orm, database, name: `${orm} on ${database === 'postgres' ? 'PostgreSQL' : 'MySQL'}` })),
);

let emulator: MotherEmulator;
const cleanups: (() => Promise<unknown>)[] = [];
let tables = 0;
const freshTable = () => `orm_${process.pid}_${++tables}`;
const release = (title: string, remote_track_id?: string) => ({ title, primary_artist: 'Ada', ...(remote_track_id === undefined ? {} : { remote_track_id }) });
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
        `%orm\\_${process.pid}\\_%`,
      ]);
      for (const { name } of rows as { name: string }[]) await admin.query(`DROP TABLE IF EXISTS \`${name}\``);
      await admin.end();
    });
  }
}, 60_000);
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await emulator.close();
});

async function onDatabase(database: Database, statement: string): Promise<unknown[]> {
  if (database === 'postgres') {
    const client = new pg.Client({ connectionString: DATABASE_URL });
    await client.connect();
    try {
      return (await client.query(statement)).rows;
    } finally {
      await client.end();
    }
  }
  const connection = await mysql.createConnection({ uri: MYSQL_URL });
  try {
    return (await connection.query(statement))[0] as unknown[];
  } finally {
    await connection.end();
  }
}

async function setUp(orm: keyof typeof ORMS, database: Database, { migrate = true } = {}) {
  const kit = ORMS[orm](database) as OrmKit;
  const table = freshTable();
  const own = ownTable(database, table);
  await onDatabase(database, `CREATE TABLE ${own} (id ${database === 'postgres' ? 'serial' : 'int AUTO_INCREMENT'} PRIMARY KEY, title varchar(200) UNIQUE)`);
  const { store, end } = storeOn(database, table);
  if (migrate) await store.migrate();
  const outbox = createReleaseOutbox({ client: clientFor(emulator), store, pollIntervalMs: 50, autoStart: migrate });
  cleanups.push(async () => {
    await outbox.close();
    await end();
    await kit.close();
  });
  const ownTitles = async () => ((await onDatabase(database, `SELECT title FROM ${own} ORDER BY id`)) as { title: string }[]).map((row) => row.title);
  return { kit, outbox, store, own, ownTitles };
}

describe.each(COMBINATIONS)('$name', ({ orm, database, name }) => {
  const title = (what: string) => `${what} (${name})`;

  it.skipIf(!available[database])('delivers what its transaction committed, once, and never what it rolled back', async () => {
    const { kit, outbox, own, ownTitles } = await setUp(orm, database);
    await kit.transaction(async (join, tx) => {
      await kit.insertOwn(tx, own, 'Kept');
      await outbox.enqueue(release(title('Kept'), 'kept'), join);
      // Not visible outside the transaction before it commits.
      expect((await outbox.stats()).pending).toBe(0);
    });
    await expect(
      kit.transaction(async (join, tx) => {
        await kit.insertOwn(tx, own, 'Dropped');
        await outbox.enqueue(release(title('Dropped')), join);
        throw new Error('the upload failed after the enqueue');
      }),
    ).rejects.toThrow(/the upload failed/);
    await waitFor(() => delivered(title('Kept')).length === 1, 'the committed release delivered', 10_000);
    await sleep(300);
    expect(delivered(title('Kept'))).toHaveLength(1);
    expect(delivered(title('Dropped'))).toEqual([]);
    expect(await ownTitles()).toEqual(['Kept']);
    expect((await outbox.list()).map((row) => row.release.title)).toEqual([title('Kept')]);
  });

  it.skipIf(!available[database])('leaves its transaction usable when the outbox refuses, and takes turns on one transaction', async () => {
    const { kit, outbox, store, own, ownTitles } = await setUp(orm, database, { migrate: false });
    // Before migrate(): refused, and the caller's transaction goes on and commits.
    await kit.transaction(async (join, tx) => {
      await expect(outbox.enqueue(release(title('Early')), join)).rejects.toThrow(/call `await store.migrate\(\)` at start-up/);
      await kit.insertOwn(tx, own, 'after the refusal');
    });
    expect(await ownTitles()).toEqual(['after the refusal']);
    await store.migrate();
    // Three enqueues of one track at once on one transaction: they take turns (the rules keep the last).
    await kit.transaction((join) => Promise.all([1, 2, 3].map((v) => outbox.enqueue(release(title(`v${v}`), 'one-track'), join))));
    expect((await outbox.list({ state: 'pending' })).map((entry) => entry.release.title)).toEqual([title('v3')]);
  });

  it.skipIf(!available[database])('answers the id of the row it stored while the caller runs its own statements on the transaction meanwhile', async () => {
    const { kit, outbox, own } = await setUp(orm, database);
    // The panel's own table counts from 1000: an id read back from the wrong statement shows.
    await onDatabase(database, database === 'postgres' ? `ALTER SEQUENCE ${own}_id_seq RESTART WITH 1000` : `ALTER TABLE ${own} AUTO_INCREMENT = 1000`);
    const results = await kit.transaction(async (join, tx) => {
      const own30 = (async () => {
        for (let n = 0; n < 30; n++) await kit.insertOwn(tx, own, `own ${n}`);
      })();
      const enqueued = await Promise.all([1, 2, 3, 4].map((n) => outbox.enqueue(release(title(`Interleaved ${n}`), n % 2 ? `il-${n}` : undefined), join)));
      await own30;
      return enqueued;
    });
    const stored = await outbox.list({ limit: 100 });
    expect(results.map((result) => result.id).sort()).toEqual(stored.map((entry) => entry.id).sort());
    expect(stored).toHaveLength(4);
  });

  // MikroORM joins through its Knex transaction: the store's own prepared statements (tested with Knex).
  if (database === 'mysql' && orm !== 'MikroORM')
    it.skipIf(!available[database])('stores text byte for byte under NO_BACKSLASH_ESCAPES (never read as SQL)', async () => {
      const { kit, outbox } = await setUp(orm, database);
      const attack = title(`', CONCAT(0x494e4a, CURRENT_USER()), 0x70, 0, 0, 0, 0 FROM DUAL# \\' Rock'n'Roll é😀`);
      await kit.transaction(async (join) => {
        await join.query?.("SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')", []);
        await outbox.enqueue(release(attack, "t'1"), join);
      });
      const [entry] = await outbox.list();
      expect(entry?.release.title).toBe(attack);
      expect(entry?.release.remote_track_id).toBe("t'1");
    });

  it.skipIf(!available[database])('refuses statements that run outside any transaction, storing nothing', async () => {
    const { kit, outbox } = await setUp(orm, database);
    await expect(outbox.enqueue(release(title('Outside'), 'outside'), await kit.outside())).rejects.toThrow(
      /outside any open transaction|must be an open transaction \(not aborted\) that `query` runs|not a transaction: pass the `trx/,
    );
    expect(await outbox.stats()).toMatchObject({ pending: 0, delivered: 0 });
  });
});

describe('the contract', () => {
  it('refuses `query` without `transaction`, a `query` that is not a function, and a `transaction` that is not an object', async () => {
    const { store, end } = storeOn(available.postgres ? 'postgres' : 'mysql', freshTable());
    const outbox = createReleaseOutbox({ client: clientFor(emulator), store, autoStart: false });
    try {
      const query = async () => [];
      await expect(outbox.enqueue(release('x'), { query })).rejects.toThrow(/got `query` without `transaction`/);
      await expect(outbox.enqueue(release('x'), { transaction: {}, query: 'SELECT 1' as never })).rejects.toThrow(/`query` must be a function/);
      await expect(outbox.enqueue(release('x'), { transaction: 'tx', query })).rejects.toThrow(/`transaction` must be your library's transaction object/);
    } finally {
      await outbox.close();
      await end();
    }
  });
});

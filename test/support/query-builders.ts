// Knex, Kysely and Drizzle on PostgreSQL and on MySQL/MariaDB, as a panel would set them up, for
// the transactional-outbox tests: each kit opens the library's own transaction, inserts the
// panel's own row through the library, and hands the transaction to `outbox.enqueue()`.
import { sql as drizzleSql, type SQL } from 'drizzle-orm';
import { drizzle as drizzleMysql } from 'drizzle-orm/mysql2';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import knex from 'knex';
import { CamelCasePlugin, Kysely, sql as kyselySql, MysqlDialect, PostgresDialect } from 'kysely';
import mysqlCallback from 'mysql2';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { mysqlOutboxStore } from '../../src/mysql.js';
import { postgresOutboxStore } from '../../src/postgres.js';
import { DATABASE_URL, MYSQL_URL } from './services.js';

export type Database = 'postgres' | 'mysql';
export type Isolation = 'read committed' | 'repeatable read' | 'serializable';

/** One query builder on one database, with what a test needs of it. */
export interface Kit {
  /** The builder's database object, which is not a transaction. */
  db: unknown;
  /**
   * Runs `work` in the builder's own transaction: committed when it returns, rolled back when it
   * throws. At READ COMMITTED unless told, as docs/outbox.md advises on MySQL too.
   */
  transaction<T>(work: (trx: unknown) => Promise<T>, isolation?: Isolation): Promise<T>;
  /** Inserts the panel's own row into `table` (see ownTable) through the builder, inside `trx`. */
  insertOwn(trx: unknown, table: string, title: string): Promise<void>;
  /** Runs `statement` (no values) through the builder, inside `trx`. */
  raw(trx: unknown, statement: string): Promise<void>;
  close(): Promise<void>;
}

export const SCHEMA = `test_outbox_qb_${process.pid}`;
/** The panel's own table beside the outbox table `table` (in SCHEMA on PostgreSQL). */
export const ownTable = (database: Database, table: string) => (database === 'postgres' ? `${SCHEMA}.own_${table}` : `own_${table}`);

/** The outbox store of `table`, on its own pool (the store's pool is not the builder's). */
export function storeOn(database: Database, table: string) {
  if (database === 'postgres') {
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
    return { store: postgresOutboxStore({ pool, schema: SCHEMA, table }), end: () => pool.end() };
  }
  const pool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 4 });
  return { store: mysqlOutboxStore({ pool, table }), end: () => pool.end() };
}

function knexKit(database: Database): Kit {
  const db = knex({
    client: database === 'postgres' ? 'pg' : 'mysql2',
    connection: database === 'postgres' ? DATABASE_URL : MYSQL_URL,
    pool: { min: 0, max: 3 },
  });
  return {
    db,
    transaction: (work, isolation = 'read committed') => db.transaction((trx) => work(trx), { isolationLevel: isolation }),
    async insertOwn(trx, table, title) {
      await (trx as typeof db)(table).insert({ title });
    },
    async raw(trx, statement) {
      await (trx as typeof db).raw(statement);
    },
    close: () => db.destroy(),
  };
}

function kyselyKit(database: Database): Kit {
  const dialect =
    database === 'postgres'
      ? new PostgresDialect({ pool: new pg.Pool({ connectionString: DATABASE_URL, max: 3 }) })
      : new MysqlDialect({ pool: mysqlCallback.createPool({ uri: MYSQL_URL, connectionLimit: 3 }) });
  // CamelCasePlugin, as many apps use it: the store's own statements must not go through it.
  // biome-ignore lint/suspicious/noExplicitAny: the tests' tables are not typed
  const db = new Kysely<any>({ dialect, plugins: [new CamelCasePlugin()] });
  return {
    db,
    transaction: (work, isolation = 'read committed') =>
      db
        .transaction()
        .setIsolationLevel(isolation)
        .execute((trx) => work(trx)),
    async insertOwn(trx, table, title) {
      await (trx as typeof db).insertInto(table).values({ title }).execute();
    },
    async raw(trx, statement) {
      await kyselySql.raw(statement).execute(trx as typeof db);
    },
    close: () => db.destroy(),
  };
}

function drizzleKit(database: Database): Kit {
  const pgPool = database === 'postgres' ? new pg.Pool({ connectionString: DATABASE_URL, max: 3 }) : undefined;
  const mysqlPool = database === 'mysql' ? mysql.createPool({ uri: MYSQL_URL, connectionLimit: 3 }) : undefined;
  // The two drivers' databases differ in type, not in what the tests use of them.
  const db = (pgPool ? drizzlePg(pgPool) : drizzleMysql(mysqlPool as mysql.Pool)) as unknown as {
    transaction<T>(work: (tx: unknown) => Promise<T>, config?: { isolationLevel: Isolation }): Promise<T>;
  };
  return {
    db,
    transaction: (work, isolation = 'read committed') => db.transaction((tx) => work(tx), { isolationLevel: isolation }),
    async insertOwn(tx, table, title) {
      await (tx as { execute(query: SQL): Promise<unknown> }).execute(drizzleSql`INSERT INTO ${drizzleSql.raw(table)} (title) VALUES (${title})`);
    },
    async raw(tx, statement) {
      await (tx as { execute(query: SQL): Promise<unknown> }).execute(drizzleSql.raw(statement));
    },
    close: () => (pgPool ?? (mysqlPool as mysql.Pool)).end(),
  };
}

export const BUILDERS = { Knex: knexKit, Kysely: kyselyKit, Drizzle: drizzleKit } as const;

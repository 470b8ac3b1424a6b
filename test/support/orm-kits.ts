// Prisma, TypeORM, Sequelize, postgres.js and MikroORM on PostgreSQL and MySQL/MariaDB, set up as
// a panel would, for the transactional-outbox tests: each kit opens the library's own transaction
// and says how the outbox joins it — `{ transaction, query }` (docs/outbox.md), or for MikroORM
// its Knex transaction — and inserts the panel's own row through the library, inside it.
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { MikroORM as MikroMysql } from '@mikro-orm/mysql';
import { MikroORM as MikroPostgres } from '@mikro-orm/postgresql';
import { PrismaMariaDb } from '@prisma/adapter-mariadb';
import { PrismaPg } from '@prisma/adapter-pg';
import postgres from 'postgres';
import { Sequelize, Transaction } from 'sequelize';
import { DataSource } from 'typeorm';
import type { EnqueueOptions } from '../../src/outbox/store.js';
import type { Database } from './query-builders.js';
import { DATABASE_URL, MYSQL_URL } from './services.js';

/** One library on one database, with what a test needs of it. */
export interface OrmKit {
  /** Runs `work` in the library's transaction (READ COMMITTED): committed when it returns, rolled back when it throws. */
  transaction<T>(work: (join: EnqueueOptions, tx: unknown) => Promise<T>): Promise<T>;
  /** Inserts the panel's own row into `table` through the library, inside `tx`. */
  insertOwn(tx: unknown, table: string, title: string): Promise<void>;
  /** What a mistaken caller would pass: statements that run outside any transaction (each on its own). */
  outside(): Promise<EnqueueOptions>;
  close(): Promise<void>;
}

const root = resolve(import.meta.dirname, '..', '..');
type PrismaClientLike = {
  $transaction<T>(work: (tx: PrismaTx) => Promise<T>, options: object): Promise<T>;
  $queryRawUnsafe(sql: string, ...params: unknown[]): Promise<unknown>;
  $disconnect(): Promise<void>;
};
type PrismaTx = Pick<PrismaClientLike, '$queryRawUnsafe'> & { $executeRawUnsafe(sql: string, ...params: unknown[]): Promise<number> };

/** Prisma's client for test/fixtures/prisma/<schema>.prisma, generated once (no engine binary: Prisma 7 needs none to generate). */
function prismaClient(schema: 'pg' | 'mysql'): new (options: object) => PrismaClientLike {
  const output = join(root, 'node_modules', '.cache', 'panel-license-guard-prisma', schema);
  const prisma = join(root, 'node_modules', 'prisma', 'build', 'index.js');
  // PRISMA_SCHEMA_ENGINE_BINARY: `generate` only checks the schema engine is there (it cannot be downloaded here), never runs it.
  execFileSync(process.execPath, [prisma, 'generate', '--schema', join(root, 'test', 'fixtures', 'prisma', `${schema}.prisma`)], {
    cwd: root,
    env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: process.execPath, PRISMA_HIDE_UPDATE_MESSAGE: '1' },
    stdio: 'pipe',
  });
  return (createRequire(import.meta.url)(output) as { PrismaClient: new (options: object) => PrismaClientLike }).PrismaClient;
}

function prismaKit(database: Database): OrmKit {
  const PrismaClient = prismaClient(database === 'postgres' ? 'pg' : 'mysql');
  const url = new URL(MYSQL_URL);
  const adapter =
    database === 'postgres'
      ? new PrismaPg({ connectionString: DATABASE_URL })
      : new PrismaMariaDb({ host: url.hostname, port: Number(url.port || 3306), user: decodeURIComponent(url.username), database: url.pathname.slice(1) });
  const prisma = new PrismaClient({ adapter });
  return {
    transaction: (work) =>
      prisma.$transaction((tx) => work({ transaction: tx, query: (sql, params) => tx.$queryRawUnsafe(sql, ...params) }, tx), {
        isolationLevel: 'ReadCommitted',
        timeout: 20_000,
      }),
    insertOwn: async (tx, table, title) => {
      await (tx as PrismaTx).$executeRawUnsafe(`INSERT INTO ${table} (title) VALUES (${database === 'postgres' ? '$1' : '?'})`, title);
    },
    outside: async () => ({ transaction: prisma, query: (sql, params) => prisma.$queryRawUnsafe(sql, ...params) }),
    close: () => prisma.$disconnect(),
  };
}

function typeormKit(database: Database): OrmKit {
  const source = new DataSource(
    database === 'postgres' ? { type: 'postgres', url: DATABASE_URL, poolSize: 3 } : { type: 'mysql', url: MYSQL_URL, poolSize: 3 },
  );
  const ready = source.initialize();
  return {
    transaction: async (work) => {
      await ready;
      return source.transaction('READ COMMITTED', (manager) => work({ transaction: manager, query: (sql, params) => manager.query(sql, params) }, manager));
    },
    insertOwn: async (tx, table, title) => {
      await (tx as DataSource['manager']).query(`INSERT INTO ${table} (title) VALUES (${database === 'postgres' ? '$1' : '?'})`, [title]);
    },
    outside: async () => ({ transaction: source, query: async (sql, params) => (await ready).query(sql, params) }),
    close: async () => {
      await ready;
      await source.destroy();
    },
  };
}

/** Sequelize binds `$1` on PostgreSQL; on MySQL its `?` replacements are escaped values. */
function sequelizeKit(database: Database, managed: boolean): OrmKit {
  const sequelize = new Sequelize(database === 'postgres' ? DATABASE_URL : MYSQL_URL, { logging: false, pool: { max: 3 } });
  const query = (transaction: Transaction | undefined) => (sql: string, params: unknown[]) =>
    sequelize.query(
      sql,
      database === 'postgres' ? { bind: params, transaction: transaction ?? null } : { replacements: params, transaction: transaction ?? null },
    );
  const options = { isolationLevel: Transaction.ISOLATION_LEVELS.READ_COMMITTED };
  return {
    transaction: async (work) => {
      if (managed) return sequelize.transaction(options, (t) => work({ transaction: t, query: query(t) }, t));
      const t = await sequelize.transaction(options);
      try {
        const result = await work({ transaction: t, query: query(t) }, t);
        await t.commit();
        return result;
      } catch (error) {
        await t.rollback();
        throw error;
      }
    },
    insertOwn: async (tx, table, title) => {
      await query(tx as Transaction)(`INSERT INTO ${table} (title) VALUES (${database === 'postgres' ? '$1' : '?'})`, [title]);
    },
    outside: async () => ({ transaction: sequelize, query: query(undefined) }),
    close: () => sequelize.close(),
  };
}

function postgresJsKit(): OrmKit {
  const sql = postgres(DATABASE_URL, { max: 3, onnotice: () => {} });
  return {
    transaction: (work) =>
      sql.begin('isolation level read committed', (tx) => work({ transaction: tx, query: (text, params) => tx.unsafe(text, params) }, tx)) as never,
    insertOwn: async (tx, table, title) => {
      await (tx as typeof sql).unsafe(`INSERT INTO ${table} (title) VALUES ($1)`, [title]);
    },
    outside: async () => ({ transaction: sql, query: (text, params) => sql.unsafe(text, params as never[]) }),
    close: () => sql.end(),
  };
}

/** MikroORM 6 runs its transactions on Knex: `em.getTransactionContext()` is a Knex transaction, which the store joins as it is. */
function mikroKit(database: Database): OrmKit {
  const init = (database === 'postgres' ? MikroPostgres : MikroMysql).init({
    clientUrl: database === 'postgres' ? DATABASE_URL : MYSQL_URL,
    entities: [],
    discovery: { warnWhenNoEntities: false },
    allowGlobalContext: true,
    debug: false,
    pool: { min: 0, max: 3 },
  } as never) as Promise<MikroPostgres>;
  return {
    transaction: async (work) => {
      const orm = await init;
      return orm.em.transactional((em) => work({ transaction: em.getTransactionContext() }, em), { isolationLevel: 'read committed' as never });
    },
    insertOwn: async (tx, table, title) => {
      await (tx as MikroPostgres['em']).execute(`INSERT INTO ${table} (title) VALUES (?)`, [title]);
    },
    // Its Knex instance, not a transaction.
    outside: async () => ({ transaction: (await init).em.getKnex() }),
    close: async () => (await init).close(true),
  };
}

export const ORMS = {
  Prisma: prismaKit,
  TypeORM: typeormKit,
  'Sequelize (managed)': (database: Database) => sequelizeKit(database, true),
  'Sequelize (unmanaged)': (database: Database) => sequelizeKit(database, false),
  'postgres.js': (database: Database) => (database === 'postgres' ? postgresJsKit() : undefined),
  MikroORM: mikroKit,
} satisfies Record<string, (database: Database) => OrmKit | undefined>;

// The caller's transaction, as the SQL stores join it: the driver's own connection inside BEGIN,
// a transaction of Knex, Kysely or Drizzle, or any library's with `query` (statement-transaction.ts).
// The store's statements then run on the very connection that transaction runs on, so they commit
// or roll back with the caller's rows. Anything else is refused with the list of what is accepted.
import { shown } from '../../../options.js';
import type { MysqlQueryable, MysqlResult, PgQueryable, PgQueryConfig } from './connections.js';
import { mysqlStatements, pgStatements } from './statement-transaction.js';
import { knexWatch, kyselyWatch, type TransactionWatch, UNTOLD } from './transaction-watch.js';

export type SqlDialect = 'postgres' | 'mysql';

const LIBRARY_OF: Record<SqlDialect, { knex: string[]; kysely: string; drizzle: string; driver: string }> = {
  postgres: { knex: ['pg'], kysely: 'PostgresAdapter', drizzle: 'NodePgTransaction', driver: 'node-postgres' },
  mysql: { knex: ['mysql2'], kysely: 'MysqlAdapter', drizzle: 'MySql2Transaction', driver: 'mysql2' },
};

const ACCEPTED: Record<SqlDialect, string> = {
  postgres:
    'a node-postgres client inside BEGIN (`await pool.connect()`), a Knex transaction on pg (`knex.transaction(async (trx) => …)`), a Kysely transaction (`db.transaction().execute(async (trx) => …)`) or a Drizzle transaction on node-postgres (`db.transaction(async (tx) => …)`)',
  mysql:
    'a mysql2/promise connection inside START TRANSACTION (`await pool.getConnection()`), a Knex transaction on mysql2 (`knex.transaction(async (trx) => …)`), a Kysely transaction (`db.transaction().execute(async (trx) => …)`) or a Drizzle transaction on mysql2 (`db.transaction(async (tx) => …)`)',
};

const ANY_LIBRARY: Record<SqlDialect, string> = {
  postgres:
    "`{ transaction: tx, query: (sql, params) => tx.$queryRawUnsafe(sql, ...params) }` (Prisma; any library's transaction with a function that runs a statement in it, `$1` placeholders)",
  mysql:
    "`{ transaction: tx, query: (sql, params) => tx.$queryRawUnsafe(sql, ...params) }` (Prisma; any library's transaction with a function that runs a statement in it, `?` placeholders)",
};

function refused(dialect: SqlDialect, problem: string): TypeError {
  return new TypeError(`panel-license-guard: \`transaction\` ${problem}. Pass ${ACCEPTED[dialect]}; or, from any other library, ${ANY_LIBRARY[dialect]}.`);
}

type Queryable<D extends SqlDialect> = D extends 'postgres' ? PgQueryable : MysqlQueryable;
const isQueryable = (value: unknown): boolean => typeof (value as { query?: unknown } | null)?.query === 'function';

/**
 * Runs `work` on the connection `transaction` runs on, with what its library tells of the
 * transaction's end, or rejects with a TypeError saying what is accepted. `turns`: the object
 * enqueues on one transaction take turns by (the same for every enqueue on it). With `query`, the
 * transaction is any library's: `query` runs the statements, `transaction` is the turns' key.
 */
export async function onCallerTransaction<D extends SqlDialect, T>(
  transaction: unknown,
  dialect: D,
  work: (connection: Queryable<D>, watch: TransactionWatch, turns: object) => Promise<T>,
  query?: unknown,
): Promise<T> {
  if (query !== undefined) {
    if (typeof query !== 'function')
      throw new TypeError(
        `panel-license-guard: \`query\` must be a function (sql, params) => Promise<rows> that runs a statement in your transaction (received ${describe(query)}).`,
      );
    if ((typeof transaction !== 'object' && typeof transaction !== 'function') || transaction === null)
      throw new TypeError(
        `panel-license-guard: with \`query\`, \`transaction\` must be your library's transaction object (the \`tx\` of your callback), which enqueues on it take turns by (received ${describe(transaction)}).`,
      );
    const run = query as (sql: string, params: unknown[]) => Promise<unknown>;
    // A new connection each call: the caller's function may be a new closure each time; the
    // transaction object is what stays the same, so the turns go by it.
    return work((dialect === 'postgres' ? pgStatements(run) : mysqlStatements(run)) as unknown as Queryable<D>, UNTOLD, transaction);
  }
  const library = LIBRARY_OF[dialect];
  if (isKnex(transaction)) {
    const driver = String(transaction.client?.driverName);
    if (transaction.isTransaction !== true)
      throw refused(dialect, 'is a Knex instance, not a transaction: pass the `trx` of `knex.transaction(async (trx) => …)`');
    if (!library.knex.includes(driver)) throw refused(dialect, `is a Knex transaction on ${driver}; this store needs one on ${library.knex.join(' or ')}`);
    if (transaction.isCompleted()) throw refused(dialect, 'is a Knex transaction that has already committed or rolled back');
    // Knex's transaction client hands out the one connection its transaction runs on.
    const connection = await transaction.client.acquireConnection();
    const joined = (dialect === 'mysql' ? promiseConnection(connection) : connection) as Queryable<D>;
    return work(joined, knexWatch(transaction), joined);
  }
  if (isKysely(transaction)) {
    if (transaction.isTransaction !== true)
      throw refused(dialect, 'is a Kysely instance, not a transaction: pass the `trx` of `db.transaction().execute(async (trx) => …)`');
    const executor = transaction.getExecutor();
    const adapters = classNames(executor.adapter);
    if (!adapters.includes(library.kysely))
      throw refused(dialect, `is a Kysely transaction with ${adapters[0] ?? 'an unknown adapter'}; this store needs ${library.kysely}`);
    if (transaction.isCommitted === true || transaction.isRolledBack === true)
      throw refused(dialect, 'is a Kysely transaction that has already committed or rolled back');
    // Holding the transaction's connection for the whole enqueue: Kysely runs nothing else on it
    // meanwhile, not even through a copy of the transaction (withSchema, withPlugin), and refuses
    // once the transaction has ended.
    return executor.provideConnection((connection) => {
      const joined = kyselyConnection(connection, dialect) as Queryable<D>;
      return work(joined, kyselyWatch(transaction), joined);
    });
  }
  const kinds = drizzleKinds(transaction);
  if (kinds.length > 0) {
    if (!kinds.some((kind) => kind.endsWith('Transaction')))
      throw refused(dialect, `is a Drizzle database (${kinds[0]}), not a transaction: pass the \`tx\` of \`db.transaction(async (tx) => …)\``);
    const client = (transaction as { session?: { client?: unknown } }).session?.client;
    if (!kinds.includes(library.drizzle) || !isQueryable(client))
      throw refused(dialect, `is a Drizzle transaction of ${kinds[0]}; this store joins Drizzle transactions on ${library.driver}`);
    // Drizzle runs a transaction on one client of the driver (its session's), in BEGIN; it tells
    // nothing of the transaction's end.
    return work(client as Queryable<D>, UNTOLD, client as object);
  }
  // mysql2's callback connection (createConnection() from 'mysql2'): its promise() wrapper talks on it.
  if (dialect === 'mysql' && typeof (transaction as { promise?: unknown } | null)?.promise === 'function') {
    const joined = promiseConnection(transaction) as Queryable<D>;
    return work(joined, UNTOLD, joined);
  }
  if (isQueryable(transaction)) return work(transaction as Queryable<D>, UNTOLD, transaction as object);
  throw refused(dialect, `is not a transaction this store can join (received ${describe(transaction)})`);
}

interface KnexLike {
  (...args: unknown[]): unknown;
  isTransaction?: boolean;
  isCompleted(): boolean;
  executionPromise?: Promise<unknown>;
  client: { driverName?: string; acquireConnection(): Promise<unknown> };
}
const isKnex = (value: unknown): value is KnexLike =>
  typeof value === 'function' && typeof (value as Partial<KnexLike>).client?.acquireConnection === 'function';

/** A connection as Kysely's drivers give it: the compiled query in, the rows (or counts) out. */
interface KyselyConnection {
  executeQuery(query: object): Promise<{ rows: Record<string, unknown>[]; numAffectedRows?: bigint; insertId?: bigint }>;
}
interface KyselyLike {
  isTransaction: boolean;
  isCommitted?: boolean;
  isRolledBack?: boolean;
  getExecutor(): { adapter: unknown; provideConnection<T>(consumer: (connection: KyselyConnection) => Promise<T>): Promise<T> };
}
const isKysely = (value: unknown): value is KyselyLike =>
  typeof (value as { executeQuery?: unknown } | null)?.executeQuery === 'function' &&
  typeof (value as KyselyLike).getExecutor === 'function' &&
  typeof (value as KyselyLike).getExecutor().provideConnection === 'function';

/** The names of the classes `value` is an instance of, nearest first. */
function classNames(value: unknown): string[] {
  const names: string[] = [];
  for (let proto = Object.getPrototypeOf(value ?? {}); proto && proto !== Object.prototype; proto = Object.getPrototypeOf(proto))
    names.push(String(proto.constructor?.name));
  return names;
}

/** Drizzle names each of its classes with a static `[Symbol.for('drizzle:entityKind')]`; nearest first. */
function drizzleKinds(value: unknown): string[] {
  if (typeof value !== 'object' || value === null) return [];
  const entityKind = Symbol.for('drizzle:entityKind');
  const kinds: string[] = [];
  for (let proto = Object.getPrototypeOf(value); proto && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
    const kind = (proto.constructor as Record<symbol, unknown> | undefined)?.[entityKind];
    if (typeof kind === 'string' && kinds.at(-1) !== kind) kinds.push(kind);
  }
  return kinds;
}

function describe(value: unknown): string {
  if (typeof value !== 'object' || value === null) return shown(value);
  return `an instance of ${classNames(value)[0] ?? 'Object'}`;
}

// Knex's mysql2 dialect holds a callback connection; its promise() wrapper talks on the same one.
const promiseWrappers = new WeakMap<object, MysqlQueryable>();
function promiseConnection(connection: unknown): MysqlQueryable {
  const raw = connection as { promise(): MysqlQueryable };
  const wrapped = promiseWrappers.get(raw) ?? raw.promise();
  promiseWrappers.set(raw, wrapped);
  return wrapped;
}

// Kysely gives its own connection, not the driver's: statements go through it as Kysely's
// drivers take them (the caller's plugins never see them: CamelCasePlugin would rename the
// columns the store reads), answered in the driver's own shapes.
const kyselyConnections = new WeakMap<object, PgQueryable | MysqlQueryable>();
function kyselyConnection(connection: KyselyConnection, dialect: SqlDialect): PgQueryable | MysqlQueryable {
  const known = kyselyConnections.get(connection);
  if (known) return known;
  // What CompiledQuery.raw() makes: the drivers read `sql` and `parameters`.
  const run = (sql: string, parameters: unknown[] = []) =>
    connection.executeQuery({ sql, parameters, query: { kind: 'RawNode', sqlFragments: [sql], parameters: [] }, queryId: { queryId: 'panel-license-guard' } });
  const queryable: PgQueryable | MysqlQueryable =
    dialect === 'postgres'
      ? {
          async query(query: string | PgQueryConfig, values?: unknown[]) {
            const text = typeof query === 'string' ? query : query.text;
            const result = await run(text, (typeof query === 'string' ? undefined : query.values) ?? values);
            return { rows: result.rows, rowCount: result.numAffectedRows === undefined ? result.rows.length : Number(result.numAffectedRows) };
          },
        }
      : {
          async query(sql: string, values?: unknown[]): Promise<MysqlResult> {
            const result = await run(sql, values);
            if (result.numAffectedRows === undefined) return [result.rows, undefined];
            // A write: the header mysql2 gives, but for the server status, which Kysely keeps not.
            return [{ affectedRows: Number(result.numAffectedRows), insertId: Number(result.insertId ?? 0) }, undefined];
          },
        };
  kyselyConnections.set(connection, queryable);
  return queryable;
}

/** The server status flag of an open transaction (SERVER_STATUS_IN_TRANS). */
export const IN_TRANSACTION = 1;

// Any library's transaction, joined through one small contract: `{ transaction, query }`, where
// `query(sql, params)` runs one statement with its parameters on the connection the transaction
// runs on (Prisma's `tx.$queryRawUnsafe`, TypeORM's `queryRunner.query`, Sequelize's
// `sequelize.query` with the transaction, postgres.js's `tx.unsafe`…). The store asks nothing
// else of it: no pipelining, no row counts, no server status. Rows come back in whichever shape
// the library answers; the counts and ids a write makes are read back with a statement.
import type { TransactionQuery } from '../../store.js';
import type { MysqlQueryable, MysqlResult, PgQueryable, PgQueryConfig } from './connections.js';

/** Marks a connection made from `{ transaction, query }`: the stores prove the transaction with plain statements. */
export const STATEMENTS_ONLY: unique symbol = Symbol('panel-license-guard:statements-only');

export interface StatementsOnly {
  readonly [STATEMENTS_ONLY]: true;
}

/** Whether `connection` was made from a `query` function (statement-transaction.ts). */
export const isStatementsOnly = (connection: object): boolean => (connection as Partial<StatementsOnly>)[STATEMENTS_ONLY] === true;

const isRow = (value: unknown): boolean => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * The rows in what a library answered: an array of row objects (Prisma, postgres.js, TypeORM on a
 * read, MikroORM), `{ rows }` (node-postgres), or `[rows, …]` (mysql2, Sequelize, TypeORM on a
 * write). Anything else has no rows.
 */
export function rowsIn(answer: unknown): Record<string, unknown>[] {
  if (Array.isArray(answer)) {
    if (Array.isArray(answer[0])) return (answer[0] as unknown[]).filter(isRow) as Record<string, unknown>[];
    return answer.every(isRow) ? (answer as Record<string, unknown>[]) : [];
  }
  const rows = (answer as { rows?: unknown } | null)?.rows;
  return Array.isArray(rows) ? (rows.filter(isRow) as Record<string, unknown>[]) : [];
}

/** PostgreSQL: statements through `query`; a write's row count is the rows its RETURNING gives. */
export function pgStatements(query: TransactionQuery): PgQueryable & StatementsOnly {
  return {
    [STATEMENTS_ONLY]: true,
    async query(statement: string | PgQueryConfig, values?: unknown[]) {
      const text = typeof statement === 'string' ? statement : statement.text;
      const params = (typeof statement === 'string' ? values : (statement.values ?? values)) ?? [];
      const rows = rowsIn(await query(text, params as (string | number | null | Buffer)[]));
      return { rows, rowCount: rows.length };
    },
  };
}

/**
 * MySQL/MariaDB: statements through `query`. Text values go as bytes (a Buffer): a library that
 * writes values into the SQL (TypeORM, Sequelize's replacements) then writes a hex literal, which
 * no sql_mode reads as anything but bytes — as an escaped string, NO_BACKSLASH_ESCAPES would let a
 * quote end it. A write's answer is not read (the caller's own statements may run between it and
 * a ROW_COUNT()): the enqueue reads back what it did (mysql-enqueue.ts). No server status either.
 */
export function mysqlStatements(query: TransactionQuery): MysqlQueryable & StatementsOnly {
  const runOne = async (sql: string, values: unknown[]): Promise<MysqlResult> => {
    const bytes = values.map((value) => (typeof value === 'string' ? Buffer.from(value, 'utf8') : value));
    return [rowsIn(await query(sql, bytes as (string | number | null | Buffer)[])), undefined];
  };
  return {
    [STATEMENTS_ONLY]: true,
    query: (sql: string, values?: unknown[]) => runOne(sql, values ?? []),
    execute: (sql: string, values?: (string | number | null)[]) => runOne(sql, values ?? []),
  };
}

/**
 * A field of the database's error wherever a library put it: on the error (pg, mysql2,
 * postgres.js, TypeORM), on its `cause`, `parent`/`original` (Sequelize), `driverError` (TypeORM)
 * or `meta.driverAdapterError.cause` (Prisma's driver adapters, as `originalCode`).
 */
export function databaseErrorField(error: unknown, field: 'code' | 'errno'): unknown {
  const seen = new Set<unknown>();
  const queue: unknown[] = [error];
  while (queue.length > 0) {
    const next = queue.shift() as Record<string, unknown> | null | undefined;
    if (typeof next !== 'object' || next === null || seen.has(next)) continue;
    seen.add(next);
    if (next[field] !== undefined && (field !== 'code' || /^[0-9A-Z]{5}$/.test(String(next[field])))) return next[field];
    if (next.originalCode !== undefined) return field === 'errno' ? Number(next.originalCode) : next.originalCode;
    const meta = next.meta as { driverAdapterError?: { cause?: unknown } } | undefined;
    queue.push(next.cause, next.parent, next.original, next.driverError, meta?.driverAdapterError?.cause);
  }
  return undefined;
}

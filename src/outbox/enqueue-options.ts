// The per-call options of `enqueue` as the stores take them: the caller's transaction, and how to
// run a statement in it when it is any library's (stores/shared/statement-transaction.ts).

/**
 * Runs one SQL statement with its parameters inside your transaction and resolves to what your
 * library answers: the rows (an array of objects, or `{ rows }`, or `[rows, …]`). Placeholders
 * are `$1, $2…` on PostgreSQL and `?` on MySQL/MariaDB; parameters are numbers, null and text —
 * strings on PostgreSQL, Buffers (UTF-8 bytes) on MySQL/MariaDB, so a library that writes values
 * into the SQL writes hex literals, safe under any sql_mode.
 * E.g. Prisma: `(sql, params) => tx.$queryRawUnsafe(sql, ...params)`.
 */
export type TransactionQuery = (sql: string, params: (string | number | null | Buffer)[]) => Promise<unknown>;

/** Per-call options of `enqueue`. */
export interface EnqueueOptions {
  /**
   * PostgreSQL and MySQL stores only: the caller's open transaction (a node-postgres client or a
   * mysql2 connection inside BEGIN, a Knex, Kysely or Drizzle transaction, or — with `query` — any
   * library's transaction object). The row commits or rolls back with the caller's own rows (the
   * transactional outbox). Other stores refuse it.
   * @default undefined (the release is stored on its own, committed when enqueue resolves)
   */
  transaction?: unknown;
  /**
   * With `transaction` from any other library (Prisma, TypeORM, Sequelize, postgres.js…): how to
   * run a statement in it. Enqueues on one `transaction` object take turns. See docs/outbox.md.
   * @default undefined (`transaction` must then be one the store knows: a driver's connection, Knex, Kysely or Drizzle)
   */
  query?: TransactionQuery;
}

/** What the memory and SQLite stores say when given a caller's transaction they cannot join. */
export function refuseTransaction(store: string, options: EnqueueOptions | undefined): void {
  if (options?.transaction !== undefined)
    throw new TypeError(
      `panel-license-guard: the ${store} store cannot join your transaction (\`transaction\` is for the PostgreSQL and MySQL stores). Drop it, or use postgresOutboxStore() or mysqlOutboxStore().`,
    );
}

// The parts of the drivers' connections the SQL stores use, as a caller's transaction hands them
// over too (caller-transaction.ts): node-postgres clients and mysql2/promise connections.

/** A query as node-postgres takes it; with `name`, it is prepared once per connection. */
export interface PgQueryConfig {
  name?: string;
  text: string;
  values?: unknown[];
}

/** The part of a node-postgres client (pg.Pool, pg.PoolClient, pg.Client) the stores use. */
export interface PgQueryable {
  query(text: string | PgQueryConfig, values?: unknown[]): Promise<{ rows: Record<string, unknown>[]; rowCount: number | null }>;
}

/** What a mysql2 query answers: rows for a SELECT, a header (affectedRows, insertId) for a write. */
export type MysqlResult = [unknown, unknown];

/** The part of a mysql2/promise connection (`pool.getConnection()`, `createConnection()`) this store uses. */
export interface MysqlQueryable {
  /** Statements without values (transactions, savepoints, tables). */
  query(sql: string, values?: unknown[]): Promise<MysqlResult>;
  /** Statements with values: prepared on the server, the values sent apart from the text (mysql-params.ts). */
  execute?(sql: string, values?: (string | number | null)[]): Promise<MysqlResult>;
}

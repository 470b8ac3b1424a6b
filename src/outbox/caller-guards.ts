// The writes an enqueue makes in a caller's transaction, each checking in the statement itself that
// it runs inside that transaction. An enqueue left running when its library ends the transaction
// (not awaited in the callback) would otherwise write on its own (autocommit) after the ROLLBACK,
// or inside the next transaction opened on that connection: the release would go out although
// the caller's transaction rolled back. Checked between statements it could still slip in, since
// the library's ROLLBACK may reach the connection between any two of them.
import type { MysqlStatements } from './mysql-sql.js';
import type { HotStatements } from './postgres-sql.js';
import { OUTSIDE_TRANSACTION } from './transaction-watch.js';

/**
 * PostgreSQL: true inside the transaction whose id is `$n` (txid_current() read in it, after the
 * enqueue's savepoint); anywhere else (a statement on its own, another transaction) it raises
 * OUTSIDE_TRANSACTION. The error's text is built from txid_current() so the planner never
 * evaluates it ahead of time.
 */
const pgInTransaction = (n: number) =>
  `(CASE WHEN txid_current() = $${n}::bigint THEN true ELSE (txid_current()::text || ': ${OUTSIDE_TRANSACTION.replaceAll("'", "''")}')::boolean END)`;

/** Reads the id of the transaction the enqueue's savepoint was made in (the caller's). */
export const PG_TRANSACTION_ID = 'SELECT txid_current()::text AS xid';

type PgWrite = HotStatements['insertPending'];

/** `hot`'s writes of an enqueue, guarded by the transaction id passed last ($8, $6 and $5). */
export interface PgGuardedWrites {
  insertIfNew: PgWrite;
  insertPending: PgWrite;
  replacePayload: PgWrite;
}

function rewritten(statement: PgWrite, pattern: RegExp, replacement: (...groups: string[]) => string): PgWrite {
  const text = statement.text.replace(pattern, (_match, ...groups: string[]) => replacement(...groups));
  // The hot statements are ours: a change to one that this no longer fits fails every test at once.
  if (text === statement.text) throw new Error(`panel-license-guard: cannot guard ${statement.name}: its SQL changed.`);
  return { name: `${statement.name}_in_caller`, text };
}

export function pgGuardedWrites(hot: HotStatements): PgGuardedWrites {
  return {
    insertIfNew: rewritten(hot.insertIfNew, /WHERE NOT EXISTS/, () => `WHERE ${pgInTransaction(8)} AND NOT EXISTS`),
    insertPending: rewritten(
      hot.insertPending,
      /VALUES \(([\s\S]*?)\)(\s*ON CONFLICT)/,
      (values, conflict) => `SELECT ${values} WHERE ${pgInTransaction(6)}${conflict}`,
    ),
    replacePayload: rewritten(hot.replacePayload, /$/, () => ` AND ${pgInTransaction(5)}`),
  };
}

/**
 * MariaDB (whose `@@in_transaction` says whether a transaction is open; MySQL has no such
 * variable): the writes do nothing outside a transaction, and the enqueue sees it (no row
 * inserted, none updated under the track's lock).
 */
export interface MysqlGuardedWrites {
  insertPending: string;
  replacePayload: string;
}

export function mysqlGuardedWrites(sql: MysqlStatements): MysqlGuardedWrites {
  const insertPending = sql.insertPending.replace(
    /VALUES \(([\s\S]*)\)\s*$/,
    (_match, values: string) => `SELECT ${values} FROM DUAL WHERE @@in_transaction = 1`,
  );
  const replacePayload = `${sql.replacePayload} AND @@in_transaction = 1`;
  if (insertPending === sql.insertPending) throw new Error('panel-license-guard: cannot guard insertPending: its SQL changed.');
  return { insertPending, replacePayload };
}

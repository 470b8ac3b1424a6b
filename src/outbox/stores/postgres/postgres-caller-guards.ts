// PostgreSQL: the writes an enqueue makes in a caller's transaction, each checking in the statement itself that
// it runs inside that transaction. An enqueue left running when its library ends the transaction
// (not awaited in the callback) would otherwise write on its own (autocommit) after the ROLLBACK,
// or inside the next transaction opened on that connection: the release would go out although
// the caller's transaction rolled back. Checked between statements it could still slip in, since
// the library's ROLLBACK may reach the connection between any two of them.
import type { HotStatements } from './postgres-sql.js';

/**
 * PostgreSQL: true inside the transaction whose id is `$n` (read in it when the enqueue's
 * transaction was proved), false anywhere else: a statement on its own has no id yet, another
 * transaction has another. False writes nothing and raises nothing — an error would abort the
 * next request's transaction that a late statement landed in; the enqueue tells "not ours" from
 * a conflict by asking PG_CURRENT_TRANSACTION.
 */
const pgInTransaction = (n: number) => `txid_current_if_assigned() = $${n}::bigint`;

/** Reads the id of the transaction the enqueue proved (assigning one), and its isolation level. */
export const PG_TRANSACTION_ID = "SELECT txid_current()::text AS xid, current_setting('transaction_isolation') AS level";

/** The same, without assigning an id to a transaction that has none (xid null then): for a transaction that may not be the caller's. */
export const PG_CURRENT_TRANSACTION = "SELECT txid_current_if_assigned()::text AS xid, current_setting('transaction_isolation') AS level";

type PgWrite = HotStatements['insertPending'];

/** `hot`'s writes of an enqueue, guarded by the transaction id passed last ($9, $7 and $6). */
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
    insertIfNew: rewritten(hot.insertIfNew, /WHERE NOT EXISTS/, () => `WHERE ${pgInTransaction(9)} AND NOT EXISTS`),
    insertPending: rewritten(
      hot.insertPending,
      /VALUES \(([\s\S]*?)\)(\s*ON CONFLICT)/,
      (values, conflict) => `SELECT ${values} WHERE ${pgInTransaction(7)}${conflict}`,
    ),
    replacePayload: rewritten(hot.replacePayload, / RETURNING id$/, () => ` AND ${pgInTransaction(6)} RETURNING id`),
  };
}

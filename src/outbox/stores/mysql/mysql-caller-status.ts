// MySQL/MariaDB: what the caller's session says of its transaction — open or not, from an
// answer's status, MariaDB's `@@in_transaction`, or the error — and what a failed statement of
// an enqueue means for the caller's transaction.
import { describeError } from '../../../logger.js';
import { IN_TRANSACTION } from '../shared/caller-transaction.js';
import { databaseErrorField } from '../shared/statement-transaction.js';
import { headerOf, type MysqlQueryable, rowsOf } from './mysql-schema.js';

/**
 * A statement that touches no table: its answer's status says whether a transaction is open on
 * the session now (it opens none, autocommit or not), on MySQL and MariaDB alike.
 */
export const TRANSACTION_STATUS = 'DO 0';

/** MySQL 8's answer to `@@in_transaction`, a MariaDB variable. */
const ER_UNKNOWN_SYSTEM_VARIABLE = 1193;

/** InnoDB's answer when it chose the transaction as a deadlock's victim: it rolled back all of it. */
const ER_LOCK_DEADLOCK = 1213;

/**
 * A statement of ours the server refused is undone alone, but for a deadlock, which rolls back
 * the whole transaction — reported as 1213, or under an AUTO-INC lock as 1467 ("Failed to read
 * auto-increment value"), so the session is asked whether its transaction is still open.
 */
export async function failedIn(connection: MysqlQueryable, error: unknown): Promise<unknown> {
  let open: boolean;
  try {
    open = Number(databaseErrorField(error, 'errno')) !== ER_LOCK_DEADLOCK && (await stillOpen(connection, error));
  } catch {
    open = false;
  }
  if (open) return error;
  return new Error(
    `panel-license-guard: the release could not be stored in your transaction (${describeError(error)}): the database rolled all of your transaction back, as MySQL does on a deadlock. Do not go on with it: run the whole transaction again.`,
    { cause: error },
  );
}

/** Errors with which InnoDB rolls back the whole transaction (a deadlock, reported as such or, under an AUTO-INC lock, as 1467). */
const ROLLS_BACK = new Set([ER_LOCK_DEADLOCK, 1467]);

/**
 * Whether the session's transaction is still open after `error`: the status of an answer that
 * touches no table; through Kysely, whose answers carry no status, `@@in_transaction` (MariaDB),
 * else what the error says.
 */
async function stillOpen(connection: MysqlQueryable, error: unknown): Promise<boolean> {
  const status = headerOf(await connection.query(TRANSACTION_STATUS)).serverStatus;
  if (status !== undefined) return isOpen(status);
  try {
    const [row] = rowsOf(await connection.query('SELECT @@in_transaction AS open'));
    return Number(row?.open) === 1;
  } catch {
    // MySQL 8 has no such variable: the error decides.
    return !ROLLS_BACK.has(Number(databaseErrorField(error, 'errno')));
  }
}

/** The server status flag of an open transaction; through Kysely, whose answers carry none, assumed open (it refuses a transaction that ended). */
export const isOpen = (status: number | undefined): boolean => ((status ?? IN_TRANSACTION) & IN_TRANSACTION) !== 0;

/** MariaDB's `@@in_transaction` on the caller's session; undefined where the server has none (MySQL 8, remembered). */
export function inTransactionFlagOf(): (connection: MysqlQueryable) => Promise<boolean | undefined> {
  let hasInTransactionFlag: boolean | undefined;
  return async (connection) => {
    if (hasInTransactionFlag === false) return undefined;
    try {
      const [row] = rowsOf(await connection.query('SELECT @@in_transaction AS open'));
      hasInTransactionFlag = true;
      return Number(row?.open) === 1;
    } catch (error) {
      if (Number(databaseErrorField(error, 'errno')) !== ER_UNKNOWN_SYSTEM_VARIABLE) throw error;
      hasInTransactionFlag = false;
      return undefined;
    }
  };
}

// What the MySQL outbox says when it cannot use the database: mysql2 gives a bare
// `connect ECONNREFUSED 127.0.0.1:3307`; the outbox says what failed (and where, never with a
// password), what it means for the releases, and what to check. Other errors pass through.

import { mysqlPoolAddress } from '../../../db/mysql-address.js';
import { OutboxDatabaseError, type OutboxDatabaseErrorCode } from '../../../errors.js';
import { describeError } from '../../../logger.js';
import { MEANING, type SqlWork } from '../shared/sql-work.js';

const UNREACHABLE = /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ECONNRESET|EPIPE|PROTOCOL_CONNECTION_LOST|closed state/i;

function codeOf(error: unknown): OutboxDatabaseErrorCode | undefined {
  const { errno, code } = (error ?? {}) as { errno?: unknown; code?: unknown };
  // ER_ACCESS_DENIED_ERROR, ER_DBACCESS_DENIED_ERROR at login; ER_BAD_DB_ERROR.
  if (Number(errno) === 1045 || Number(errno) === 1698) return 'OUTBOX_DATABASE_LOGIN';
  if (Number(errno) === 1049) return 'OUTBOX_DATABASE_MISSING';
  const message = error instanceof Error ? error.message : '';
  return UNREACHABLE.test(`${String(code ?? '')} ${message}`) ? 'OUTBOX_DATABASE_UNREACHABLE' : undefined;
}

const FIX: Record<OutboxDatabaseErrorCode, string> = {
  OUTBOX_DATABASE_UNREACHABLE: "Check that MySQL (or MariaDB) is running there and that the pool's host, port and database are right.",
  OUTBOX_DATABASE_LOGIN: "The server refused the login: check the pool's user and password.",
  OUTBOX_DATABASE_MISSING: 'That database does not exist: create it (CREATE DATABASE), or point the pool at the right one.',
};

/** The error to give for `error` met while doing `work`: a clear OutboxDatabaseError, or `error` as it is. */
export function databaseFailure(error: unknown, work: SqlWork, pool: unknown, table: string): unknown {
  if (error instanceof OutboxDatabaseError) return error;
  const code = codeOf(error);
  if (code === undefined) return error;
  const what = code === 'OUTBOX_DATABASE_UNREACHABLE' ? 'could not reach MySQL' : 'could not use MySQL';
  const message = `panel-license-guard: the outbox (${table}) ${what} at ${mysqlPoolAddress(pool)}: ${describeError(error)}. ${MEANING[work]} ${FIX[code]}`;
  return new OutboxDatabaseError(code, message, { cause: error });
}

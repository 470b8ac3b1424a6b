// What the PostgreSQL outbox says when it cannot use the database: node-postgres gives a bare
// `connect ECONNREFUSED 127.0.0.1:5439`; the outbox says what failed (and where, never with a
// password), what it means for the releases, and what to check. Other errors pass through.

import { poolAddress } from '../../../db/postgres-url.js';
import { OutboxDatabaseError, type OutboxDatabaseErrorCode } from '../../../errors.js';
import { describeError } from '../../../logger.js';
import { MEANING, type SqlWork } from '../shared/sql-work.js';

const UNREACHABLE =
  /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ECONNRESET|EPIPE|Connection terminated|timeout exceeded when trying to connect/i;

function codeOf(error: unknown): OutboxDatabaseErrorCode | undefined {
  const code = String((error as { code?: unknown } | null)?.code ?? '');
  if (code === '28P01' || code === '28000') return 'OUTBOX_DATABASE_LOGIN';
  if (code === '3D000') return 'OUTBOX_DATABASE_MISSING';
  if (code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03') return 'OUTBOX_DATABASE_UNREACHABLE';
  const message = error instanceof Error ? error.message : '';
  return UNREACHABLE.test(`${code} ${message}`) ? 'OUTBOX_DATABASE_UNREACHABLE' : undefined;
}

const FIX: Record<OutboxDatabaseErrorCode, string> = {
  OUTBOX_DATABASE_UNREACHABLE: "Check that PostgreSQL is running there and that the pool's host, port and database are right.",
  OUTBOX_DATABASE_LOGIN: "PostgreSQL refused the login: check the pool's user and password (or PGPASSWORD).",
  OUTBOX_DATABASE_MISSING: 'That database does not exist: create it, or point the pool at the right one.',
};

/** The error to give for `error` met while doing `work`: a clear OutboxDatabaseError, or `error` as it is. */
export function databaseFailure(error: unknown, work: SqlWork, pool: unknown, table: string): unknown {
  if (error instanceof OutboxDatabaseError) return error;
  const code = codeOf(error);
  if (code === undefined) return error;
  const what = code === 'OUTBOX_DATABASE_UNREACHABLE' ? 'could not reach PostgreSQL' : 'could not use PostgreSQL';
  const address = poolAddress(pool);
  const where =
    address === undefined
      ? "with the pool's connection string, which does not read as a well-formed postgres://user@host/db URL (percent-encode / # ? @ : in the password; the driver's message is in `cause`)"
      : `at ${address}: ${describeError(error)}`;
  return new OutboxDatabaseError(code, `panel-license-guard: the outbox (${table}) ${what} ${where}. ${MEANING[work]} ${FIX[code]}`, { cause: error });
}

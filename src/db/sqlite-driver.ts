// Loads better-sqlite3, an optional peer dependency, only when a SQLite file is actually opened
// (the outbox's, the license store's).

import type BetterSqlite3 from 'better-sqlite3';
import { describeError } from '../logger.js';

export type SqliteDatabase = BetterSqlite3.Database;
export type SqliteStatement = BetterSqlite3.Statement<unknown[]>;
export type SqliteDriver = new (file: string, options?: BetterSqlite3.Options) => SqliteDatabase;

// The package runs as CommonJS (its ESM entry points wrap the CommonJS build: one copy of its
// state), so `require` resolves the driver from where the package is installed; the tests run
// this source under Vitest, which provides `require` too.
const requireFromHere = (id: string): unknown => require(id);

const INSTALL_HINT =
  'panel-license-guard: the durable release outbox (and the SQLite license store) keep their data with better-sqlite3, an optional peer dependency that is not installed. ' +
  'Run `npm install better-sqlite3@12`, or pass `file: ":memory:"` (not durable) or your own `store`.';

function isMissingDriver(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  return code === 'MODULE_NOT_FOUND' && typeof message === 'string' && message.includes("'better-sqlite3'");
}

/**
 * Requires better-sqlite3 lazily: importing the package must work without it, since only users
 * of a file-backed outbox need it. `load` is injectable so the missing-driver message is testable.
 */
export function loadSqliteDriver(load: (id: string) => unknown = requireFromHere): SqliteDriver {
  try {
    return load('better-sqlite3') as SqliteDriver;
  } catch (error) {
    if (isMissingDriver(error)) throw new Error(INSTALL_HINT, { cause: error });
    // Installed but unusable (typically a native build for another Node version).
    throw new Error(
      `panel-license-guard: better-sqlite3 is installed but failed to load (${describeError(error)}). ` +
        'Rebuild it for this Node version with `npm rebuild better-sqlite3`, or reinstall `better-sqlite3@12`.',
      { cause: error },
    );
  }
}

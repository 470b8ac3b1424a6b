// mysqlLicenseStore(): the LicenseStore of cluster mode on the MySQL 8 / MariaDB a deployment
// already runs — no Redis needed. Values and leases in one table on the database's clock;
// announcements found by one cheap indexed poll per interval for all the panels of a process.
import { mysqlPoolAddress } from '../../db/mysql-address.js';
import { describeError } from '../../logger.js';
import { OptionProblems, optionError, optionNames, positiveInteger, rejectUnknownOptions } from '../../options.js';
import type { LicenseStore } from '../license-store.js';
import { isMysqlIdentifier, type MysqlLicensePool, migrateMysqlLicenseTable, mysqlLicenseStatements, rowsOf } from './mysql-license-schema.js';
import { mysqlPoller } from './mysql-poller.js';

export interface MysqlLicenseStoreOptions {
  /** A mysql2/promise pool (`mysql.createPool()`, mysql2 3). Not closed by the store. */
  pool: MysqlLicensePool;
  /** The table's name (lower-case letters, digits, `_`), in the pool's database. @default 'panel_license_store' */
  table?: string;
  /**
   * How often the process asks what changed (one statement for all its panels). A lock reaches
   * every instance within about this long, well inside the guard's one second. @default 200
   */
  pollIntervalMs?: number;
}

const PRUNE_EVERY_MS = 10 * 60_000;

/**
 * A LicenseStore on MySQL 8 or MariaDB 10.6+. The table is created on first use (versioned
 * migrations under GET_LOCK). Every call fails fast with the database's error, said with where it
 * went (`host:port/db`, never a password): the guard then checks the mother itself.
 */
export function mysqlLicenseStore(options: MysqlLicenseStoreOptions): LicenseStore {
  if (typeof options !== 'object' || options === null) throw optionError('options', 'must be an object', 'Pass { pool } with a mysql2/promise pool.');
  const problems = new OptionProblems();
  rejectUnknownOptions('mysqlLicenseStore', options, optionNames<MysqlLicenseStoreOptions>({ pool: true, table: true, pollIntervalMs: true }), problems);
  const { pool } = options;
  if (typeof (pool as { execute?: unknown } | null)?.execute !== 'function' || typeof (pool as { getConnection?: unknown }).getConnection !== 'function')
    problems.add(optionError('pool', 'is not a mysql2/promise pool', "Pass `mysql.createPool(uri)` from 'mysql2/promise' (mysql2 3)."));
  const table = options.table ?? 'panel_license_store';
  if (!isMysqlIdentifier(table))
    problems.add(optionError('table', 'must be a lower-case SQL identifier of at most 51 characters', 'Use letters a-z, digits and _.'));
  const intervalMs = problems.check(() => positiveInteger('pollIntervalMs', options.pollIntervalMs, 200, 20, 1000), 200);
  problems.throwIfAny('mysqlLicenseStore');

  const sql = mysqlLicenseStatements(table);
  let migrated: Promise<void> | undefined;
  const ready = () => {
    migrated ??= migrateMysqlLicenseTable(pool, table).catch((error: unknown) => {
      migrated = undefined;
      throw error;
    });
    return migrated;
  };
  const failure = (error: unknown) =>
    new Error(`panel-license-guard: the license store (${table}) on MySQL at ${mysqlPoolAddress(pool)} failed: ${describeError(error)}`, { cause: error });
  const rows = async (statement: string, values: (string | number | null)[]) => {
    try {
      await ready();
      return rowsOf(await pool.execute(statement, values));
    } catch (error) {
      throw failure(error);
    }
  };
  let prunedAt = Date.now();
  const pruneNow = () => {
    if (Date.now() - prunedAt < PRUNE_EVERY_MS) return;
    prunedAt = Date.now();
    rows(sql.prune, []).catch(() => {});
  };
  const first = (found: Record<string, unknown>[]) => (found[0] === undefined ? null : String(found[0].v));
  const ttl = (ttlMs: number) => Math.max(1, Math.floor(ttlMs));
  const poller = mysqlPoller({
    intervalMs,
    now: async () => Number((await rows(sql.now, []))[0]?.now),
    changed: async (since) =>
      (await rows(sql.changed, [since])).map((row) => ({ key: String(row.k), value: String(row.v), updatedAt: Number(row.updated_at) })),
  });

  return {
    kind: 'mysql',
    get: async (key, maxBytes) => first(await rows(sql.get, [maxBytes + 1, key])),
    async publish(key, value, ttlMs) {
      await rows(sql.publish, [key, value, ttl(ttlMs)]);
      pruneNow();
    },
    async acquire(key, value, ttlMs, maxBytes) {
      await rows(sql.acquire, [key, value, ttl(ttlMs)]);
      // Whoever holds it now: this call when the value is ours.
      const holder = await rows(sql.holder, [Math.max(maxBytes + 1, value.length), key]);
      const current = first(holder);
      if (current === value) return null;
      return current === null ? null : current.slice(0, maxBytes + 1);
    },
    subscribe: (key, listener) => poller.subscribe(key, listener),
  };
}

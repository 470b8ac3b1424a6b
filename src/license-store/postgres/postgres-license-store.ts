// postgresLicenseStore(): the LicenseStore of cluster mode on the PostgreSQL a deployment already
// runs (for its panels, for the outbox) — no Redis needed. Values and leases in one table, expiry
// on the database's clock, announcements by LISTEN/NOTIFY on one connection per process.
import { poolAddress } from '../../db/postgres-url.js';
import { describeError } from '../../logger.js';
import { OptionProblems, optionError, optionNames, rejectUnknownOptions } from '../../options.js';
import type { LicenseStore } from '../license-store.js';
import { isIdentifier, migratePgLicenseTable, type PgLicensePool, pgLicenseNames, pgLicenseStatements } from './postgres-license-schema.js';
import { pgListener } from './postgres-listener.js';

export interface PostgresLicenseStoreOptions {
  /** A node-postgres `Pool` (pg 8). Not closed by the store; one of its connections is held for LISTEN while the guard runs. */
  pool: PgLicensePool;
  /** The schema of the store's table, created when missing. @default 'public' */
  schema?: string;
  /** The table's name (lower-case letters, digits, `_`). @default 'panel_license_store' */
  table?: string;
}

/** How often expired rows are swept, at most (by whichever call comes first after it). */
const PRUNE_EVERY_MS = 10 * 60_000;

/**
 * A LicenseStore on PostgreSQL. The table is created on first use (versioned migrations under an
 * advisory lock). Every call fails fast with the database's own error, said with where it went
 * (`host:port/db`, never a password): the guard then checks the mother itself.
 */
export function postgresLicenseStore(options: PostgresLicenseStoreOptions): LicenseStore {
  if (typeof options !== 'object' || options === null) throw optionError('options', 'must be an object', 'Pass { pool } with a node-postgres Pool.');
  const problems = new OptionProblems();
  rejectUnknownOptions('postgresLicenseStore', options, optionNames<PostgresLicenseStoreOptions>({ pool: true, schema: true, table: true }), problems);
  const { pool } = options;
  if (typeof (pool as { query?: unknown } | null)?.query !== 'function' || typeof (pool as { connect?: unknown }).connect !== 'function')
    problems.add(
      optionError('pool', 'is not a node-postgres Pool', 'Pass `new pg.Pool({ connectionString })` (pg 8); the store holds one connection of it for LISTEN.'),
    );
  const schema = options.schema ?? 'public';
  const table = options.table ?? 'panel_license_store';
  if (!isIdentifier(schema)) problems.add(optionError('schema', 'must be a lower-case SQL identifier', 'Use letters a-z, digits and _, e.g. "panel_license".'));
  if (!isIdentifier(table) || table.length > 50)
    problems.add(
      optionError('table', 'must be a lower-case SQL identifier of at most 50 characters', 'Use letters a-z, digits and _, e.g. "panel_license_store".'),
    );
  problems.throwIfAny('postgresLicenseStore');

  const names = pgLicenseNames(schema, table);
  const sql = pgLicenseStatements(names);
  let migrated: Promise<void> | undefined;
  const ready = () => {
    migrated ??= migratePgLicenseTable(pool, schema, names).catch((error: unknown) => {
      migrated = undefined;
      throw error;
    });
    return migrated;
  };
  /** The database's error, said with where (never a password) and what it means. */
  const failure = (error: unknown) =>
    new Error(
      `panel-license-guard: the license store (${names.shown}) on PostgreSQL at ${poolAddress(pool) ?? "the pool's database"} failed: ${describeError(error)}`,
      {
        cause: error,
      },
    );
  const query = async (text: string, values: unknown[]) => {
    try {
      await ready();
      return await pool.query(text, values);
    } catch (error) {
      throw failure(error);
    }
  };
  let prunedAt = Date.now();
  const pruneNow = () => {
    if (Date.now() - prunedAt < PRUNE_EVERY_MS) return;
    prunedAt = Date.now();
    query(sql.prune, []).catch(() => {});
  };
  const firstValue = (rows: Record<string, unknown>[]) => (rows[0] === undefined ? null : String(rows[0].value));

  const listener = pgListener({
    pool: {
      query: pool.query.bind(pool),
      connect: async () => {
        await ready();
        return pool.connect();
      },
    },
    channel: names.channel,
    read: async (key) => firstValue((await query(sql.get, [key, 1024 * 1024])).rows),
    readAll: async (keys) => (await query(sql.current, [keys])).rows.map((row) => ({ key: String(row.key), value: String(row.value) })),
  });

  return {
    kind: 'postgres',
    get: async (key, maxBytes) => firstValue((await query(sql.get, [key, maxBytes])).rows),
    async publish(key, value, ttlMs) {
      await query(sql.publish, [key, value, Math.max(1, Math.floor(ttlMs)), names.channel]);
      pruneNow();
    },
    async acquire(key, value, ttlMs, maxBytes) {
      // The holder can expire between the two statements: then take the key again.
      for (let attempt = 0; attempt < 3; attempt++) {
        if ((await query(sql.acquire, [key, value, Math.max(1, Math.floor(ttlMs))])).rows.length > 0) return null;
        const holder = firstValue((await query(sql.holder, [key, maxBytes])).rows);
        if (holder !== null) return holder;
      }
      throw failure(new Error(`the lease ${key} kept changing hands`));
    },
    subscribe: (key, listen) => listener.subscribe(key, listen),
  };
}

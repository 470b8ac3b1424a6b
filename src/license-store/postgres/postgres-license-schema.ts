// The PostgreSQL license store's table: one row per key (a panel's verdict, a lease), its value
// sealed by the guard, its expiry on the database's clock. Versioned migrations, applied once under
// an advisory lock, so instances starting together never race to create it.
import { createHash } from 'node:crypto';

/** The part of a node-postgres pool (or client) the store uses. */
export interface PgLicenseQueryable {
  query(text: string, values?: unknown[]): Promise<{ rows: Record<string, unknown>[]; rowCount: number | null }>;
}

/** A pooled client: the store holds one for LISTEN. */
export interface PgLicenseClient extends PgLicenseQueryable {
  on(event: 'notification', listener: (message: { channel: string; payload?: string }) => void): unknown;
  on(event: 'error' | 'end', listener: (error?: Error) => void): unknown;
  removeAllListeners(event?: string): unknown;
  release(error?: Error | boolean): void;
}

/** The part of a node-postgres Pool the store uses (its `connect()` gives a pooled client, PgLicenseClient). */
export interface PgLicensePool extends PgLicenseQueryable {
  connect(): Promise<unknown>;
}

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

/** Lower-case SQL identifiers only: they are interpolated (quoted) into statements, never user text. */
export const isIdentifier = (value: unknown): value is string => typeof value === 'string' && IDENTIFIER.test(value);

export interface PgLicenseNames {
  /** `"schema"."table"`. */
  table: string;
  migrations: string;
  /** The NOTIFY channel: one per table (channels are database-wide). */
  channel: string;
  /** The advisory lock migrations take. */
  lockKey: string;
  /** `schema.table`, for messages. */
  shown: string;
  /** The index of expiries (unqualified: an index lives in its table's schema). */
  expiresIndex: string;
}

export function pgLicenseNames(schema: string, table: string): PgLicenseNames {
  const digest = createHash('sha256').update(`${schema}.${table}`).digest('hex');
  return {
    table: `"${schema}"."${table}"`,
    migrations: `"${schema}"."${table}_migrations"`,
    channel: `panel_license_${digest.slice(0, 24)}`,
    lockKey: `panel-license-guard:license-store:${schema}.${table}`,
    shown: `${schema}.${table}`,
    expiresIndex: `"${table}_expires"`,
  };
}

/** Each migration, in order; its version is its index + 1. Never change one that shipped: add one. */
const MIGRATIONS = (names: PgLicenseNames): string[] => [
  `CREATE TABLE IF NOT EXISTS ${names.table} (
     key text PRIMARY KEY,
     value text NOT NULL,
     expires_at timestamptz NOT NULL
   );
   CREATE INDEX IF NOT EXISTS ${names.expiresIndex} ON ${names.table} (expires_at)`,
];

/** Creates the schema and the table when missing, under an advisory lock (one migrator at a time). */
export async function migratePgLicenseTable(pool: PgLicensePool, schema: string, names: PgLicenseNames): Promise<void> {
  const client = (await pool.connect()) as PgLicenseClient;
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [names.lockKey]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${names.migrations} (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
    const applied = Number((await client.query(`SELECT coalesce(max(version), 0) AS v FROM ${names.migrations}`)).rows[0]?.v ?? 0);
    const migrations = MIGRATIONS(names);
    for (let version = applied + 1; version <= migrations.length; version++) {
      await client.query(migrations[version - 1] as string);
      await client.query(`INSERT INTO ${names.migrations} (version) VALUES ($1)`, [version]);
    }
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}

/** The statements of the store, on validated identifiers. */
export function pgLicenseStatements(names: PgLicenseNames) {
  const t = names.table;
  const expiry = `now() + $3::bigint * interval '1 millisecond'`;
  return {
    // At most maxBytes + 1 characters cross the network: the guard refuses what is longer.
    get: `SELECT left(value, $2::int + 1) AS value FROM ${t} WHERE key = $1 AND expires_at > now()`,
    // Stored, then announced in the same statement (NOTIFY goes out at commit, so a listener
    // never hears of a value not in the table). The value rides along when it fits a
    // notification (8000 bytes); otherwise the listener reads it.
    publish: `WITH stored AS (
        INSERT INTO ${t} (key, value, expires_at) VALUES ($1, $2, ${expiry})
        ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at
        RETURNING key)
      SELECT pg_notify($4, CASE WHEN octet_length($2) <= 7000 THEN key || chr(10) || $2 ELSE key END) FROM stored`,
    // Taken when missing or expired (on the database's clock); a live holder stays.
    acquire: `INSERT INTO ${t} (key, value, expires_at) VALUES ($1, $2, ${expiry})
      ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at WHERE ${t}.expires_at <= now()
      RETURNING key`,
    holder: `SELECT left(value, $2::int + 1) AS value FROM ${t} WHERE key = $1`,
    /** Every live value of some keys: what a listener re-reads after it reconnected. */
    current: `SELECT key, value FROM ${t} WHERE key = ANY($1::text[]) AND expires_at > now()`,
    /** Rows expired for a day: nobody reads them any more. */
    prune: `DELETE FROM ${t} WHERE expires_at < now() - interval '1 day'`,
  };
}

// The MySQL/MariaDB license store's table: one row per key (a panel's verdict, a lease), its
// value sealed by the guard, its expiry and last change in milliseconds on the database's clock.
// Versioned migrations, applied once under a named lock (GET_LOCK), so instances starting
// together never race to create it.

/** The part of a mysql2/promise pool the store uses. */
export interface MysqlLicensePool {
  execute(sql: string, values?: (string | number | null)[]): Promise<[unknown, unknown]>;
  query(sql: string, values?: unknown[]): Promise<[unknown, unknown]>;
  getConnection(): Promise<{ query(sql: string, values?: unknown[]): Promise<[unknown, unknown]>; release(): void }>;
}

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,50}$/;
export const isMysqlIdentifier = (value: unknown): value is string => typeof value === 'string' && IDENTIFIER.test(value);

/** Now on the database's clock, in milliseconds since the epoch (UTC whatever the session's time zone). */
const NOW_MS = 'CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)';

export const rowsOf = (answer: [unknown, unknown]) => answer[0] as Record<string, unknown>[];

/** Each migration, in order; its version is its index + 1. Never change one that shipped: add one. */
const MIGRATIONS = (table: string): string[] => [
  `CREATE TABLE IF NOT EXISTS \`${table}\` (
     k VARCHAR(191) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
     v MEDIUMTEXT CHARACTER SET utf8mb4 NOT NULL,
     expires_at BIGINT NOT NULL,
     updated_at BIGINT NOT NULL,
     KEY \`${table}_updated\` (updated_at)
   ) ENGINE=InnoDB`,
];

export async function migrateMysqlLicenseTable(pool: MysqlLicensePool, table: string): Promise<void> {
  const connection = await pool.getConnection();
  const lock = `panel-license-guard:license-store:${table}`;
  try {
    const [taken] = rowsOf(await connection.query('SELECT GET_LOCK(?, 30) AS taken', [lock]));
    if (Number(taken?.taken) !== 1) throw new Error(`could not take the migration lock ${lock} within 30 s`);
    try {
      await connection.query(`CREATE TABLE IF NOT EXISTS \`${table}_migrations\` (version INT PRIMARY KEY, applied_at BIGINT NOT NULL) ENGINE=InnoDB`);
      const [applied] = rowsOf(await connection.query(`SELECT COALESCE(MAX(version), 0) AS v FROM \`${table}_migrations\``));
      const migrations = MIGRATIONS(table);
      for (let version = Number(applied?.v ?? 0) + 1; version <= migrations.length; version++) {
        await connection.query(migrations[version - 1] as string);
        await connection.query(`INSERT INTO \`${table}_migrations\` (version, applied_at) VALUES (?, ${NOW_MS})`, [version]);
      }
    } finally {
      await connection.query('SELECT RELEASE_LOCK(?)', [lock]).catch(() => {});
    }
  } finally {
    connection.release();
  }
}

/** The statements of the store, on a validated table name. Values go apart from the text (prepared). */
export function mysqlLicenseStatements(table: string) {
  const t = `\`${table}\``;
  return {
    now: `SELECT ${NOW_MS} AS now`,
    // At most maxBytes + 1 characters cross the network: the guard refuses what is longer.
    get: `SELECT LEFT(v, ?) AS v FROM ${t} WHERE k = ? AND expires_at > ${NOW_MS}`,
    publish: `INSERT INTO ${t} (k, v, expires_at, updated_at) VALUES (?, ?, ${NOW_MS} + ?, ${NOW_MS})
      ON DUPLICATE KEY UPDATE v = VALUES(v), expires_at = VALUES(expires_at), updated_at = VALUES(updated_at)`,
    // Taken when missing or expired (on the database's clock); a live holder stays. `v` is set
    // before `expires_at`, so both conditions read the old expiry.
    acquire: `INSERT INTO ${t} (k, v, expires_at, updated_at) VALUES (?, ?, ${NOW_MS} + ?, ${NOW_MS})
      ON DUPLICATE KEY UPDATE v = IF(expires_at <= ${NOW_MS}, VALUES(v), v), expires_at = IF(expires_at <= ${NOW_MS}, VALUES(expires_at), expires_at)`,
    holder: `SELECT LEFT(v, ?) AS v FROM ${t} WHERE k = ?`,
    /** Whatever changed since a time (the poll of announcements: one statement for every key of the process). */
    changed: `SELECT k, v, updated_at FROM ${t} WHERE updated_at >= ? AND expires_at > ${NOW_MS} ORDER BY updated_at`,
    prune: `DELETE FROM ${t} WHERE expires_at < ${NOW_MS} - 86400000`,
  };
}

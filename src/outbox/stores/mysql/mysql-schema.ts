// The MySQL/MariaDB outbox tables: names, the server check, the versioned idempotent migration,
// transactions on a borrowed connection, and privilege errors that name the grant.

import type { MysqlQueryable, MysqlResult } from '../shared/connections.js';
import { migrationOperators } from './mysql-operator-migration.js';
import { run } from './mysql-params.js';

export type { MysqlQueryable, MysqlResult } from '../shared/connections.js';

export interface MysqlConnection extends MysqlQueryable {
  execute(sql: string, values?: (string | number | null)[]): Promise<MysqlResult>;
  release(): void;
}

/** The part of a mysql2/promise pool (`mysql.createPool()`) this store uses. */
export interface MysqlPool extends MysqlQueryable {
  execute(sql: string, values?: (string | number | null)[]): Promise<MysqlResult>;
  getConnection(): Promise<MysqlConnection>;
}

export type Row = Record<string, unknown>;
export const rowsOf = ([rows]: MysqlResult) => rows as Row[];
/** The OK packet of a write: rows matched, the new id, and the server's status flags. */
export const headerOf = ([header]: MysqlResult) => header as { affectedRows: number; insertId: number; serverStatus?: number };

export const SCHEMA_VERSION = 3;

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,63}$/;

/** Lower-case SQL identifiers only: they are interpolated (quoted) into statements, never user text. */
export function validIdentifier(value: string): boolean {
  return IDENTIFIER.test(value);
}

export interface MysqlTableNames {
  /** `` `database`.`table` `` (or `` `table` `` in the pool's database), quoted. */
  table: string;
  /** The table of track locks: one row per (panel, track), locked while a track's rows change. */
  tracks: string;
  /** Values every process shares (pauses, feed positions): `<table>_controls`. */
  controls: string;
  migrations: string;
  /** The migrations table's bare name (to look it up). */
  migrationsName: string;
  /** The table's bare name (to look it up). */
  tableName: string;
  /** For messages and grants: `database.table`, or `table`. */
  shown: string;
  database: string | undefined;
}

export function mysqlTableNames(database: string | undefined, table: string): MysqlTableNames {
  const qualified = (name: string) => (database === undefined ? `\`${name}\`` : `\`${database}\`.\`${name}\``);
  return {
    table: qualified(table),
    tracks: qualified(`${table}_tracks`),
    controls: qualified(`${table}_controls`),
    migrations: qualified(`${table}_migrations`),
    migrationsName: `${table}_migrations`,
    tableName: table,
    shown: database === undefined ? table : `${database}.${table}`,
    database,
  };
}

/** Borrows a connection for `work` and always gives it back. */
export async function withConnection<T>(pool: MysqlPool, work: (connection: MysqlConnection) => Promise<T>): Promise<T> {
  const connection = await pool.getConnection();
  try {
    await assertSessionCharsets(pool, connection);
    return await work(connection);
  } finally {
    connection.release();
  }
}

/** The pools whose sessions were checked to talk utf8mb4 at start-up (migrate). */
const verifiedPools = new WeakSet<object>();

/** The character sets a session reads values in, compares them in, and sends results in. */
const SESSION_CHARSETS =
  'SELECT @@character_set_client AS character_set_client, @@character_set_connection AS character_set_connection, @@character_set_results AS character_set_results';

/**
 * What each may be: utf8mb4, or (for results) NULL, no conversion at all. `binary` results are
 * refused: mysql2 then gives every text column as bytes (these three variables included).
 */
const FITTING: Record<string, (value: string | null) => boolean> = {
  character_set_client: (value) => value === 'utf8mb4',
  character_set_connection: (value) => value === 'utf8mb4',
  character_set_results: (value) => value === 'utf8mb4' || value === null,
};
const asText = (value: unknown): string | null =>
  value === null || value === undefined ? null : Buffer.isBuffer(value) ? value.toString('utf8') : String(value);

/**
 * Refuses a session that switched a character set since start-up (`SET NAMES latin1`, or only
 * `SET character_set_connection = latin1`, by an app sharing the pool): its values would be read
 * or compared as that character set and stored changed (two track ids one row, a release
 * double-encoded) or sent to the mother changed. mysql2 follows only `character_set_client`, so
 * the session is asked, once per connection batch (the store holds the connection for the batch:
 * nothing else runs on it meanwhile). Another utf8mb4 collation (`SET NAMES utf8mb4`) is fine: the
 * columns' own collation decides every comparison.
 */
export async function assertSessionCharsets(pool: object, connection: MysqlQueryable): Promise<void> {
  if (!verifiedPools.has(pool)) return;
  const [session] = rowsOf(await connection.query(SESSION_CHARSETS));
  const changed = Object.entries(FITTING).filter(([name, fits]) => !fits(asText(session?.[name])));
  if (changed.length === 0) return;
  const now = changed.map(([name]) => `${name} is ${asText(session?.[name])}`).join(', ');
  throw new Error(
    `panel-license-guard: a session of the outbox's pool switched its character set after start-up (${now}; utf8mb4 at start-up): the store would store or send its values changed, so it uses none of it. Keep the pool's sessions in utf8mb4, or give the outbox a pool of its own.`,
  );
}

/**
 * Runs `work` in a READ COMMITTED transaction of its own (whatever the server's default): after
 * waiting on a track's lock, the next statement must see what the previous holder committed, and
 * no gap locks are taken. A deadlock or lock wait timeout retries the whole transaction.
 */
export async function inTransaction<T>(pool: MysqlPool, work: (connection: MysqlQueryable) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await withConnection(pool, async (connection) => {
        await connection.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
        await connection.query('START TRANSACTION');
        try {
          const result = await work(connection);
          await connection.query('COMMIT');
          return result;
        } catch (error) {
          await connection.query('ROLLBACK').catch(() => {});
          throw error;
        }
      });
    } catch (error) {
      if (attempt < 5 && isRetriable(error)) continue;
      throw error;
    }
  }
}

/** A deadlock (1213) or a lock wait timeout (1205): the transaction can simply run again. */
// Deadlock, lock wait timeout, and MariaDB's auto-increment lock failing the same way (1467).
export const isRetriable = (error: unknown) => [1213, 1205, 1467].includes(Number((error as { errno?: unknown })?.errno));

/** Times are epoch milliseconds (BIGINT), as in the other stores, so the row rules are shared. */
export function migrationV1({ table, tracks }: MysqlTableNames, collation: string): string[] {
  return [
    // A binary NO PAD collation: panels and track ids compare byte for byte, as in the other
    // stores (utf8mb4_bin pads: "t-1 " would be the same track as "t-1", "acme " the same panel).
    // `pending_track` is the track while the row is pending (NULL otherwise): its unique index
    // keeps one pending row per panel and track, as PostgreSQL's partial index does.
    `CREATE TABLE IF NOT EXISTS ${table} (
      id               BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
      panel            VARCHAR(200) NOT NULL,
      remote_track_id  VARCHAR(500) NULL,
      body             LONGTEXT     NOT NULL,
      content_hash     VARCHAR(128) NOT NULL,
      state            VARCHAR(9)   NOT NULL,
      attempts         INT          NOT NULL DEFAULT 0,
      next_attempt_at  BIGINT       NOT NULL,
      last_error       TEXT         NULL,
      release_id       BIGINT       NULL,
      delivered_seq    BIGINT UNSIGNED NULL,
      history_of       BIGINT       NULL,
      lease_owner      VARCHAR(255) NULL,
      lease_expires_at BIGINT       NULL,
      created_at       BIGINT       NOT NULL,
      updated_at       BIGINT       NOT NULL,
      delivered_at     BIGINT       NULL,
      pending_track    VARCHAR(500) AS (CASE WHEN state = 'pending' THEN remote_track_id END) STORED,
      CHECK (state IN ('pending', 'delivered', 'dead')),
      UNIQUE KEY one_pending_per_track (panel, pending_track),
      KEY due (state, panel, next_attempt_at, id),
      KEY track (panel, remote_track_id, state, id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation} COMMENT='panel-license-guard release outbox'`,
    `CREATE TABLE IF NOT EXISTS ${tracks} (
      panel           VARCHAR(200) NOT NULL,
      remote_track_id VARCHAR(500) NOT NULL,
      PRIMARY KEY (panel, remote_track_id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation} COMMENT='panel-license-guard outbox: one row per track, locked while its rows change'`,
  ];
}

/** v3: the enqueuing caller's trace context (W3C `traceparent` and `tracestate`, at most 1,024 characters), which the delivery span links to. */
function migrationV3({ table }: MysqlTableNames): string[] {
  return [`ALTER TABLE ${table} ADD COLUMN trace_context VARCHAR(1024) NULL`];
}

/**
 * Each step gives the statements to run (it may first look at the table through `connection`);
 * every statement is written to run again, should a step be cut off half-way.
 */
type Migration = (names: MysqlTableNames, collation: string, connection: MysqlQueryable) => string[] | Promise<string[]>;

const MIGRATIONS: Migration[] = [migrationV1, migrationOperators, migrationV3];

/** An ADD COLUMN that ran before its version was recorded (MySQL has no ADD COLUMN IF NOT EXISTS): already done. */
const alreadyApplied = (error: unknown) => {
  if (Number((error as { errno?: unknown })?.errno) !== 1060) throw error;
};

/** Values: the database (null: the session's), the migrations table's name. */
export const TABLE_EXISTS = 'SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?';

/**
 * The server, from `SELECT VERSION()`: claims need FOR UPDATE SKIP LOCKED (MySQL 8.0, MariaDB
 * 10.6) and ids a binary NO PAD collation (MySQL 8.0.17). Returns that collation.
 */
export function checkServerVersion(version: string): string {
  const [major = 0, minor = 0, patch = 0] = version.split(/[.-]/).map(Number);
  const mariadb = /mariadb/i.test(version);
  const supported = mariadb ? major > 10 || (major === 10 && minor >= 6) : major > 8 || (major === 8 && (minor > 0 || patch >= 17));
  if (!supported)
    throw new Error(
      `panel-license-guard: the MySQL outbox needs MySQL 8.0.17 or later, or MariaDB 10.6 or later (for FOR UPDATE SKIP LOCKED and a NO PAD collation); this server is ${version}. Upgrade it, or use the SQLite or PostgreSQL store.`,
    );
  return mariadb ? 'utf8mb4_nopad_bin' : 'utf8mb4_0900_bin';
}

const PRIVILEGE_ERRORS = new Set([1044, 1142, 1143, 1227, 1370]);

/** A missing privilege, said in full: what to grant, on what. Other errors pass through. */
export function privilegeError(names: MysqlTableNames, error: unknown): Error {
  if (PRIVILEGE_ERRORS.has(Number((error as { errno?: unknown })?.errno))) {
    const on = names.database === undefined ? 'the database' : `\`${names.database}\``;
    return new Error(
      `panel-license-guard: the database user lacks a privilege the outbox tables ${names.shown}, ${names.shown}_tracks, ${names.shown}_controls and ${names.shown}_migrations need (${(error as Error).message}). Grant it once, to create or upgrade them: GRANT CREATE, ALTER, INDEX ON ${on}.* TO the user (or create them once with a user that may; the store does it on first use). Afterwards it needs GRANT SELECT, INSERT, UPDATE, DELETE ON each of the four tables (DELETE for retention, and for an enqueue in your transaction, which deletes its marker row in ${names.shown}_tracks).`,
      { cause: error },
    );
  }
  return error instanceof Error ? error : new Error(String(error));
}

/**
 * Checks the server, then creates the tables when missing, once per database however many
 * processes start together (a named lock serializes them), and records the version. A table
 * written by a newer version of this package is refused rather than misread.
 */
export async function migrate(pool: MysqlPool, names: MysqlTableNames): Promise<void> {
  await withConnection(pool, async (connection) => {
    const [server] = rowsOf(
      await connection.query('SELECT VERSION() AS version, @@SESSION.autocommit AS autocommit, @@SESSION.character_set_client AS charset'),
    );
    const collation = checkServerVersion(String(server?.version));
    // Text the connection cannot carry is changed on the way in (an emoji becomes `?` on a
    // utf8mb3 connection without strict mode): two panel or track ids could become one.
    if (server?.charset !== 'utf8mb4')
      throw new Error(
        `panel-license-guard: the outbox's pool talks to the server in ${String(server?.charset)}, which cannot carry every character of a panel id, a track id or a release: two different ids could be stored as one. Use utf8mb4 (mysql2's default charset; leave \`charset\` unset or set it to 'UTF8MB4_BIN').`,
      );
    verifiedPools.add(pool);
    // The store's single statements (an outcome, a lease handed back) must commit on their own.
    if (Number(server?.autocommit) === 0)
      throw new Error(
        "panel-license-guard: the outbox's pool runs with autocommit off, so the store's single statements (recording a delivery, handing a lease back) would never commit. Leave autocommit on for this pool (mysql2's default).",
      );
    const lock = `panel-license-guard:${names.shown}`.slice(0, 64);
    const [taken] = rowsOf(await run(connection, 'SELECT GET_LOCK(?, 30) AS taken', [lock]));
    if (Number(taken?.taken) !== 1) throw new Error(`panel-license-guard: another process held the migration lock of ${names.shown} for 30 s; try again.`);
    try {
      // Look before creating: a user with only SELECT/INSERT/UPDATE/DELETE on tables an owner
      // created must not need CREATE.
      const present = rowsOf(await run(connection, TABLE_EXISTS, [names.database ?? null, names.migrationsName]));
      const version =
        Number(present[0]?.n) > 0 ? Number(rowsOf(await connection.query(`SELECT COALESCE(MAX(version), 0) AS v FROM ${names.migrations}`))[0]?.v) : 0;
      if (version > SCHEMA_VERSION)
        throw new Error(
          `panel-license-guard: ${names.shown} holds outbox schema v${version}, written by a newer version of this package; upgrade it to use this table.`,
        );
      if (version < 1)
        await connection.query(`CREATE TABLE IF NOT EXISTS ${names.migrations} (version INT PRIMARY KEY, applied_at BIGINT NOT NULL) ENGINE=InnoDB`);
      for (const [index, migration] of MIGRATIONS.entries()) {
        if (index + 1 <= version) continue;
        // MySQL commits each DDL statement on its own: every statement is written to run again.
        for (const statement of await migration(names, collation, connection)) await connection.query(statement).catch(alreadyApplied);
        await run(connection, `INSERT IGNORE INTO ${names.migrations} (version, applied_at) VALUES (?, ?)`, [index + 1, Date.now()]);
      }
    } catch (error) {
      throw privilegeError(names, error);
    } finally {
      await run(connection, 'SELECT RELEASE_LOCK(?)', [lock]).catch(() => {});
    }
  });
}

// The SQLite outbox file: its schema, and opening it for writing (migrating) or for reading only.
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { loadSqliteDriver, type SqliteDatabase } from '../../../db/sqlite-driver.js';
import { MIGRATION_WAIT_MS, migrationNotice } from './sqlite-migration-wait.js';
import { migrateOperatorSchema, STATE_CHECK } from './sqlite-operator-schema.js';

const SCHEMA_VERSION = 6;

// Times are epoch milliseconds. `delivered_seq` orders deliveries of one track: the highest is the
// content the mother holds now (timestamps can tie; ids do not follow delivery order).
// `history_of` (v2) marks a delivered payload kept after its row took a newer one: the row's id.
// `panel` (v3) is whose credentials the row goes out with; '' for a row stored before v3.
// 'cancelled' (v6) and the feed's column: sqlite-operator-schema.ts.
// `trace_context` (v6) is the enqueuing caller's trace context, for the delivery span's link.
const SCHEMA = `
CREATE TABLE IF NOT EXISTS release_outbox (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  panel            TEXT    NOT NULL DEFAULT '',
  remote_track_id  TEXT,
  body             TEXT    NOT NULL,
  content_hash     TEXT    NOT NULL,
  state            TEXT    NOT NULL ${STATE_CHECK},
  attempts         INTEGER NOT NULL DEFAULT 0,
  next_attempt_at  INTEGER NOT NULL,
  last_error       TEXT,
  release_id       INTEGER,
  delivered_seq    INTEGER,
  history_of       INTEGER,
  lease_owner      TEXT,
  lease_expires_at INTEGER,
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL,
  delivered_at     INTEGER,
  trace_context    TEXT
);
`;

/**
 * Claims and tracks are per panel: pending rows by panel (a claim seeks from panel to panel), and a
 * panel's tracks. Lists (v4) are by state in id order: a page reads the rows it shows, not every
 * row of other states before them (a row's state is stored after its body, so a scan reads every
 * body); with `created_at`, the oldest pending row is found in it alone. Rows are appended to it
 * in id order, which keeps its cost to an enqueue small. A list of one panel's or one track's
 * rows of a state (v5) reads its own index in id order: without it a page filtered by a panel
 * with few rows, or a track found nowhere, walked every row of that state in one statement.
 */
const INDEXES = `
CREATE INDEX IF NOT EXISTS release_outbox_panel_due ON release_outbox (state, panel, next_attempt_at, id);
CREATE INDEX IF NOT EXISTS release_outbox_panel_track ON release_outbox (panel, remote_track_id, state, id);
CREATE INDEX IF NOT EXISTS release_outbox_list ON release_outbox (state, id, created_at);
CREATE INDEX IF NOT EXISTS release_outbox_panel_list ON release_outbox (state, panel, id);
CREATE INDEX IF NOT EXISTS release_outbox_track_list ON release_outbox (state, remote_track_id, id);
`;

const MIGRATE_V1_TO_V2 = 'ALTER TABLE release_outbox ADD COLUMN history_of INTEGER';
// Rows of older files keep '' (no panel): nobody sends them until they are adopted.
const MIGRATE_V2_TO_V3 = `ALTER TABLE release_outbox ADD COLUMN panel TEXT NOT NULL DEFAULT '';
DROP INDEX IF EXISTS release_outbox_due;
DROP INDEX IF EXISTS release_outbox_track;`;
const MIGRATE_V5_TO_V6 = 'ALTER TABLE release_outbox ADD COLUMN trace_context TEXT';

function tooNew(file: string, version: number): Error {
  return new Error(`panel-license-guard: ${file} holds outbox schema v${version}, written by a newer version of this package; upgrade it to open this file.`);
}

/** The private snapshot directory a read-only database was opened from, removed when it closes. */
const snapshots = new WeakMap<SqliteDatabase, string>();

/** Closes a database opened by openOutboxDatabase, and removes its snapshot if it has one. */
export function closeOutboxDatabase(db: SqliteDatabase): void {
  if (db.open) db.close();
  const folder = snapshots.get(db);
  if (folder !== undefined) rmSync(folder, { recursive: true, force: true });
  snapshots.delete(db);
}

/**
 * A WAL file can be read without write access to it, but SQLite needs its `-shm` index beside it:
 * in a directory we cannot write to (a read-only mount), the file is read from a private copy
 * (with its `-wal`), a snapshot that is good enough for listing. Symbolic links are resolved
 * first: SQLite keeps the `-wal` beside the real file, not beside the link.
 */
function openReadOnly(Driver: ReturnType<typeof loadSqliteDriver>, file: string, busyTimeoutMs: number): SqliteDatabase {
  const db = new Driver(file, { timeout: busyTimeoutMs, readonly: true, fileMustExist: true });
  try {
    db.pragma('user_version'); // SQLite opens lazily: the first read is what fails
    return db;
  } catch (error) {
    db.close();
    if ((error as { code?: unknown }).code !== 'SQLITE_CANTOPEN') throw error;
  }
  const real = realpathSync(file);
  const folder = mkdtempSync(join(tmpdir(), 'panel-outbox-snapshot-'));
  try {
    const copy = join(folder, basename(real));
    copyFileSync(real, copy);
    if (existsSync(`${real}-wal`)) copyFileSync(`${real}-wal`, `${copy}-wal`);
    const snapshot = new Driver(copy, { timeout: busyTimeoutMs, readonly: true, fileMustExist: true });
    snapshots.set(snapshot, folder);
    return snapshot;
  } catch (error) {
    rmSync(folder, { recursive: true, force: true });
    throw error;
  }
}

/**
 * Durability first: WAL so readers never block the writer, FULL until the store takes over (it
 * syncs each enqueue's commit to disk before resolving it, sqlite-store.ts). The
 * schema is written only when the file is not current yet, so opening a current file writes
 * nothing. With `readonly`, the file must exist with the current schema and nothing is written
 * at all: listing works on a read-only file or a full disk.
 */
export function openOutboxDatabase(file: string, busyTimeoutMs: number, readonly: boolean): SqliteDatabase {
  const Driver = loadSqliteDriver();
  if (readonly) {
    const db = openReadOnly(Driver, file, busyTimeoutMs);
    try {
      const version = Number(db.pragma('user_version', { simple: true }));
      if (version > SCHEMA_VERSION) throw tooNew(file, version);
      // An older schema reads the same (v2 added a column listing never shows; v3's `panel` reads as '' when missing;
      // before v6 there are no controls to read, and no feed: sqlite-read.ts).
      if (version < 1) throw new Error(`panel-license-guard: ${file} is not a release outbox (no outbox schema in it).`);
      return db;
    } catch (error) {
      closeOutboxDatabase(db);
      throw error;
    }
  }
  if (file !== ':memory:') mkdirSync(dirname(resolve(file)), { recursive: true });
  const db = new Driver(file, { timeout: busyTimeoutMs });
  try {
    if (db.pragma('journal_mode', { simple: true }) !== 'wal') db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    const version = Number(db.pragma('user_version', { simple: true }));
    if (version > SCHEMA_VERSION) throw tooNew(file, version);
    if (version < SCHEMA_VERSION) migrateFile(db, file, busyTimeoutMs);
    return db;
  } catch (error) {
    db.close();
    throw error;
  }
}

/**
 * Brings the schema up to date under the write lock. When another process holds that lock and
 * says it is migrating the file (sqlite-migration-wait.ts), this waits for it as long as a
 * migration may take; otherwise it fails after the busy timeout, as any write would.
 */
function migrateFile(db: SqliteDatabase, file: string, busyTimeoutMs: number): void {
  const notice = migrationNotice(file);
  const migrate = db.transaction(() => {
    // Read again under the write lock: another process may have migrated meanwhile.
    const current = Number(db.pragma('user_version', { simple: true }));
    if (current >= SCHEMA_VERSION) return;
    notice.announce();
    if (current === 0) db.exec(SCHEMA);
    if (current === 1) db.exec(MIGRATE_V1_TO_V2);
    if (current === 1 || current === 2) db.exec(MIGRATE_V2_TO_V3);
    // Looked for, not assumed: a step cut off before the version was recorded may have added it.
    const hasTrace = db.prepare("SELECT 1 AS found FROM pragma_table_info('release_outbox') WHERE name = 'trace_context'").get() !== undefined;
    if (current >= 1 && !hasTrace) db.exec(MIGRATE_V5_TO_V6);
    db.exec(INDEXES);
    migrateOperatorSchema(db, file);
    db.pragma(`user_version = ${SCHEMA_VERSION}`);
  });
  try {
    migrate.immediate();
  } catch (error) {
    if ((error as { code?: unknown }).code !== 'SQLITE_BUSY' || !notice.othersMigrating()) throw error;
    db.pragma(`busy_timeout = ${Math.max(busyTimeoutMs, MIGRATION_WAIT_MS)}`);
    try {
      migrate.immediate();
    } finally {
      db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    }
  } finally {
    notice.withdraw();
  }
}

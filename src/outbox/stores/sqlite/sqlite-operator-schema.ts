// The schema step for what operators do to a SQLite outbox: the 'cancelled' state, the delivery
// feed's positions and the controls table (pauses, feed positions). One idempotent function, run
// under the migration's write lock for a file of any older version (a new file too): it only adds
// what is missing.
import type { SqliteDatabase } from '../../../db/sqlite-driver.js';

/** The state CHECK every file before this step was created with (the text SQLite keeps of it). */
const CHECK_BEFORE = "CHECK (state IN ('pending', 'delivered', 'dead'))";
/** The same CHECK allowing 'cancelled'; a new file is created with it (sqlite-schema.ts). */
export const STATE_CHECK = "CHECK (state IN ('pending', 'delivered', 'dead', 'cancelled'))";

/**
 * `feed_position`: a delivered row's place in the delivery feed, given once its delivery has
 * committed (sqlite-feed.ts); NULL until then, and on every other row. Its index holds delivered
 * rows only (partial: enqueues, leases and retries never touch it) and serves both the feed's
 * read (`feed_position > ? ORDER BY feed_position`) and the stamping's search for delivered rows
 * with no position yet, in (delivered_at, id) order; `panel` last so that a feed of one panel
 * checks it in the index, not in each row.
 */
const FEED = `
CREATE TABLE IF NOT EXISTS release_outbox_controls (
  name       TEXT    NOT NULL PRIMARY KEY,
  value      TEXT    NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS release_outbox_feed ON release_outbox (feed_position, delivered_at, id, panel) WHERE state = 'delivered';
`;

export function migrateOperatorSchema(db: SqliteDatabase, file: string): void {
  allowCancelled(db, file);
  const hasFeed = db.prepare("SELECT 1 AS found FROM pragma_table_info('release_outbox') WHERE name = 'feed_position'").get() !== undefined;
  // Rows delivered before this step get no position: the first feed read gives them one.
  if (!hasFeed) db.exec('ALTER TABLE release_outbox ADD COLUMN feed_position INTEGER');
  db.exec(FEED);
}

/**
 * SQLite cannot alter a CHECK, and rebuilding the table would copy every row (seconds per million,
 * with the lock held). Loosening a CHECK in the stored CREATE TABLE text is what SQLite's docs
 * allow writable_schema for (existing rows satisfy the looser rule); bumping schema_version makes
 * every connection, of this process or another, read the schema again. better-sqlite3 opens
 * connections in defensive mode, which forbids writable_schema: unsafe mode lifts it meanwhile.
 */
function allowCancelled(db: SqliteDatabase, file: string): void {
  const table = db.prepare("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'release_outbox'").get() as { sql: string } | undefined;
  if (table === undefined || table.sql.includes(STATE_CHECK)) return;
  if (!table.sql.includes(CHECK_BEFORE))
    throw new Error(
      `panel-license-guard: ${file} has a release_outbox table whose state CHECK is not the one this package created; ` +
        `it cannot be migrated to allow 'cancelled'. Restore the file from a backup made by this package, or open a new file.`,
    );
  const version = Number(db.pragma('schema_version', { simple: true }));
  db.unsafeMode(true);
  try {
    db.pragma('writable_schema = ON');
    try {
      db.prepare("UPDATE sqlite_schema SET sql = ? WHERE type = 'table' AND name = 'release_outbox'").run(table.sql.replace(CHECK_BEFORE, STATE_CHECK));
      db.pragma(`schema_version = ${version + 1}`);
    } finally {
      db.pragma('writable_schema = OFF');
    }
  } finally {
    db.unsafeMode(false);
  }
}

// sqliteLicenseStore(): the LicenseStore for a deployment of one host — its instances, or the
// workers of one node:cluster, sharing one SQLite file — whose verdicts must outlive restarts with
// no server at all. Values and leases in one table; announcements found by polling a sequence
// (one indexed read per interval for every key of the process).
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { loadSqliteDriver, type SqliteDatabase } from '../../db/sqlite-driver.js';
import { describeError } from '../../logger.js';
import { OptionProblems, optionError, optionNames, positiveInteger, rejectUnknownOptions } from '../../options.js';
import type { LicenseStore } from '../license-store.js';
import { sqlitePoller } from './sqlite-poller.js';

export interface SqliteLicenseStoreOptions {
  /** The database file, created (with its folder) when missing. Every instance on the host opens the same file. */
  file: string;
  /** How often the process asks what changed. @default 100 */
  pollIntervalMs?: number;
  /**
   * How long a call waits for another process's write before it fails (the guard then checks on
   * its own). It waits by retrying every few milliseconds, never blocking the event loop. @default 1000
   */
  busyTimeoutMs?: number;
}

const MIGRATIONS = [
  `CREATE TABLE IF NOT EXISTS license_store (k TEXT PRIMARY KEY, v TEXT NOT NULL, expires_at INTEGER NOT NULL, seq INTEGER NOT NULL);
   CREATE INDEX IF NOT EXISTS license_store_seq ON license_store (seq);`,
];

const isBusy = (error: unknown) => /^SQLITE_(BUSY|LOCKED)/.test(String((error as { code?: unknown } | null)?.code));
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function open(file: string): SqliteDatabase {
  if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
  const Database = loadSqliteDriver();
  // No busy timeout in SQLite itself: better-sqlite3 would wait synchronously, holding the event
  // loop (every request) while another process writes. A busy call is retried instead (failing).
  const db = new Database(file, { timeout: 0 });
  try {
    prepare(db);
  } catch (error) {
    db.close();
    throw error;
  }
  return db;
}

/** WAL (readers never wait for the writer), and the table migrated. */
function prepare(db: SqliteDatabase): void {
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.transaction(() => {
    db.exec('CREATE TABLE IF NOT EXISTS license_store_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)');
    const applied = Number((db.prepare('SELECT coalesce(max(version), 0) AS v FROM license_store_migrations').get() as { v: number }).v);
    for (let version = applied + 1; version <= MIGRATIONS.length; version++) {
      db.exec(MIGRATIONS[version - 1] as string);
      db.prepare('INSERT INTO license_store_migrations (version, applied_at) VALUES (?, ?)').run(version, Date.now());
    }
  }).immediate();
}

/** A LicenseStore in a SQLite file (better-sqlite3, an optional peer dependency), on this host's clock. */
export function sqliteLicenseStore(options: SqliteLicenseStoreOptions): LicenseStore & { close(): void } {
  if (typeof options !== 'object' || options === null) throw optionError('options', 'must be an object', 'Pass { file: "./data/license.db" }.');
  const problems = new OptionProblems();
  rejectUnknownOptions(
    'sqliteLicenseStore',
    options,
    optionNames<SqliteLicenseStoreOptions>({ file: true, pollIntervalMs: true, busyTimeoutMs: true }),
    problems,
  );
  if (typeof options.file !== 'string' || options.file.trim() === '')
    problems.add(optionError('file', 'must be a file path', 'Pass e.g. "./data/license.db": every instance on this host opens the same file.'));
  const intervalMs = problems.check(() => positiveInteger('pollIntervalMs', options.pollIntervalMs, 100, 10, 1000), 100);
  const busyTimeoutMs = problems.check(() => positiveInteger('busyTimeoutMs', options.busyTimeoutMs, 1000, 1, 60_000), 1000);
  problems.throwIfAny('sqliteLicenseStore');

  let db: SqliteDatabase | undefined;
  /** Runs `work` on the database, retrying while another process writes, up to `busyTimeoutMs`. */
  const failing = async <T>(work: (db: SqliteDatabase) => T): Promise<T> => {
    const deadline = Date.now() + busyTimeoutMs;
    for (let wait = 2; ; wait = Math.min(wait * 2, 50)) {
      try {
        db ??= open(options.file);
        return work(db);
      } catch (error) {
        if (isBusy(error) && Date.now() + wait <= deadline) {
          await pause(wait);
          continue;
        }
        throw new Error(`panel-license-guard: the SQLite license store (${options.file}) failed: ${describeError(error)}`, { cause: error });
      }
    }
  };
  const NEXT_SEQ = '(SELECT coalesce(max(seq), 0) + 1 FROM license_store)';
  const poller = sqlitePoller({
    intervalMs,
    newest: async () => failing((db) => Number((db.prepare('SELECT coalesce(max(seq), 0) AS seq FROM license_store').get() as { seq: number }).seq)),
    after: async (seq) =>
      failing(
        (db) =>
          db.prepare('SELECT k, v, seq FROM license_store WHERE seq > ? AND expires_at > ? ORDER BY seq').all(seq, Date.now()) as {
            k: string;
            v: string;
            seq: number;
          }[],
      ),
  });

  return {
    kind: 'sqlite',
    async get(key, maxBytes) {
      const row = (await failing((db) =>
        db.prepare('SELECT substr(v, 1, ?) AS v FROM license_store WHERE k = ? AND expires_at > ?').get(maxBytes + 1, key, Date.now()),
      )) as { v: string } | undefined;
      return row?.v ?? null;
    },
    async publish(key, value, ttlMs) {
      await failing((db) =>
        db
          .prepare(
            `INSERT INTO license_store (k, v, expires_at, seq) VALUES (?, ?, ?, ${NEXT_SEQ})
             ON CONFLICT (k) DO UPDATE SET v = excluded.v, expires_at = excluded.expires_at, seq = excluded.seq`,
          )
          .run(key, value, Date.now() + Math.max(1, Math.floor(ttlMs))),
      );
      poller.wake();
    },
    async acquire(key, value, ttlMs, maxBytes) {
      return failing((db) =>
        db
          .transaction(() => {
            const now = Date.now();
            const held = db.prepare('SELECT substr(v, 1, ?) AS v FROM license_store WHERE k = ? AND expires_at > ?').get(maxBytes + 1, key, now) as
              | { v: string }
              | undefined;
            if (held !== undefined) return held.v;
            db.prepare(
              `INSERT INTO license_store (k, v, expires_at, seq) VALUES (?, ?, ?, ${NEXT_SEQ})
               ON CONFLICT (k) DO UPDATE SET v = excluded.v, expires_at = excluded.expires_at, seq = excluded.seq`,
            ).run(key, value, now + Math.max(1, Math.floor(ttlMs)));
            return null;
          })
          .immediate(),
      );
    },
    subscribe: (key, listener) => poller.subscribe(key, listener),
    close() {
      poller.close();
      db?.close();
      db = undefined;
    },
  };
}

// Entry point of panel-license-guard/sqlite: the release outbox store in one SQLite file (better-sqlite3 12).
export { type SqliteOutboxStoreOptions, sqliteOutboxStore } from './outbox/stores/sqlite/sqlite-store.js';

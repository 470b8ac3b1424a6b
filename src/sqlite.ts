// Entry point of panel-license-guard/sqlite: the release outbox store and the license store (one host) in SQLite files (better-sqlite3 12).

export { type SqliteLicenseStoreOptions, sqliteLicenseStore } from './license-store/sqlite/sqlite-license-store.js';
export { type SqliteOutboxStoreOptions, sqliteOutboxStore } from './outbox/stores/sqlite/sqlite-store.js';

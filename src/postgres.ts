// Entry point of panel-license-guard/postgres: the release outbox store and the license store (cluster mode) on PostgreSQL (node-postgres 8).

export { type PostgresLicenseStoreOptions, postgresLicenseStore } from './license-store/postgres/postgres-license-store.js';
export type { PgClient, PgPool, PgQueryable } from './outbox/stores/postgres/postgres-schema.js';
export { type PostgresOutboxStore, type PostgresOutboxStoreOptions, postgresOutboxStore } from './outbox/stores/postgres/postgres-store.js';

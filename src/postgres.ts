// Entry point of panel-license-guard/postgres: the release outbox store on PostgreSQL (node-postgres 8).
export type { PgPool, PgQueryable } from './outbox/postgres-schema.js';
export { type PostgresOutboxStoreOptions, postgresOutboxStore } from './outbox/postgres-store.js';

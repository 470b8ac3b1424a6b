// Entry point of panel-license-guard/mysql: the release outbox store and the license store (cluster mode) on MySQL 8 / MariaDB 10.6+ (mysql2).

export { type MysqlLicenseStoreOptions, mysqlLicenseStore } from './license-store/mysql/mysql-license-store.js';
export type { MysqlConnection, MysqlPool, MysqlQueryable } from './outbox/stores/mysql/mysql-schema.js';
export { type MysqlOutboxStore, type MysqlOutboxStoreOptions, mysqlOutboxStore } from './outbox/stores/mysql/mysql-store.js';

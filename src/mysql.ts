// Entry point of panel-license-guard/mysql: the release outbox store on MySQL 8 / MariaDB 10.6+ (mysql2).
export type { MysqlConnection, MysqlPool, MysqlQueryable } from './outbox/mysql-schema.js';
export { type MysqlOutboxStore, type MysqlOutboxStoreOptions, mysqlOutboxStore } from './outbox/mysql-store.js';

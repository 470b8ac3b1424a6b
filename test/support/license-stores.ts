// The license stores of cluster mode, each as a test opens one "process" of it (its own pool or
// client, as a separate instance would have), over one namespace shared by the instances of a test.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { createClient } from 'redis';
import type { LicenseStore } from '../../src/license-store/license-store.js';
import { mysqlLicenseStore } from '../../src/mysql.js';
import { postgresLicenseStore } from '../../src/postgres.js';
import { redisLicenseStore } from '../../src/redis.js';
import { sqliteLicenseStore } from '../../src/sqlite.js';
import { DATABASE_URL, MYSQL_URL, mysqlAnswers, postgresAnswers, REDIS_URL, redisAnswers, serviceAvailable } from './services.js';

/** One backend: opens instances of one namespace, and cleans up after the test file. */
export interface StoreBackend {
  name: string;
  available(): Promise<boolean>;
  /** A fresh namespace (prefix, table) for one test. */
  namespace(): string;
  /** An instance of the store on `namespace`, with its own connection(s); `via`: `host:port` of a proxy to the server. */
  open(namespace: string, via?: string): Promise<LicenseStore>;
  /** `host` and `port` of the server (what a proxy forwards to). */
  server(): { host: string; port: number };
  /** Closes every connection opened, drops what the tests created. */
  cleanup(): Promise<void>;
}

const SCHEMA = `test_license_${process.pid}`;

const serverOf = (url: string, port: number) => ({ host: new URL(url).hostname, port: Number(new URL(url).port || port) });
/** `url` with its host and port replaced by `via` (a proxy's). */
function through(url: string, via: string | undefined): string {
  if (via === undefined) return url;
  const changed = new URL(url);
  changed.host = via;
  return changed.toString();
}

function postgresBackend(): StoreBackend {
  const pools: pg.Pool[] = [];
  let tables = 0;
  return {
    name: 'PostgreSQL',
    available: async () => serviceAvailable('PostgreSQL', DATABASE_URL, await postgresAnswers()),
    namespace: () => `store_${++tables}_${randomBytes(3).toString('hex')}`,
    server: () => serverOf(DATABASE_URL, 5432),
    async open(table, via) {
      // A pool as an app has (a restart starts hundreds of panels at once); through a proxy that a
      // test cuts, connections give up after a second, so the outage shows at once.
      const pool = new pg.Pool({ connectionString: through(DATABASE_URL, via), max: 10, ...(via === undefined ? {} : { connectionTimeoutMillis: 1000 }) });
      // An outage test cuts the connections: the pool reports it on the idle ones.
      pool.on('error', () => {});
      pools.push(pool);
      return postgresLicenseStore({ pool, schema: SCHEMA, table });
    },
    async cleanup() {
      await Promise.all(pools.splice(0).map((pool) => pool.end()));
      const admin = new pg.Client({ connectionString: DATABASE_URL });
      await admin.connect();
      await admin.query(`DROP SCHEMA IF EXISTS "${SCHEMA}" CASCADE`);
      await admin.end();
    },
  };
}

function redisBackend(): StoreBackend {
  const clients: { close(): Promise<unknown> }[] = [];
  return {
    name: 'Redis',
    available: async () => serviceAvailable('Redis', REDIS_URL, await redisAnswers()),
    namespace: () => `test-license-${process.pid}-${randomBytes(4).toString('hex')}:`,
    server: () => serverOf(REDIS_URL, 6379),
    async open(prefix, via) {
      const client = createClient({ url: through(REDIS_URL, via) });
      client.on('error', () => {});
      await client.connect();
      clients.push({ close: () => client.close() });
      return redisLicenseStore({ client, prefix });
    },
    async cleanup() {
      await Promise.all(clients.splice(0).map((client) => client.close()));
    },
  };
}

function mysqlBackend(): StoreBackend {
  const pools: mysql.Pool[] = [];
  const tables: string[] = [];
  return {
    name: 'MySQL',
    available: async () => serviceAvailable('MySQL/MariaDB', MYSQL_URL, await mysqlAnswers()),
    namespace: () => {
      const table = `test_license_${process.pid}_${tables.length + 1}_${randomBytes(3).toString('hex')}`;
      tables.push(table);
      return table;
    },
    server: () => serverOf(MYSQL_URL, 3306),
    async open(table, via) {
      const pool = mysql.createPool({ uri: through(MYSQL_URL, via), connectionLimit: 10, ...(via === undefined ? {} : { connectTimeout: 1000 }) });
      pools.push(pool);
      return mysqlLicenseStore({ pool, table });
    },
    async cleanup() {
      await Promise.all(pools.splice(0).map((pool) => pool.end().catch(() => {})));
      const admin = await mysql.createConnection({ uri: MYSQL_URL });
      for (const table of tables.splice(0)) await admin.query(`DROP TABLE IF EXISTS \`${table}\`, \`${table}_migrations\``);
      await admin.end();
    },
  };
}

/** One file per test on this host; instances are separate connections to it (as node:cluster workers would be). */
function sqliteBackend(): StoreBackend {
  const folder = mkdtempSync(join(tmpdir(), 'plg-license-'));
  const stores: { close(): void }[] = [];
  let files = 0;
  return {
    name: 'SQLite',
    available: async () => true,
    namespace: () => join(folder, `license-${++files}.db`),
    // No server to cut: an outage is a file that cannot be written (see the test that skips it).
    server: () => ({ host: '', port: 0 }),
    async open(file) {
      const store = sqliteLicenseStore({ file });
      stores.push(store);
      return store;
    },
    async cleanup() {
      for (const store of stores.splice(0)) store.close();
      rmSync(folder, { recursive: true, force: true });
    },
  };
}

export const STORE_BACKENDS = { redis: redisBackend, postgres: postgresBackend, mysql: mysqlBackend, sqlite: sqliteBackend };

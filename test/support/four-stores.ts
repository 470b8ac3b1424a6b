// The four built-in stores for tests of the worker: a fresh store of each kind, on real servers,
// with what a test needs to make a second connection of its own (a proxy, another process).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll } from 'vitest';
import type { OutboxStore } from '../../src/outbox/store.js';
import { memoryOutboxStore } from '../../src/outbox/stores/memory/memory-store.js';
import { mysqlOutboxStore } from '../../src/outbox/stores/mysql/mysql-store.js';
import { postgresOutboxStore } from '../../src/outbox/stores/postgres/postgres-store.js';
import { sqliteOutboxStore } from '../../src/outbox/stores/sqlite/sqlite-store.js';
import { DATABASE_URL, MYSQL_URL, mysqlAnswers, postgresAnswers, serviceAvailable } from './services.js';

export type StoreKind = 'memory' | 'SQLite' | 'PostgreSQL' | 'MySQL';

/** A fresh store of one kind; `close()` closes it and whatever was opened for it. */
export interface TestStore {
  store: OutboxStore;
  close(): Promise<void>;
}

const dir = mkdtempSync(join(tmpdir(), 'outbox-four-'));
let made = 0;
const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
});

const havePostgres = serviceAvailable('PostgreSQL', DATABASE_URL, await postgresAnswers());
const haveMysql = serviceAvailable('MySQL/MariaDB', MYSQL_URL, await mysqlAnswers());

/** Where the servers listen, for a test that puts something between them and the store. */
export const SERVERS = {
  postgres: new URL(DATABASE_URL),
  mysql: new URL(MYSQL_URL),
};

/** What leases and due times are reckoned on: `'outbox'` for tests that pass times of their own. */
type LeaseClock = 'database' | 'outbox';

/** A PostgreSQL store on its own schema, through `url` (a proxy's, say) or straight to the server. */
export function postgresTestStore(url = DATABASE_URL, leaseClock: LeaseClock = 'database'): TestStore {
  const pool = new pg.Pool({ connectionString: url, max: 8 });
  // A connection cut by the test must not take the test process with it.
  pool.on('error', () => undefined);
  const schema = `test_four_${process.pid}_${++made}`;
  cleanups.push(async () => {
    const admin = new pg.Client({ connectionString: DATABASE_URL });
    await admin.connect();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).finally(() => admin.end());
  });
  const store = postgresOutboxStore({ pool, schema, leaseClock });
  return { store, close: () => Promise.resolve(store.close()).finally(() => pool.end()) };
}

/** A MySQL/MariaDB store on its own table, through `url` (a proxy's, say) or straight to the server. */
export function mysqlTestStore(url = MYSQL_URL, leaseClock: LeaseClock = 'database'): TestStore {
  const pool = mysql.createPool({ uri: url, connectionLimit: 8 });
  const table = `test_four_${process.pid}_${++made}`;
  cleanups.push(async () => {
    const admin = await mysql.createConnection({ uri: MYSQL_URL });
    await admin.query(`DROP TABLE IF EXISTS ${table}, ${table}_tracks, ${table}_migrations, ${table}_controls`).finally(() => admin.end());
  });
  const store = mysqlOutboxStore({ pool, table, leaseClock });
  return { store, close: () => Promise.resolve(store.close()).finally(() => pool.end()) };
}

/** The kinds this machine can run (PostgreSQL and MySQL only when their servers answer). */
type Make = (leaseClock?: LeaseClock) => TestStore;

export const STORE_KINDS: [StoreKind, Make][] = [
  [
    'memory',
    () => {
      const store = memoryOutboxStore();
      return { store, close: async () => store.close() };
    },
  ],
  [
    'SQLite',
    () => {
      const store = sqliteOutboxStore({ file: join(dir, `four-${++made}.db`) });
      return { store, close: async () => store.close() };
    },
  ],
  ...(havePostgres ? [['PostgreSQL', (clock) => postgresTestStore(DATABASE_URL, clock)] as [StoreKind, Make]] : []),
  ...(haveMysql ? [['MySQL', (clock) => mysqlTestStore(MYSQL_URL, clock)] as [StoreKind, Make]] : []),
];

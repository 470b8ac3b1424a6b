// One panel instance in cluster mode, as its own process: Express + licenseGuard on a store
// (Redis, PostgreSQL, MySQL or SQLite).
// Used by bench/cluster.js and test/cluster-processes.test.ts. Talks to its parent over IPC:
//   → { type: 'ready', port }, { type: 'check', at } per license call, { type: 'refreshed', state }
//   ← { type: 'refresh' }, { type: 'status' } (→ { type: 'status', status })
import express from 'express';
import { licenseGuard } from 'panel-license-guard';

const config = JSON.parse(process.env.CLUSTER_INSTANCE ?? '{}');
const send = (message) => process.send?.(message);

/** The store of `config.store` (`{ kind: 'postgres' | 'mysql' | 'sqlite', url | file }`), else Redis at `config.redisUrl`. */
async function openStore() {
  const kind = config.store?.kind ?? 'redis';
  if (kind === 'postgres') {
    const { default: pg } = await import('pg');
    const { postgresLicenseStore } = await import('panel-license-guard/postgres');
    return postgresLicenseStore({ pool: new pg.Pool({ connectionString: config.store.url, max: 3 }), table: config.prefix });
  }
  if (kind === 'mysql') {
    const { default: mysql } = await import('mysql2/promise');
    const { mysqlLicenseStore } = await import('panel-license-guard/mysql');
    return mysqlLicenseStore({ pool: mysql.createPool({ uri: config.store.url, connectionLimit: 3 }), table: config.prefix });
  }
  if (kind === 'sqlite') {
    const { sqliteLicenseStore } = await import('panel-license-guard/sqlite');
    return sqliteLicenseStore({ file: config.store.file });
  }
  const { createClient } = await import('redis');
  const { redisLicenseStore } = await import('panel-license-guard/redis');
  const redis = createClient({ url: config.redisUrl, socket: { reconnectStrategy: () => 100 } });
  redis.on('error', () => {});
  await redis.connect();
  return redisLicenseStore({ client: redis, prefix: config.prefix });
}
const store = await openStore();

const guard = licenseGuard({
  baseUrl: config.baseUrl,
  apiKey: config.apiKey,
  apiSecret: config.apiSecret,
  store,
  schedule: config.schedule,
  jitterMs: 0,
  syncIntervalMs: config.syncIntervalMs ?? 1000,
  retryBaseMs: 500,
  retryMaxMs: 1000,
  // Counts this instance's own calls to the mother, so the parent can see who checked.
  fetch: (url, init) => {
    if (String(url).endsWith('license.php')) send({ type: 'check', at: Date.now() });
    return fetch(url, init);
  },
});
guard.on('error', () => {});

const app = express();
app.use(guard);
app.get('/', (_req, res) => res.send(`dashboard of ${res.locals.branding.name}`));
await guard.start();
const server = app.listen(0, '127.0.0.1', () => send({ type: 'ready', port: server.address().port }));

process.on('message', async (message) => {
  if (message.type === 'refresh') send({ type: 'refreshed', state: await guard.refresh() });
  if (message.type === 'status') send({ type: 'status', status: guard.status() });
});
process.on('disconnect', () => process.exit(0));

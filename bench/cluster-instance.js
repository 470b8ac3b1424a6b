// One panel instance in cluster mode, as its own process: Express + licenseGuard on a Redis store.
// Used by bench/cluster.js and test/cluster-processes.test.ts. Talks to its parent over IPC:
//   → { type: 'ready', port }, { type: 'check', at } per license call, { type: 'refreshed', state }
//   ← { type: 'refresh' }, { type: 'status' } (→ { type: 'status', status })
import express from 'express';
import { licenseGuard } from 'panel-license-guard';
import { redisLicenseStore } from 'panel-license-guard/redis';
import { createClient } from 'redis';

const config = JSON.parse(process.env.CLUSTER_INSTANCE ?? '{}');
const send = (message) => process.send?.(message);

const redis = createClient({ url: config.redisUrl, socket: { reconnectStrategy: () => 100 } });
redis.on('error', () => {});
await redis.connect();

const guard = licenseGuard({
  baseUrl: config.baseUrl,
  apiKey: config.apiKey,
  apiSecret: config.apiSecret,
  store: redisLicenseStore({ client: redis, prefix: config.prefix }),
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

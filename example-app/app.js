// The example white-label panel: Express + EJS behind licenseGuard(), as a partner would build it.
import { fileURLToPath } from 'node:url';
import express from 'express';
import { createMotherClient, createReleaseOutbox, InvalidReleaseError, licenseGuard } from 'panel-license-guard';
import { registerMetrics } from 'panel-license-guard/metrics';
import { Registry } from 'prom-client';
import { followDeliveries } from './release-ids.js';

const here = (path) => fileURLToPath(new URL(path, import.meta.url));

/**
 * Builds the panel. Nothing starts until `start()`: tests and `start.js` decide when.

 * @param {{ baseUrl: string, apiKey: string, apiSecret: string, stateFile?: string, store?: import('panel-license-guard').LicenseStore, outboxFile?: string, appDbFile?: string, demoControls?: boolean, supportContact?: string, logger?: { warn(m: string): void, error(m: string): void } }} config
 */
export function createPanelApp(config) {
  const client = createMotherClient({ baseUrl: config.baseUrl, apiKey: config.apiKey, apiSecret: config.apiSecret });
  const guard = licenseGuard({
    client,
    // Health and operator endpoints answer while locked too.
    allow: ['/healthz', '/status', '/metrics'],
    apiPrefix: '/api',
    lockView: 'locked',
    // Artists see this, not the mother's reason (which is about the operator's account).
    publicMessage: ({ state }) =>
      state === 'pending' ? 'The panel is starting up. One moment, please.' : 'The panel is paused for now. Your tracks and data are safe.',
    supportContact: config.supportContact ?? 'support@panel.example',
    // One instance keeps its verdict in a file; several share it in a store (cluster mode).
    ...(config.store ? { store: config.store } : config.stateFile ? { stateFile: config.stateFile } : {}),
    ...(config.logger ? { logger: config.logger } : {}),
  });
  // 30, 14, 7, 3 and 1 days before the license expires (once each, also across restarts): the
  // place to e-mail the panel's owner. The pages show a banner from res.locals.license.
  guard.on('expiring', ({ daysLeft, expiresAt }) => (config.logger ?? console).warn(`panel license expires in ${daysLeft} day(s), on ${expiresAt}: renew it`));
  // Uploads are stored durably before the artist sees "queued"; a background worker delivers them.
  const outbox = createReleaseOutbox({ client, file: config.outboxFile ?? ':memory:', ...(config.logger ? { logger: config.logger } : {}) });
  // The mother's release_id written back onto the app's own rows from the delivery feed (release-ids.js).
  const releaseIds = followDeliveries({ outbox, file: config.appDbFile ?? ':memory:' });

  const app = express();
  app.disable('x-powered-by');
  app.set('views', here('./views'));
  app.set('view engine', 'ejs');

  // Mounted before the guard, so served while locked too (the lock view and the logo need them);
  // fallthrough: false makes a miss a 404 instead of passing the request on to protected routes.
  app.use('/static', express.static(here('./public'), { maxAge: '1h', fallthrough: false }));
  app.get('/healthz', (_req, res) => {
    // `instance` shows which process answered when several serve the port (cluster mode).
    res.json({ ok: true, instance: process.pid, license: guard.status() });
  });

  if (config.demoControls) {
    // Demo only: lets `npm start` users apply a flipped license at once instead of waiting for
    // the schedule. refresh() shares an in-flight check, so this cannot stack requests.
    app.post('/healthz/refresh', async (_req, res) => {
      res.json({ ok: true, state: await guard.refresh() });
    });
  }

  app.use(guard);
  // For load balancers and operators: 200 while serving (active, grace), 503 while locked or pending.
  app.get('/status', guard.statusHandler({ outbox }));
  // Prometheus scrapes this (one registry per app, so several apps can share a process in tests).
  const registry = new Registry();
  registerMetrics({ registry, guard, outbox });
  app.get('/metrics', async (_req, res, next) => {
    try {
      res.type(registry.contentType).send(await registry.metrics());
    } catch (error) {
      next(error);
    }
  });
  app.use(express.urlencoded({ extended: false, limit: '32kb' }));

  app.get('/', async (_req, res, next) => {
    try {
      const rows = await outbox.list({ limit: 1000 });
      const uploads = rows.slice(-20).reverse();
      res.render('dashboard', { uploads, stats: await outbox.stats() });
    } catch (error) {
      next(error);
    }
  });
  app.get('/upload', (_req, res) => {
    res.render('upload', { error: null, values: {} });
  });
  app.post('/upload', async (req, res, next) => {
    // Only known, non-empty fields go into the release; validation names the bad one.
    const fields = ['title', 'primary_artist', 'album', 'genre', 'language', 'isrc', 'release_date', 'remote_track_id'];
    const release = Object.fromEntries(fields.filter((f) => typeof req.body[f] === 'string' && req.body[f].trim() !== '').map((f) => [f, req.body[f].trim()]));
    try {
      await outbox.enqueue(release);
      res.redirect(303, '/');
    } catch (error) {
      if (error instanceof InvalidReleaseError) {
        res.status(422).render('upload', { error: error.message, values: release });
        return;
      }
      next(error);
    }
  });
  app.get('/api/tracks', (_req, res) => {
    res.json({ tracks: releaseIds.tracks() });
  });
  app.get('/api/status', (_req, res) => {
    res.json({ ok: true, branding: res.locals.branding, license: res.locals.license });
  });

  return {
    app,
    guard,
    client,
    outbox,
    releaseIds,
    start: () => guard.start(),
    close: async () => {
      await guard.close();
      await releaseIds.close();
      await outbox.close();
    },
  };
}

// Multi-panel mode of the example (`npm start -- --panels`): one deployment serving three demo
// panels, each chosen by its host (beats.localhost, labelx.localhost, acme.localhost), and one
// outbox delivering every panel's uploads under that panel's own key.
import { fileURLToPath } from 'node:url';
import express from 'express';
import { createReleaseOutbox, InvalidReleaseError, licenseGuard } from 'panel-license-guard';

const here = (path) => fileURLToPath(new URL(path, import.meta.url));

/** Host → the panel the emulator knows: in a real deployment, rows of your tenants table. */
export const DEMO_TENANTS = {
  'beats.localhost': {
    id: 'tenant-beats',
    apiKey: 'demo_beats_key',
    apiSecret: 'demo_beats_secret_change_me',
    panel: { name: 'Beats Distribution', brand_color: '#db2777' },
  },
  'labelx.localhost': {
    id: 'tenant-labelx',
    apiKey: 'demo_labelx_key',
    apiSecret: 'demo_labelx_secret_change_me',
    panel: { name: 'Label X', brand_color: '#0891b2' },
  },
  'acme.localhost': {
    id: 'tenant-acme',
    apiKey: 'demo_acme_key',
    apiSecret: 'demo_acme_secret_change_me',
    panel: { name: 'Acme Music', brand_color: '#65a30d' },
  },
};

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const escapeXml = (text) => String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);

/** A square logo: the panel's initial on its brand colour (demo data, escaped all the same). */
function demoLogo({ name, brand_color: color }) {
  const fill = /^#[0-9a-f]{6}$/i.test(color) ? color : '#4b5563';
  return `<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64" viewBox="0 0 64 64"><rect width="64" height="64" rx="14" fill="${fill}"/><text x="32" y="43" font-family="sans-serif" font-size="30" font-weight="700" fill="#fff" text-anchor="middle">${escapeXml(name.slice(0, 1))}</text></svg>`;
}

const UPLOAD_FIELDS = ['title', 'primary_artist', 'album', 'genre', 'language', 'isrc', 'release_date', 'remote_track_id'];

/**
 * @param {{ baseUrl: string, outboxFile?: string, tenants?: typeof DEMO_TENANTS, logger?: { warn(m: string): void, error(m: string): void } }} config
 */
export function createPanelsApp(config) {
  const tenants = config.tenants ?? DEMO_TENANTS;
  const byId = new Map(Object.values(tenants).map((tenant) => [tenant.id, tenant]));
  const logger = config.logger ? { logger: config.logger } : {};
  const guard = licenseGuard({
    baseUrl: config.baseUrl,
    // Called once per host (then cached): the credentials, and your id of the panel (res.locals.panel).
    panels: {
      resolve: async (host) => {
        const tenant = tenants[host];
        return tenant ? { apiKey: tenant.apiKey, apiSecret: tenant.apiSecret, panel: tenant.id } : null;
      },
    },
    allow: ['/healthz'],
    apiPrefix: '/api',
    lockView: 'locked',
    publicMessage: 'The panel is paused for now. Your tracks and data are safe.',
    supportContact: 'support@panel.example',
    ...logger,
  });
  // One outbox for every panel: each release goes out with its own panel's key, whichever
  // instance delivers it (the rows say whose they are).
  const outbox = createReleaseOutbox({
    file: config.outboxFile ?? ':memory:',
    baseUrl: config.baseUrl,
    panels: {
      resolve: async (id) => {
        const tenant = byId.get(id);
        return tenant ? { apiKey: tenant.apiKey, apiSecret: tenant.apiSecret } : null;
      },
    },
    ...logger,
  });
  const app = express();
  app.disable('x-powered-by');
  app.set('views', here('./views'));
  app.set('view engine', 'ejs');
  app.use('/static', express.static(here('./public'), { maxAge: '1h', fallthrough: false }));
  // Each demo panel's logo (its initial on its colour), before the guard: served while locked too.
  app.get('/logo/:tenant.svg', (req, res) => {
    const tenant = byId.get(req.params.tenant);
    if (!tenant) return res.sendStatus(404);
    res.type('image/svg+xml').set('Cache-Control', 'public, max-age=3600').send(demoLogo(tenant.panel));
  });
  // Demo only: check the panel of this host now instead of at its next scheduled check.
  app.post('/healthz/refresh', async (req, res) => {
    res.json({ ok: true, host: req.hostname, state: await guard.refresh(req.hostname) });
  });
  app.use(guard);
  app.use(express.urlencoded({ extended: false, limit: '32kb' }));
  app.get('/healthz', (req, res) => {
    res.json({ ok: true, host: req.hostname, license: guard.status(req.hostname) ?? null });
  });
  app.get('/api/status', (_req, res) => {
    res.json({ ok: true, panel: res.locals.panel, branding: res.locals.branding, license: res.locals.license });
  });
  app.get('/', async (req, res, next) => {
    try {
      const uploads = (await outbox.list({ panel: res.locals.panel, limit: 20 })).reverse();
      res.render('tenant', { host: req.hostname, uploads });
    } catch (error) {
      next(error);
    }
  });
  app.get('/upload', (_req, res) => {
    res.render('upload', { error: null, values: {} });
  });
  app.post('/upload', async (req, res, next) => {
    const release = Object.fromEntries(
      UPLOAD_FIELDS.filter((f) => typeof req.body[f] === 'string' && req.body[f].trim() !== '').map((f) => [f, req.body[f].trim()]),
    );
    try {
      // The guard already knows this request's panel: no second lookup.
      await outbox.enqueue(release, { panel: res.locals.panel });
      res.redirect(303, '/');
    } catch (error) {
      if (error instanceof InvalidReleaseError) {
        res.status(422).render('upload', { error: error.message, values: release });
        return;
      }
      next(error);
    }
  });
  return {
    app,
    guard,
    outbox,
    close: async () => {
      await guard.close();
      await outbox.close();
    },
  };
}

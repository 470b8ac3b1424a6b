// Multi-panel mode of the example (`npm start -- --panels`): one deployment serving three demo
// panels, each chosen by its host (beats.localhost, labelx.localhost, acme.localhost).
import { fileURLToPath } from 'node:url';
import express from 'express';
import { licenseGuard } from 'panel-license-guard';

const here = (path) => fileURLToPath(new URL(path, import.meta.url));

/** Host → the panel the emulator knows: in a real deployment, a lookup in your tenants table. */
export const DEMO_TENANTS = {
  'beats.localhost': { apiKey: 'demo_beats_key', apiSecret: 'demo_beats_secret_change_me', panel: { name: 'Beats Distribution', brand_color: '#db2777' } },
  'labelx.localhost': { apiKey: 'demo_labelx_key', apiSecret: 'demo_labelx_secret_change_me', panel: { name: 'Label X', brand_color: '#0891b2' } },
  'acme.localhost': { apiKey: 'demo_acme_key', apiSecret: 'demo_acme_secret_change_me', panel: { name: 'Acme Music', brand_color: '#65a30d' } },
};

/**
 * @param {{ baseUrl: string, tenants?: Record<string, { apiKey: string, apiSecret: string }>, logger?: { warn(m: string): void, error(m: string): void } }} config
 */
export function createPanelsApp(config) {
  const tenants = config.tenants ?? DEMO_TENANTS;
  const guard = licenseGuard({
    baseUrl: config.baseUrl,
    // Called once per host (then cached): only the credentials, never the panel's other data.
    panels: { resolve: async (host) => (tenants[host] ? { apiKey: tenants[host].apiKey, apiSecret: tenants[host].apiSecret } : null) },
    allow: ['/healthz'],
    apiPrefix: '/api',
    lockView: 'locked',
    publicMessage: 'The panel is paused for now. Your tracks and data are safe.',
    supportContact: 'support@panel.example',
    ...(config.logger ? { logger: config.logger } : {}),
  });
  const app = express();
  app.disable('x-powered-by');
  app.set('views', here('./views'));
  app.set('view engine', 'ejs');
  app.use('/static', express.static(here('./public'), { maxAge: '1h', fallthrough: false }));
  // Demo only: check the panel of this host now instead of at its next scheduled check.
  app.post('/healthz/refresh', async (req, res) => {
    res.json({ ok: true, host: req.hostname, state: await guard.refresh(req.hostname) });
  });
  app.use(guard);
  app.get('/healthz', (req, res) => {
    res.json({ ok: true, host: req.hostname, license: guard.status(req.hostname) ?? null });
  });
  app.get('/api/status', (_req, res) => {
    res.json({ ok: true, branding: res.locals.branding, license: res.locals.license });
  });
  app.get('/', (req, res) => {
    res.render('tenant', { host: req.hostname });
  });
  return { app, guard, close: () => guard.close() };
}

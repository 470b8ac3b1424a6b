// A deployment for the console tests: three panels by host (one active, one locked by the mother,
// one in grace because its mother is down), an outbox with a dead release whose title is an XSS
// payload, and the console mounted at /ops/license for requests carrying `x-operator: yes`.
import type { Server } from 'node:http';
import express from 'express';
import { type LicenseConsole, licenseConsole } from '../../src/console.js';
import { createReleaseOutbox, type LicenseGuard, licenseGuard, memoryOutboxStore, type ReleaseOutbox } from '../../src/index.js';
import type { MotherEmulator } from '../../src/testing.js';
import { silentLogger } from './guard-app.js';
import { clientFor, startEmulator, waitFor } from './helpers.js';

export const XSS = `<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>`;
const PANELS = {
  'beats.example': { apiKey: 'pk_beats', apiSecret: 'sk_beats_0123456789' },
  'labelx.example': { apiKey: 'pk_labelx', apiSecret: 'sk_labelx_0123456789' },
  'acme.example': { apiKey: 'pk_acme', apiSecret: 'sk_acme_0123456789' },
} as const;

export interface ConsoleDeployment {
  app: express.Express;
  guard: LicenseGuard;
  outbox: ReleaseOutbox;
  console: LicenseConsole;
  mother: MotherEmulator;
  deadId: number;
  close(): Promise<void>;
  listen(): Promise<{ origin: string; server: Server }>;
}

export async function consoleDeployment(): Promise<ConsoleDeployment> {
  const mother = await startEmulator([
    {
      apiKey: 'pk_beats',
      apiSecret: PANELS['beats.example'].apiSecret,
      active: true,
      panel: { name: 'Beats', custom_domain: 'beats.example', subdomain: 'beats' },
    },
    {
      apiKey: 'pk_labelx',
      apiSecret: PANELS['labelx.example'].apiSecret,
      active: false,
      reason: 'Unpaid invoice',
      panel: { name: 'Label X', custom_domain: 'labelx.example', subdomain: 'labelx' },
    },
    { apiKey: 'pk_test_panel', apiSecret: 'sk_test_0123456789abcdef', active: true },
  ]);
  // acme's mother goes down after its first check: acme is in grace.
  const acmeMother = await startEmulator([
    { apiKey: 'pk_acme', apiSecret: PANELS['acme.example'].apiSecret, active: true, panel: { name: XSS, custom_domain: 'acme.example', subdomain: 'acme' } },
  ]);
  const guard = licenseGuard({
    baseUrl: mother.url,
    logger: silentLogger,
    domains: 'enforce',
    subdomainBase: 'panels.example',
    panels: {
      resolve: async (host) => {
        const credentials = PANELS[host as keyof typeof PANELS];
        return credentials ? { ...credentials, ...(host === 'acme.example' ? { baseUrl: acmeMother.url } : {}) } : null;
      },
    },
  });
  const outbox = createReleaseOutbox({ client: clientFor(mother), store: memoryOutboxStore(), pollIntervalMs: 50, logger: silentLogger });
  mother.setFaults({ endpoint: 'release.php', status: 422 });
  const { id: deadId } = await outbox.enqueue({ title: XSS, primary_artist: 'Ada', remote_track_id: 'xss-track' });
  await waitFor(async () => (await outbox.stats()).dead === 1, 'the refused release dead');
  mother.setFaults({});
  const ops = licenseConsole({ guard, outbox, authorize: (req) => req.get('x-operator') === 'yes' || req.get('cookie')?.includes('operator=yes') === true });
  const app = express();
  // Mounted before the guard: the console stays reachable whatever a panel's license says.
  app.use('/ops/license', ops);
  app.use(guard);
  app.get('/', (_req, res) => {
    res.send('home');
  });
  const hit = (host: string) => fetchThrough(app, host);
  for (const host of Object.keys(PANELS)) await hit(host);
  acmeMother.setFaults({ down: true });
  await guard.refresh('acme.example');
  let server: Server | undefined;
  return {
    app,
    guard,
    outbox,
    console: ops,
    mother,
    deadId,
    async listen() {
      server = app.listen(0, '127.0.0.1');
      await new Promise((resolve) => server?.once('listening', resolve));
      return { origin: `http://127.0.0.1:${(server.address() as { port: number }).port}`, server };
    },
    async close() {
      ops.close();
      await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
      await outbox.close();
      await guard.close();
      await mother.close();
      await acmeMother.close();
    },
  };
}

/** One request through the app for `host`, so the guard takes the panel in. */
async function fetchThrough(app: express.Express, host: string): Promise<void> {
  const { default: request } = await import('supertest');
  await request(app).get('/').set('Host', host);
}

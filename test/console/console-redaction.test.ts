// A mother that echoes the panel's key and secret in what it says (a reason, a refusal): neither
// reaches a console page, the lock page, the status or an error — one redaction, in the client.
import type { Server } from 'node:http';
import express from 'express';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { licenseConsole } from '../../src/console.js';
import { createMotherClient, createReleaseOutbox, licenseGuard, memoryOutboxStore } from '../../src/index.js';
import { silentLogger } from '../support/guard-app.js';
import { waitFor } from '../support/helpers.js';

const KEY = 'pk_echoed_key_42';
const SECRET = 'sk_echoed_secret_0123456789';
// Each credential also hidden behind a zero-width space, as a mother's template might leave it.
const ECHO = `key ${KEY} secret ${SECRET} again ${SECRET.replace('echoed', 'ech\u200boed')} and ${KEY.replace('_', '\u200b_')}`;

let server: Server;
let base: string;
beforeAll(async () => {
  const mother = express();
  mother.post('/license.php', (_req, res) => {
    res.json({
      ok: true,
      active: false,
      reason: `Suspended: ${ECHO}`,
      panel: { name: `Panel of ${KEY}`, status: `blocked ${SECRET}`, expires_at: '2030-01-01', brand_logo_url: `https://cdn.example/${KEY}.png` },
      server_time: Math.floor(Date.now() / 1000),
    });
  });
  // The same credentials in other spellings, that what shows a field would turn back into them:
  // a percent-encoded logo host (a URL parser decodes and lower-cases it), upper case, a tab.
  const percent = (text: string) => [...text].map((char) => `%${char.charCodeAt(0).toString(16)}`).join('');
  const spelledSecret = 'sklivessecret0123456789';
  mother.post('/spelled/license.php', (_req, res) => {
    res.json({
      ok: true,
      active: false,
      reason: `Suspended: ${spelledSecret.toUpperCase()}`,
      panel: {
        name: `Panel ${KEY.toUpperCase()}`,
        subdomain: ` ${spelledSecret.toUpperCase()} `,
        // A stray % (decodeURIComponent gives up on it; the URL parser does not), and the secret's
        // "ss" written as ẞ, which the URL parser's host mapping turns back into "ss".
        brand_logo_url: `https://${percent(spelledSecret)}.cdn.example/logo.png?%`,
        custom_domain: `${spelledSecret.replace('ss', 'ẞ')}.example`,
      },
      server_time: Math.floor(Date.now() / 1000),
    });
  });
  mother.post('/release.php', (_req, res) => {
    res.status(422).json({ ok: false, error: `Refused for ${ECHO}` });
  });
  server = mother.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

const leaks = (text: string) => [KEY, SECRET, 'echoed_secret', 'echoed_key'].filter((secret) => text.replaceAll('\u200b', '').includes(secret));

describe('licenseConsole() with a mother that echoes the credentials', () => {
  it('shows the reason, the panel record and a release’s last error with the key and secret cut out', async () => {
    const guard = licenseGuard({ baseUrl: base, apiKey: KEY, apiSecret: SECRET, logger: silentLogger });
    const errors: string[] = [];
    const outbox = createReleaseOutbox({
      client: createMotherClient({ baseUrl: base, apiKey: KEY, apiSecret: SECRET }),
      store: memoryOutboxStore(),
      pollIntervalMs: 20,
      logger: { warn: (message: string) => errors.push(message), error: (message: string) => errors.push(message) },
    });
    outbox.on('dead', ({ error }) => errors.push(String(error)));
    try {
      await guard.start();
      const { id } = await outbox.enqueue({ title: 'Echo', remote_track_id: 'echo-1' });
      await waitFor(async () => (await outbox.stats()).dead === 1, 'the refused release dead');
      const app = express();
      app.use('/ops', licenseConsole({ guard, outbox, authorize: () => true }));
      app.use(guard);
      app.get('/', (_req, res) => res.send('home'));

      const panels = await request(app).get('/ops/').expect(200);
      const panelPath = /href="\/ops(\/panels\/[^"]+)"/.exec(panels.text)?.[1] as string;
      const panel = await request(app).get(`/ops${panelPath}`).expect(200);
      expect(panel.text).toContain('Suspended: key [api key] secret [api secret] again [api secret] and [api key]');
      const dead = await request(app).get('/ops/releases?state=dead').expect(200);
      const release = await request(app).get(`/ops/releases/${id}`).expect(200);
      expect(release.text).toContain('Refused for key [api key] secret [api secret]');
      const lockPage = await request(app).get('/').set('Accept', 'text/html').expect(503);
      const lockJson = await request(app).get('/').set('Accept', 'application/json').expect(503);
      const status = JSON.stringify(guard.status());
      for (const text of [panels.text, panel.text, dead.text, release.text, lockPage.text, lockJson.text, status, ...errors])
        expect(leaks(text), text.slice(0, 300)).toEqual([]);
      expect(guard.status().reason).toMatch(/^Suspended: key \[api key\]/);
    } finally {
      await outbox.close();
      await guard.close();
    }
  });

  it('drops a field that holds a credential in another spelling (case, percent-encoding, a tab), on the lock page too', async () => {
    const secret = 'sklivessecret0123456789';
    const guard = licenseGuard({ baseUrl: `${base}/spelled`, apiKey: KEY, apiSecret: secret, logger: silentLogger });
    try {
      await guard.start();
      const app = express();
      app.use('/ops', licenseConsole({ guard, authorize: () => true }));
      app.use(guard);
      const panels = await request(app).get('/ops/').expect(200);
      const panel = await request(app)
        .get(`/ops${/href="\/ops(\/panels\/[^"]+)"/.exec(panels.text)?.[1]}`)
        .expect(200);
      const lockPage = await request(app).get('/').set('Accept', 'text/html').expect(503);
      const shown = [panels.text, panel.text, lockPage.text, JSON.stringify(lockPage.headers), JSON.stringify(guard.status())].join('\n').toLowerCase();
      expect(shown).not.toContain(secret);
      expect(shown).not.toContain(KEY);
      expect(panel.text).toContain('[redacted]');
    } finally {
      await guard.close();
    }
  });
});

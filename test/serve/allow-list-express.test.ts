import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LicenseGuard, licenseGuard } from '../../src/index.js';
import type { MotherEmulator } from '../../src/testing.js';
import { EXPRESS_VERSIONS, type ExpressFactory, silentLogger } from '../support/guard-app.js';
import { API_KEY, API_SECRET, startEmulator } from '../support/helpers.js';

/** Every way to spell `prefix` with one or more of its letters percent-encoded, once or twice. */
function encodedSpellings(prefix: string): string[] {
  const spellings = new Set<string>();
  const chars = [...prefix];
  const hex = (c: string) => (c.codePointAt(0) ?? 0).toString(16).padStart(2, '0');
  for (const [i, c] of chars.entries()) {
    if (c === '/') continue;
    const h = hex(c);
    for (const form of [`%${h}`, `%${h.toUpperCase()}`, `%${h[0]}${(h[1] ?? '').toUpperCase()}`, `%25${h}`, `%25${h.toUpperCase()}`]) {
      spellings.add([...chars.slice(0, i), form, ...chars.slice(i + 1)].join(''));
    }
  }
  spellings.add(chars.map((c) => (c === '/' ? c : `%${hex(c)}`)).join(''));
  spellings.add(chars.map((c) => (c === '/' ? c : `%${hex(c).toUpperCase()}`)).join(''));
  return [...spellings];
}

/** An app shaped like the ones the bypass reached: parameter routes and a catch-all behind the guard. */
function panelApp(express: ExpressFactory, guard: LicenseGuard) {
  const app = express() as unknown as ReturnType<(typeof EXPRESS_VERSIONS)[0][1]>;
  // The recommended mount: a miss under /static is a 404 here, never passed on to later routes.
  app.use('/static', (express as typeof import('express')).static(resolve(import.meta.dirname, '../fixtures/public'), { fallthrough: false }));
  app.use(guard);
  app.get('/healthz', (_req, res) => {
    res.send('HEALTHY');
  });
  app.get('/:lang/dashboard', (req, res) => {
    res.send(`PROTECTED dashboard (lang=${String(req.params.lang)})`);
  });
  app.post('/:section/admin/users/:id/delete', (_req, res) => {
    res.send('PROTECTED delete');
  });
  app.use((_req, res) => {
    res.send('PROTECTED app shell');
  });
  return app;
}

function send(port: number, method: string, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolvePromise, reject) => {
    // http.request sends the path as written: no normalization or decoding on the client side.
    const req = http.request({ host: '127.0.0.1', port, method, path, headers: { accept: 'application/json' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => resolvePromise({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const SUFFIXES = ['/dashboard', '/admin/users/42/delete', '/x/y/z', '', '/', '/app.css'];

describe.each(EXPRESS_VERSIONS)('the allow list behind %s', (_name, express) => {
  let emulator: MotherEmulator;
  beforeAll(async () => {
    emulator = await startEmulator([{ apiKey: API_KEY, apiSecret: API_SECRET, active: false, reason: 'Invoice overdue', panel: { name: 'P' } }]);
  });
  afterAll(async () => {
    await emulator.close();
  });

  for (const state of ['locked', 'pending'] as const) {
    it(`lets no encoded spelling of an allowed prefix reach a protected route (${state})`, async () => {
      const guard = licenseGuard({
        baseUrl: state === 'locked' ? emulator.url : 'http://127.0.0.1:9/api/partner',
        apiKey: API_KEY,
        apiSecret: API_SECRET,
        allow: ['/healthz', '/static/*'],
        startupTimeoutMs: 0,
        timeoutMs: 1000,
        logger: silentLogger,
      });
      await guard.start();
      expect(guard.state).toBe(state);
      const server = panelApp(express, guard).listen(0, '127.0.0.1');
      await new Promise((r) => server.once('listening', r));
      const { port } = server.address() as AddressInfo;
      try {
        const reached: string[] = [];
        let tried = 0;
        for (const prefix of ['/healthz', '/static']) {
          // The plain spelling too: `/healthz` must not open `/healthz/dashboard` (a `/:section/dashboard` route).
          for (const spelling of [prefix, ...encodedSpellings(prefix)]) {
            for (const suffix of SUFFIXES) {
              for (const method of ['GET', 'POST']) {
                tried++;
                const { status, body } = await send(port, method, `${spelling}${suffix}`);
                const served = spelling === prefix ? body.includes('PROTECTED') : body.includes('PROTECTED') || status < 400;
                if (served) reached.push(`${method} ${spelling}${suffix} → ${status} ${body.slice(0, 40)}`);
              }
            }
          }
        }
        expect(tried).toBeGreaterThan(300);
        expect(reached).toEqual([]);
        // The real prefixes still work.
        expect(await send(port, 'GET', '/healthz')).toMatchObject({ status: 200, body: 'HEALTHY' });
        expect((await send(port, 'GET', '/static/app.css')).status).toBe(200);
      } finally {
        guard.close();
        await new Promise((r) => server.close(r));
      }
    });
  }
});

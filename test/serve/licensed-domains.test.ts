import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { licenseGuard } from '../../src/index.js';
import { canonicalHost } from '../../src/serve/request-host.js';
import type { MotherEmulator } from '../../src/testing.js';
import { EXPRESS_VERSIONS, type GuardedApp, guardedApp } from '../support/guard-app.js';
import { API_KEY, API_SECRET, DEMO_PANEL, startEmulator } from '../support/helpers.js';

// The demo panel is licensed for panel.example (custom_domain) and demo.<subdomainBase>.
let emulator: MotherEmulator;
beforeAll(async () => {
  emulator = await startEmulator([{ ...DEMO_PANEL, panel: { ...DEMO_PANEL.panel, custom_domain: 'panel.example', subdomain: 'demo' } }]);
});
afterAll(() => emulator.close());

const opened: GuardedApp[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map(({ guard }) => guard.close()));
  emulator.setPanel(API_KEY, { active: true, reason: null });
});

describe('canonicalHost()', () => {
  it('gives one spelling per host and refuses what is not a host', () => {
    expect(canonicalHost('Panel.EXAMPLE.')).toBe('panel.example');
    expect(canonicalHost('127.0.0.1')).toBe('127.0.0.1');
    expect(canonicalHost('[::1]')).toBe('[::1]');
    expect(canonicalHost('[2001:DB8::1]')).toBe('[2001:db8::1]');
    expect(canonicalHost(`${'a'.repeat(63)}.`.repeat(5))).toBeUndefined();
    for (const bad of ['', 'a b', 'panel.example:8080', 'under_score.example', 'panel..example', '-x.example', '1.2.3', 'evil.example/x', undefined])
      expect(canonicalHost(bad)).toBeUndefined();
  });
});

describe.each(EXPRESS_VERSIONS)('licensed domains on %s', (_name, express) => {
  async function started(options: Parameters<typeof guardedApp>[2]) {
    const guarded = guardedApp(express, emulator, options);
    opened.push(guarded);
    await guarded.guard.start();
    return guarded;
  }

  it("'enforce' serves the licensed hosts in any spelling and answers 421 elsewhere", async () => {
    const { app } = await started({ domains: 'enforce', subdomainBase: 'Mother-Panels.com', allowHosts: ['localhost'] });
    for (const host of ['panel.example', 'PANEL.Example.', 'panel.example:8443', 'demo.mother-panels.com', 'localhost:3000'])
      await request(app).get('/dashboard').set('Host', host).expect(200);
    const page = await request(app).get('/dashboard').set('Host', 'copied-panel.example').expect(421);
    expect(page.type).toBe('text/html');
    expect(page.text).toContain('This panel is not served at this address.');
    expect(page.text).toContain('href="https://panel.example/"');
    expect(page.text).not.toContain('copied-panel');
    const api = await request(app).get('/api/data').set('Host', 'copied-panel.example').set('Accept', 'application/json').expect(421);
    expect(api.body).toEqual({ ok: false, error: 'MISDIRECTED', message: 'This panel is not served at this address.' });
    // A malformed Host never matches, and the allow list still applies on any host.
    await request(app).get('/dashboard').set('Host', 'panel.example@evil.example').expect(421);
    await request(app).get('/healthz').set('Host', 'copied-panel.example').expect(200);
    await request(app).head('/dashboard').set('Host', 'copied-panel.example').expect(421);
  });

  it("'redirect' sends browsers to the licensed host with the same path and query, and others get 421", async () => {
    const { app } = await started({ domains: 'redirect' });
    const moved = await request(app).get('/tracks/7?tab=stats&x=%2F').set('Host', 'old-name.example').expect(308);
    expect(moved.headers.location).toBe('http://panel.example/tracks/7?tab=stats&x=%2F');
    // A path that looks like another host still lands on the licensed one.
    expect((await request(app).get('//evil.example/x').set('Host', 'old-name.example').expect(308)).headers.location).toBe(
      'http://panel.example//evil.example/x',
    );
    await request(app).post('/dashboard').set('Host', 'old-name.example').expect(421);
    await request(app).get('/api/data').set('Host', 'old-name.example').expect(421);
    await request(app).get('/dashboard').set('Host', 'panel.example').expect(200);
  });

  it('takes X-Forwarded-Host only when `trust proxy` trusts the peer', async () => {
    const plain = await started({ domains: 'enforce' });
    await request(plain.app).get('/dashboard').set('Host', 'internal:3000').set('X-Forwarded-Host', 'panel.example').expect(421);
    const proxied = await started({ domains: 'enforce' });
    proxied.app.set('trust proxy', 'loopback');
    await request(proxied.app).get('/dashboard').set('Host', 'internal:3000').set('X-Forwarded-Host', 'panel.example').expect(200);
    await request(proxied.app).get('/dashboard').set('Host', 'panel.example').set('X-Forwarded-Host', 'copied.example').expect(421);
  });

  it('redirects only to http or https on the licensed host, whatever a trusted proxy says the scheme was', async () => {
    const { app } = await started({ domains: 'redirect' });
    app.set('trust proxy', 'loopback');
    for (const proto of ['https://evil.example/#', '//evil.example/?', 'https'])
      expect((await request(app).get('/a').set('Host', 'old.example').set('X-Forwarded-Proto', proto).expect(308)).headers.location).toBe(
        'https://panel.example/a',
      );
  });

  it('shows the lock page, not 421, when the license is locked', async () => {
    emulator.setPanel(API_KEY, { active: false, reason: 'Unpaid' });
    const { app } = await started({ domains: 'enforce' });
    await request(app).get('/dashboard').set('Host', 'copied-panel.example').expect(503);
  });

  it('serves every host, and says so once, when the license names no domain it can check', async () => {
    const logger = { warn: vi.fn(), error: vi.fn() };
    emulator.setPanel(API_KEY, { panel: { ...DEMO_PANEL.panel, custom_domain: null, subdomain: 'demo' } });
    try {
      const { app } = await started({ domains: 'enforce', logger });
      await request(app).get('/dashboard').set('Host', 'anything.example').expect(200);
      await request(app).get('/dashboard').set('Host', 'other.example').expect(200);
      expect(logger.warn).toHaveBeenCalledTimes(1);
      expect(logger.warn.mock.calls[0]?.[0]).toMatch(/no custom_domain, and no `subdomainBase` for its subdomain/);
    } finally {
      emulator.setPanel(API_KEY, { panel: { ...DEMO_PANEL.panel, custom_domain: 'panel.example', subdomain: 'demo' } });
    }
  });
});

describe('licenseGuard() domain options', () => {
  it('names each bad option and its fix', () => {
    const base = { baseUrl: 'http://127.0.0.1:1/api', apiKey: API_KEY, apiSecret: API_SECRET };
    expect(() => licenseGuard({ ...base, domains: 'strict' as never })).toThrow(/`domains` must be 'off', 'enforce' or 'redirect'/);
    expect(() => licenseGuard({ ...base, domains: 'enforce', subdomainBase: 'https://mother.example' })).toThrow(/`subdomainBase` must be a host name/);
    expect(() => licenseGuard({ ...base, domains: 'enforce', allowHosts: ['localhost:3000'] })).toThrow(/`allowHosts` holds "localhost:3000"/);
    expect(() => licenseGuard({ ...base, allowHosts: ['localhost'] })).toThrow(/`domains` is 'off', so `subdomainBase` and `allowHosts` do nothing/);
  });
});

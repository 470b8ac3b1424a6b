import { existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ChangeEvent, LicenseGuard } from '../../src/index.js';
import type { MotherEmulator } from '../../src/testing.js';
import { EXPRESS_VERSIONS, type GuardedApp, guardedApp } from '../support/guard-app.js';
import { API_KEY, API_SECRET, DEMO_PANEL, sleep, startEmulator, waitFor } from '../support/helpers.js';

let emulator: MotherEmulator;
const guards: LicenseGuard[] = [];
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(() => emulator.close());
beforeEach(() => {
  emulator.setFaults({});
  emulator.setPanel(API_KEY, { active: true, reason: null, panel: DEMO_PANEL.panel ?? {} });
  emulator.reset();
});
afterEach(() => {
  for (const guard of guards.splice(0)) guard.close();
});

const HOUR = 60 * 60 * 1000;

describe.each(EXPRESS_VERSIONS)('licenseGuard() under %s', (_label, express) => {
  function setup(options: Parameters<typeof guardedApp>[2] = {}): GuardedApp {
    const built = guardedApp(express, emulator, options);
    guards.push(built.guard);
    return built;
  }

  describe('when active', () => {
    it('renders the branding in templates', async () => {
      const { app, guard } = setup();
      expect(await guard.start()).toBe('active');
      const res = await request(app).get('/dashboard').expect(200);
      expect(res.text).toContain('<span id="name">Rhythm Hub</span>');
      expect(res.text).toContain('--brand: #ff5500;');
      expect(res.text).toContain('src="https://cdn.rhythm.example/logo.png"');
      expect(res.text).toContain('<p id="state">active</p>');
    });

    it('makes no license call on the request path', async () => {
      // A yearly schedule: any license call during the 10,000 requests would come from the request path.
      const { app, guard } = setup({ schedule: '0 0 1 1 *' });
      await guard.start();
      const server = app.listen(0, '127.0.0.1');
      await new Promise((r) => server.once('listening', r));
      const { port } = server.address() as { port: number };
      const before = emulator.requests.length;
      for (let batch = 0; batch < 200; batch++) {
        await Promise.all(Array.from({ length: 50 }, () => fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.arrayBuffer())));
      }
      await new Promise((r) => server.close(r));
      expect(emulator.requests.length - before).toBe(0);
    });

    it('checks on the schedule and stops on close()', async () => {
      const { guard } = setup({ schedule: '* * * * * *' });
      await guard.start();
      const licenseCalls = () => emulator.requests.filter((r) => r.endpoint === 'license.php').length;
      await waitFor(() => licenseCalls() >= 3, 'two scheduled checks after the first', 5000);
      expect(guard.status().nextCheckAt).toBeGreaterThan(Date.now() - 1000);
      guard.close();
      const after = licenseCalls();
      await sleep(1500);
      expect(licenseCalls()).toBe(after);
    });

    it('keeps guards of the same panel independent', async () => {
      const first = setup();
      await first.guard.start();
      const second = setup();
      expect(second.guard.state).toBe('pending');
      expect(first.guard.state).toBe('active');
      await request(first.app).get('/dashboard').expect(200);
    });

    it('applies a verdict even when a listener throws', async () => {
      const errors: string[] = [];
      const { guard } = setup({ logger: { warn: () => {}, error: (m) => errors.push(m) } });
      guard.on('change', () => {
        throw new Error('listener bug');
      });
      expect(await guard.start()).toBe('active');
      expect(errors[0]).toMatch(/a 'change' listener threw: listener bug/);
      expect(await guard.refresh()).toBe('active');
    });

    it('changes nothing once closed, even with a check in flight', async () => {
      const { guard } = setup();
      await guard.start();
      const events: string[] = [];
      guard.on('change', (c) => events.push(c.state)).on('error', () => events.push('error'));
      emulator.setPanel(API_KEY, { active: false });
      emulator.setFaults({ delayMs: 2000 });
      const inFlight = guard.refresh();
      guard.close();
      expect(await inFlight).toBe('active');
      expect(events).toEqual([]);
      expect(await guard.start()).toBe('active');
    });

    it('shares one request between concurrent refresh() calls', async () => {
      const { guard } = setup();
      await guard.start();
      emulator.reset();
      emulator.setFaults({ delayMs: 100 });
      await Promise.all([guard.refresh(), guard.refresh(), guard.refresh()]);
      expect(emulator.requests.filter((r) => r.endpoint === 'license.php')).toHaveLength(1);
    });
  });

  describe('when locked', () => {
    async function locked(options: Parameters<typeof guardedApp>[2] = {}) {
      const built = setup(options);
      await built.guard.start();
      const events: string[] = [];
      built.guard.on('lock', () => events.push('lock')).on('unlock', () => events.push('unlock'));
      emulator.setPanel(API_KEY, { active: false, reason: 'Invoice <b>overdue</b>' });
      expect(await built.guard.refresh()).toBe('locked');
      return { ...built, events };
    }

    it("serves the branded lock page with a public message, never the operator's reason", async () => {
      const { app, guard } = await locked();
      const res = await request(app).get('/dashboard').set('Accept', 'text/html').expect(503);
      expect(res.headers['retry-after']).toBe('300');
      expect(res.headers['cache-control']).toBe('no-store');
      expect(res.headers['x-license-status']).toBe('locked');
      expect(res.headers['content-security-policy']).toContain("default-src 'none'");
      expect(res.text).toContain('This panel is temporarily unavailable. Please try again later.');
      expect(res.text).not.toContain('overdue');
      expect(guard.status().reason).toBe('Invoice <b>overdue</b>');
      expect(res.text).toContain('<h1>Rhythm Hub</h1>');
      expect(res.text).toContain('--brand: #ff5500;');
      expect(res.text).not.toMatch(/<link|<script/);
    });

    it('shows a publicMessage of the verdict, escaped, and a support contact', async () => {
      const { app } = await locked({
        publicMessage: ({ state, reason }) => `Paused (${state}): ${reason}`,
        supportContact: 'help@rhythm.example',
      });
      const res = await request(app).get('/dashboard').set('Accept', 'text/html').expect(503);
      expect(res.text).toContain('Paused (locked): Invoice &lt;b&gt;overdue&lt;/b&gt;');
      expect(res.text).toContain('<a href="mailto:help@rhythm.example">help@rhythm.example</a>');
      const json = await request(app).get('/dashboard').set('Accept', 'application/json').expect(503);
      expect(json.body.message).toBe('Paused (locked): Invoice <b>overdue</b>');
    });

    it('falls back to the default message when publicMessage throws', async () => {
      const { app } = await locked({
        publicMessage: () => {
          throw new Error('template bug');
        },
      });
      const res = await request(app).get('/dashboard').set('Accept', 'application/json').expect(503);
      expect(res.body.message).toBe('This panel is temporarily unavailable. Please try again later.');
    });

    it('answers JSON to API clients and under apiPrefix', async () => {
      const { app } = await locked();
      const body = { ok: false, error: 'panel_locked', message: 'This panel is temporarily unavailable. Please try again later.' };
      expect((await request(app).get('/dashboard').set('Accept', 'application/json').expect(503)).body).toEqual(body);
      expect((await request(app).get('/api/data').set('Accept', 'text/html').expect(503)).body).toEqual(body);
    });

    it('answers HEAD with headers only', async () => {
      const { app } = await locked();
      const res = await request(app).head('/dashboard').expect(503);
      expect(res.headers['x-license-status']).toBe('locked');
      expect(res.text ?? '').toBe('');
    });

    it('keeps allowed paths served', async () => {
      const { app } = await locked();
      expect((await request(app).get('/healthz').expect(200)).body).toEqual({ ok: true, license: 'locked' });
      await request(app).get('/static/app.css').expect(200);
    });

    it('cannot be bypassed with raw paths that are not on the allow list', async () => {
      const { app } = await locked();
      const server = app.listen(0, '127.0.0.1');
      await new Promise((r) => server.once('listening', r));
      const { port } = server.address() as { port: number };
      const statusOf = (path: string) =>
        new Promise<number>((resolve, reject) => {
          // http.request sends the path as written: no client-side normalization of dot segments.
          http
            .get({ host: '127.0.0.1', port, path, headers: { accept: 'application/json' } }, (res) => {
              res.resume();
              resolve(res.statusCode ?? 0);
            })
            .on('error', reject);
        });
      try {
        for (const path of [
          '/Admin',
          '/admin/',
          '//admin',
          '/%61dmin',
          '/healthz/../admin',
          '/healthz/%2e%2e/admin',
          '/healthzz',
          '/static/../api/data',
          '/api/../healthz',
          '/api/%2e%2e/healthz',
        ]) {
          expect(await statusOf(path), path).toBe(503);
        }
        expect(await statusOf('/healthz')).toBe(200);
      } finally {
        await new Promise((r) => server.close(r));
      }
    });

    it('uses lockStatus and the host view, rendered once per verdict', async () => {
      const { app, renders } = await locked({ lockView: 'locked', lockStatus: 403 });
      for (let i = 0; i < 3; i++) {
        const res = await request(app).get('/x').expect(403);
        expect(res.text).toContain('<h1 id="custom-lock">Rhythm Hub is locked</h1>');
        expect(res.text).toContain('Invoice &lt;b&gt;overdue&lt;/b&gt;');
      }
      expect(renders()).toBe(1);
    });

    it('unlocks on the next active verdict, firing each event once', async () => {
      const { app, guard, events } = await locked();
      await guard.refresh();
      emulator.setPanel(API_KEY, { active: true, reason: null });
      expect(await guard.refresh()).toBe('active');
      await guard.refresh();
      await request(app).get('/dashboard').expect(200);
      expect(events).toEqual(['lock', 'unlock']);
    });

    const malformed: [string, unknown][] = [
      ['active as a string', { ok: true, active: 'true', reason: null, panel: {} }],
      ['a missing panel', { ok: true, active: true, reason: null }],
      ['an HTML page with 200', '<html><body>Maintenance</body></html>'],
      ['ok: false', { ok: false, error: 'x' }],
    ];
    for (const [what, body] of malformed) {
      it(`stays locked on ${what}`, async () => {
        const { app, guard } = await locked();
        const errors: unknown[] = [];
        guard.on('error', (e) => errors.push(e));
        emulator.setPanel(API_KEY, { active: true, reason: null });
        emulator.setFaults({ licenseBody: body });
        expect(await guard.refresh()).toBe('locked');
        expect(errors).toHaveLength(1);
        await request(app).get('/dashboard').expect(503);
      });
    }
  });

  describe('when the mother is unreachable', () => {
    it('keeps serving through grace, then locks when grace ends', async () => {
      let now = Date.now();
      const { app, guard } = setup({ now: () => now, gracePeriodMs: 72 * HOUR });
      const changes: ChangeEvent[] = [];
      guard.on('change', (c) => changes.push(c)).on('error', () => {});
      await guard.start();
      emulator.setFaults({ down: true });
      now += HOUR;
      expect(await guard.refresh()).toBe('grace');
      await request(app).get('/dashboard').expect(200);
      expect(guard.status()).toMatchObject({ state: 'grace', consecutiveFailures: 1, lastError: 'HTTP_STATUS' });
      expect(guard.status().graceEndsAt).toBe((guard.status().lastSuccessAt ?? 0) + 72 * HOUR);
      now += 71 * HOUR + 1000;
      expect(await guard.refresh()).toBe('locked');
      const res = await request(app).get('/dashboard').set('Accept', 'application/json').expect(503);
      expect(res.body.message).toBe('This panel is temporarily unavailable. Please try again later.');
      expect(guard.status().reason).toMatch(/^The license could not be verified since \d{4}-/);
      expect(changes.map((c) => c.state)).toEqual(['active', 'grace', 'locked']);
    });

    it('retries sooner with backoff while failing, and recovers by itself', async () => {
      const { guard } = setup({ retryBaseMs: 40, retryMaxMs: 80, schedule: '0 0 1 1 *' });
      guard.on('error', () => {});
      await guard.start();
      emulator.setFaults({ down: true });
      expect(await guard.refresh()).toBe('grace');
      await waitFor(() => guard.status().consecutiveFailures >= 3, 'automatic retries', 5000);
      emulator.setFaults({});
      await waitFor(() => guard.state === 'active', 'recovery without refresh()', 5000);
      expect(guard.status()).toMatchObject({ consecutiveFailures: 0, lastError: null, graceEndsAt: null });
    });

    it('never lets grace run past expires_at', async () => {
      let now = Date.UTC(2030, 0, 10, 12);
      emulator.setPanel(API_KEY, { panel: { expires_at: '2030-01-10' } });
      const { guard } = setup({ now: () => now });
      guard.on('error', () => {});
      await guard.start();
      emulator.setFaults({ down: true });
      expect(await guard.refresh()).toBe('grace');
      expect(guard.status().graceEndsAt).toBe(Date.UTC(2030, 0, 11));
      now = Date.UTC(2030, 0, 11, 0, 0, 1);
      expect(await guard.refresh()).toBe('locked');
    });

    it('starts pending and answers "License not verified yet" after startupTimeoutMs', async () => {
      emulator.setFaults({ down: true });
      const { app, guard } = setup({ startupTimeoutMs: 150 });
      guard.on('error', () => {});
      expect(await guard.start()).toBe('pending');
      const res = await request(app).get('/api/data').expect(503);
      expect(res.body).toEqual({ ok: false, error: 'license_pending', message: 'This panel is starting up. Please try again in a moment.' });
      expect(res.headers['retry-after']).toBeDefined();
      await request(app).get('/healthz').expect(200);
      emulator.setFaults({});
      expect(await guard.refresh()).toBe('active');
      await request(app).get('/api/data').expect(200);
    });

    it('lets early requests wait for the first verdict', async () => {
      emulator.setFaults({ delayMs: 200 });
      const { app, guard } = setup({ startupTimeoutMs: 5000 });
      const starting = guard.start();
      await request(app).get('/dashboard').expect(200);
      await starting;
    });
  });

  describe('with stateFile', () => {
    const dir = mkdtempSync(join(tmpdir(), 'plg-state-'));

    it('keeps an active panel serving across a restart during an outage', async () => {
      const stateFile = join(dir, `active-${Math.random()}.json`);
      const first = setup({ stateFile });
      await first.guard.start();
      first.guard.close();
      await waitFor(() => existsSync(stateFile), 'the state file');
      expect(statSync(stateFile).mode & 0o777).toBe(0o600);
      expect(readFileSync(stateFile, 'utf8')).not.toContain(API_SECRET);
      emulator.setFaults({ down: true });
      const second = setup({ stateFile });
      second.guard.on('error', () => {});
      expect(await second.guard.start()).toBe('grace');
      await request(second.app).get('/dashboard').expect(200);
    });

    it('keeps a locked panel locked across a restart during an outage', async () => {
      const stateFile = join(dir, `locked-${Math.random()}.json`);
      emulator.setPanel(API_KEY, { active: false, reason: 'Suspended' });
      const first = setup({ stateFile });
      expect(await first.guard.start()).toBe('locked');
      first.guard.close();
      await waitFor(() => existsSync(stateFile), 'the state file');
      emulator.setFaults({ down: true });
      const second = setup({ stateFile });
      second.guard.on('error', () => {});
      expect(await second.guard.start()).toBe('locked');
      expect((await request(second.app).get('/x').set('Accept', 'application/json').expect(503)).body.error).toBe('panel_locked');
      expect(second.guard.status().reason).toBe('Suspended');
    });

    it('does not resume a restored verdict whose grace has run out', async () => {
      const stateFile = join(dir, `old-${Math.random()}.json`);
      let now = Date.now();
      const first = setup({ stateFile, now: () => now });
      await first.guard.start();
      first.guard.close();
      await waitFor(() => existsSync(stateFile), 'the state file');
      now += 73 * HOUR;
      emulator.setFaults({ down: true });
      const second = setup({ stateFile, now: () => now, startupTimeoutMs: 50 });
      second.guard.on('error', () => {});
      expect(await second.guard.start()).toBe('pending');
      await request(second.app).get('/dashboard').expect(503);
    });

    it('reports a corrupt file and carries on', async () => {
      const stateFile = join(dir, 'corrupt.json');
      writeFileSync(stateFile, '{"version":1,"panel":');
      const { guard } = setup({ stateFile });
      const errors: Error[] = [];
      guard.on('error', (e) => errors.push(e as Error));
      expect(await guard.start()).toBe('active');
      expect(errors[0]?.message).toMatch(/is corrupt and was ignored/);
      // The verdict is written in the background after the first check; the corrupt file was 21 bytes.
      await waitFor(() => readFileSync(stateFile, 'utf8').length > 50, 'the rewrite');
      expect(JSON.parse(readFileSync(stateFile, 'utf8'))).toMatchObject({ version: 2, mac: expect.stringMatching(/^[0-9a-f]{64}$/) });
    });
  });
});

describe('licenseGuard() options', () => {
  const base = { baseUrl: 'https://mother.example/api', apiKey: API_KEY, apiSecret: API_SECRET };
  it('names the bad option and the fix', async () => {
    const { licenseGuard } = await import('../../src/index.js');
    expect(() => licenseGuard({ ...base, shedule: '* * * * *' } as never)).toThrow(/unknown option `shedule`. Did you mean `schedule`\?/);
    expect(() => licenseGuard({ ...base, schedule: 'every 5 minutes' })).toThrow(/`schedule` is not a valid cron expression/);
    expect(() => licenseGuard({ ...base, lockStatus: 200 })).toThrow(/`lockStatus` must be an HTTP error status/);
    expect(() => licenseGuard({ ...base, defaultColor: 'red' })).toThrow(/`defaultColor` must be #rrggbb/);
    expect(() => licenseGuard({ ...base, allow: ['healthz'] })).toThrow(/`allow` has an invalid path rule "healthz"/);
    expect(() => licenseGuard({ ...base, retryBaseMs: 10_000, retryMaxMs: 1000 })).toThrow(/`retryMaxMs`/);
    expect(() => licenseGuard({ ...base, apiSecret: '' })).toThrow(/`apiSecret`/);
    const { createMotherClient } = await import('../../src/index.js');
    const client = createMotherClient(base);
    expect(() => licenseGuard({ client, baseUrl: base.baseUrl })).toThrow(/`baseUrl` was given together with `client`/);
    expect(() => licenseGuard({ client, timeoutMs: 5 })).toThrow(/`timeoutMs` was given together with `client`/);
    expect(() => createMotherClient({ ...base, allowInsecureHttp: 'yes' as never })).toThrow(/`allowInsecureHttp` must be true or false/);
    expect(() => licenseGuard({ ...base, supportContact: 'call us' })).toThrow(/`supportContact` must be an e-mail address or an http\(s\) URL/);
    expect(() => licenseGuard({ ...base, publicMessage: '  ' })).toThrow(/`publicMessage` must not be empty/);
    // A secret that landed in the wrong option (swapped variables) is never printed.
    const swapped = () => licenseGuard({ ...base, baseUrl: API_SECRET, schedule: API_SECRET });
    expect(swapped).toThrow(/`baseUrl` is not an absolute URL \(received "\[api secret\]"\)/);
    expect(swapped).not.toThrow(new RegExp(API_SECRET));
    // Values that JSON cannot show still give the TypeError that names the option.
    expect(() => licenseGuard({ ...base, jitterMs: 10n as never })).toThrow(/`jitterMs` must be an integer from 0 to 2147483647, received a bigint/);
    // Timer options setTimeout cannot honour (it would fire after 1 ms, in a loop) are refused.
    expect(() => licenseGuard({ ...base, retryBaseMs: 2 ** 31, retryMaxMs: 2 ** 31 })).toThrow(/`retryBaseMs` must be an integer from 1 to 2147483647/);
    expect(() => createMotherClient({ ...base, timeoutMs: 2 ** 31 })).toThrow(/`timeoutMs` must be an integer from 1 to 2147483647/);
    // The support contact cannot add mail headers or read differently from its link.
    expect(() => licenseGuard({ ...base, supportContact: 'help\u202e@example.com' })).toThrow(/`supportContact` must be an e-mail address/);
  });

  it('reports every problem of one options object in one TypeError, in a stable order', async () => {
    const { licenseGuard } = await import('../../src/index.js');
    const options = { baseURL: 'https://mother.example/api', apiKey: API_KEY, apiSecret: API_SECRET, allowList: ['/healthz'], lockStatus: 200 } as never;
    let message = '';
    try {
      licenseGuard(options);
    } catch (error) {
      expect(error).toBeInstanceOf(TypeError);
      message = (error as Error).message;
    }
    const lines = message.split('\n');
    expect(lines[0]).toBe('panel-license-guard: licenseGuard() received 4 invalid options:');
    expect(lines[1]).toMatch(/^ {2}1\. licenseGuard\(\) received an unknown option `baseURL`. Did you mean `baseUrl`\?$/);
    expect(lines[2]).toMatch(/^ {2}2\. licenseGuard\(\) received an unknown option `allowList`. Did you mean `allow`\?$/);
    expect(lines[3]).toMatch(/^ {2}3\. `baseUrl` must be a non-empty string/);
    expect(lines[4]).toMatch(/^ {2}4\. `lockStatus` must be an HTTP error status/);
    expect(() => licenseGuard(options)).toThrow(message);
  });
});

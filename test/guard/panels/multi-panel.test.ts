import http from 'node:http';
import v8 from 'node:v8';
import vm from 'node:vm';
import express from 'express';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createCheckSpreader } from '../../../src/guard/panels/check-spreader.js';
import type { PanelCredentials } from '../../../src/guard/panels/host-resolver.js';
import { type LicenseGuard, type LicenseGuardOptions, licenseGuard } from '../../../src/index.js';
import type { MotherEmulator } from '../../../src/testing.js';
import { silentLogger } from '../../support/guard-app.js';
import { sleep, startEmulator, waitFor } from '../../support/helpers.js';

// Three panels on one emulator, one deployment: each host its own key, branding and license.
const PANELS = {
  'beats.example': { apiKey: 'pk_beats', apiSecret: 'sk_beats_0123456789', record: { name: 'Beats', brand_color: '#112233', custom_domain: 'beats.example' } },
  'labelx.example': {
    apiKey: 'pk_labelx',
    apiSecret: 'sk_labelx_0123456789',
    record: { name: 'Label X', brand_color: '#445566', custom_domain: 'labelx.example' },
  },
  'acme.example': { apiKey: 'pk_acme', apiSecret: 'sk_acme_0123456789', record: { name: 'Acme', brand_color: '#778899', custom_domain: 'acme.example' } },
} as const;
type Host = keyof typeof PANELS;

let emulator: MotherEmulator;
beforeAll(async () => {
  emulator = await startEmulator(Object.values(PANELS).map(({ apiKey, apiSecret, record }) => ({ apiKey, apiSecret, active: true, panel: record })));
});
afterAll(() => emulator.close());
const guards: LicenseGuard[] = [];
afterEach(async () => {
  await Promise.all(guards.splice(0).map((guard) => guard.close()));
  for (const { apiKey } of Object.values(PANELS)) emulator.setPanel(apiKey, { active: true });
  emulator.reset();
});

function deployment(
  options: Partial<LicenseGuardOptions> = {},
  resolve = vi.fn(async (host: string) => (PANELS[host as Host] ?? null) && { apiKey: PANELS[host as Host].apiKey, apiSecret: PANELS[host as Host].apiSecret }),
) {
  const guard = licenseGuard({ baseUrl: emulator.url, panels: { resolve }, apiPrefix: '/api', allow: ['/healthz'], logger: silentLogger, ...options });
  guards.push(guard);
  const app = express();
  app.use(guard);
  app.get('/healthz', (_req, res) => {
    res.json({ ok: true });
  });
  app.get('/api/me', (_req, res) => {
    res.json({ name: res.locals.branding.name, state: res.locals.license.state });
  });
  app.get('/', (_req, res) => {
    res.send(`<h1>${res.locals.branding.name}</h1>`);
  });
  return { app, guard, resolve };
}
v8.setFlagsFromString('--expose-gc');

const checksBy = (apiKey: string) => emulator.requests.filter((r) => r.endpoint === 'license.php' && r.apiKey === apiKey).length;

describe('licenseGuard({ panels })', () => {
  it('serves each host with its own branding and license, and a lock on one leaves the others serving', async () => {
    const { app, guard } = deployment();
    for (const host of Object.keys(PANELS) as Host[])
      expect((await request(app).get('/api/me').set('Host', host).expect(200)).body).toEqual({ name: PANELS[host].record.name, state: 'active' });
    emulator.setPanel('pk_labelx', { active: false, reason: 'Unpaid' });
    expect(await guard.refresh('labelx.example')).toBe('locked');
    await request(app).get('/').set('Host', 'labelx.example').expect(503);
    await request(app).get('/').set('Host', 'beats.example').expect(200);
    expect(guard.status('labelx.example')).toMatchObject({ state: 'locked', reason: 'Unpaid' });
    expect(guard.status('beats.example')).toMatchObject({ state: 'active' });
    // Each panel's check went out with its own key only.
    for (const { apiKey } of Object.values(PANELS)) expect(checksBy(apiKey)).toBeGreaterThan(0);
    expect(emulator.requests.every((r) => r.status === 200)).toBe(true);
  });

  it('checks a panel at the mother its resolver names, and gives the request your id of the panel', async () => {
    const other = await startEmulator([{ apiKey: 'pk_elsewhere', apiSecret: 'sk_elsewhere_0123456789', panel: { name: 'Elsewhere' } }]);
    try {
      const resolve = async (host: string): Promise<PanelCredentials | null> => {
        if (host === 'elsewhere.example') return { apiKey: 'pk_elsewhere', apiSecret: 'sk_elsewhere_0123456789', baseUrl: other.url, panel: 'tenant-9' };
        return host === 'beats.example' ? { apiKey: 'pk_beats', apiSecret: 'sk_beats_0123456789', panel: 'tenant-1' } : null;
      };
      const { app } = deployment({ panels: { resolve } });
      app.get('/api/whoami', (_req, res) => {
        res.json({ panel: res.locals.panel, name: res.locals.branding.name });
      });
      expect((await request(app).get('/api/whoami').set('Host', 'elsewhere.example').expect(200)).body).toEqual({ panel: 'tenant-9', name: 'Elsewhere' });
      expect((await request(app).get('/api/whoami').set('Host', 'beats.example').expect(200)).body).toEqual({ panel: 'tenant-1', name: 'Beats' });
      expect(other.requests.map((r) => r.apiKey)).toEqual(['pk_elsewhere']);
      expect(emulator.requests.map((r) => r.apiKey)).not.toContain('pk_elsewhere');
    } finally {
      await other.close();
    }
  });

  it('answers 404 for an unknown or malformed host, without a mother call, and remembers it', async () => {
    const { app, resolve } = deployment();
    const page = await request(app).get('/').set('Host', 'nobody.example').expect(404);
    expect(page.text).toContain('There is no panel at this address.');
    const api = await request(app).get('/api/me').set('Host', 'nobody.example').expect(404);
    expect(api.body).toMatchObject({ ok: false, error: 'UNKNOWN_HOST' });
    await request(app).get('/').set('Host', 'bad host!').expect(404);
    expect(resolve.mock.calls.map(([host]) => host)).toEqual(['nobody.example']);
    expect(emulator.requests).toHaveLength(0);
  });

  it('calls the resolver and the mother once for 1,000 concurrent first requests, whatever the spelling', async () => {
    const { app, resolve } = deployment();
    const server = app.listen(0, '127.0.0.1');
    await new Promise((ready) => server.once('listening', ready));
    const { port } = server.address() as { port: number };
    try {
      const spellings = ['acme.example', 'ACME.example', 'acme.example.'];
      const agent = new http.Agent({ keepAlive: true, maxSockets: 200 });
      const get = (host: string) =>
        new Promise<number>((resolve, reject) => {
          http
            .get({ host: '127.0.0.1', port, path: '/api/me', agent, headers: { host: `${host}:${port}` } }, (res) => {
              res.resume();
              res.on('end', () => resolve(res.statusCode ?? 0));
            })
            .on('error', reject);
        });
      const answers = await Promise.all(Array.from({ length: 1000 }, (_, i) => get(spellings[i % 3] as string)));
      agent.destroy();
      expect(new Set(answers)).toEqual(new Set([200]));
    } finally {
      server.close();
    }
    expect(resolve).toHaveBeenCalledTimes(1);
    expect(checksBy('pk_acme')).toBe(1);
  });

  it('bounds a resolver that throws or hangs, and reports it', async () => {
    const resolve = async (host: string): Promise<null> => {
      if (host === 'throws.example') throw new Error('tenant database down');
      return new Promise<null>(() => {});
    };
    const { app, guard } = deployment({ panels: { resolve, resolveTimeoutMs: 200 } });
    const errors: string[] = [];
    guard.on('error', (error) => errors.push((error as Error).message));
    await request(app).get('/').set('Host', 'throws.example').expect(404);
    await request(app).get('/').set('Host', 'hangs.example').expect(404);
    expect(errors).toEqual([expect.stringMatching(/tenant database down/), expect.stringMatching(/did not answer within 200 ms for hangs.example/)]);
  });

  it('evicts the least recently used panel beyond `max`, and checks it again when it returns', async () => {
    const { app, guard } = deployment({ panels: { resolve: async (host) => PANELS[host as Host] ?? null, max: 2 } });
    for (const host of ['beats.example', 'labelx.example', 'acme.example']) await request(app).get('/').set('Host', host).expect(200);
    expect(guard.status('beats.example')).toBeUndefined();
    expect(guard.status('acme.example')?.state).toBe('active');
    // Back: it resumes from its last verdict and is checked in its turn (the next second).
    await request(app).get('/').set('Host', 'beats.example').expect(200);
    await waitFor(() => checksBy('pk_beats') === 2, 'the returning panel’s check');
  });

  it('checks each panel once per interval while it gets requests, stops when idle, and checks again on its return', { timeout: 20_000 }, async () => {
    let offset = 0;
    const { app, guard } = deployment({
      now: () => Date.now() + offset,
      panels: { resolve: async (host) => PANELS[host as Host] ?? null, checkIntervalMs: 10_000, idleMs: 60_000 },
    });
    await request(app).get('/').set('Host', 'acme.example').expect(200);
    expect(checksBy('pk_acme')).toBe(1);
    const next = guard.status('acme.example')?.nextCheckAt as number;
    expect(next - (Date.now() + offset)).toBeGreaterThanOrEqual(4_000);
    offset += 16_000; // past the next phase: a regular check
    await waitFor(() => checksBy('pk_acme') === 2, 'the regular check');
    offset += 120_000; // no request for two minutes: idle
    // Seen at the next tick of the checks (later than a second on a busy machine).
    await waitFor(() => guard.status('acme.example')?.nextCheckAt === null, 'the idle panel’s checks stopped');
    await sleep(1500); // another tick or more: still no check for the idle panel
    expect(checksBy('pk_acme')).toBe(2);
    await request(app).get('/').set('Host', 'acme.example').expect(200);
    await waitFor(() => checksBy('pk_acme') === 3, 'the check on return');
  });

  it('refuses and reports a host the resolver maps to a panel whose license names other domains', async () => {
    const copied = async (host: string) => (host === 'copy.example' ? PANELS['beats.example'] : (PANELS[host as Host] ?? null));
    const { app, guard } = deployment({ domains: 'enforce', panels: { resolve: copied } });
    const errors: { message: string; panel?: string }[] = [];
    guard.on('error', (error) => errors.push(error as { message: string; panel?: string }));
    await request(app).get('/').set('Host', 'beats.example').expect(200);
    await request(app).get('/').set('Host', 'copy.example').expect(421);
    await request(app).get('/').set('Host', 'copy.example').expect(421);
    expect(errors).toHaveLength(1);
    expect(errors[0]?.message).toMatch(/asked for at copy.example, which its license does not name \(licensed: beats.example\)/);
    expect(errors[0]?.panel).toMatch(/^[0-9a-f]{32}$/);
    expect(JSON.stringify(errors)).not.toContain('pk_beats');
  });

  it('treats unusable credentials from the resolver as an unknown host, and never crashes', async () => {
    const { app, guard } = deployment({ panels: { resolve: async () => ({ apiKey: 'pk_beats\n', apiSecret: 'sk_beats_0123456789' }) } });
    const errors: string[] = [];
    guard.on('error', (error) => errors.push((error as Error).message));
    await request(app).get('/').set('Host', 'beats.example').expect(404);
    expect(errors).toEqual([expect.stringMatching(/apiKey/)]);
    expect(emulator.requests).toHaveLength(0);
  });

  it('refuses a panel id from the resolver that no store keeps byte for byte (a cut emoji), as unusable credentials', async () => {
    const { app, guard } = deployment({
      panels: { resolve: async () => ({ apiKey: 'pk_beats', apiSecret: 'sk_beats_0123456789', panel: `${'tenant😀'.slice(0, 7)}` }) },
    });
    const errors: string[] = [];
    guard.on('error', (error) => errors.push((error as Error).message));
    await request(app).get('/').set('Host', 'beats.example').expect(404);
    expect(errors).toEqual([expect.stringMatching(/well-formed Unicode.*"tenant\[lone surrogate U\+D83D\]"/)]);
    expect(emulator.requests).toHaveLength(0);
  });

  it('keeps a panel apart from a host that has its key with another secret, and follows a rotated secret', async () => {
    let secret = PANELS['beats.example'].apiSecret as string;
    const resolve = async (host: string) =>
      host === 'beats.example'
        ? { apiKey: 'pk_beats', apiSecret: secret }
        : host === 'thief.example'
          ? { apiKey: 'pk_beats', apiSecret: 'sk_guessed_wrong_1234' }
          : null;
    const { app, guard } = deployment({ panels: { resolve, resolveTtlMs: 1 } });
    await request(app).get('/').set('Host', 'thief.example').expect(503);
    await request(app).get('/').set('Host', 'beats.example').expect(200);
    await request(app).get('/').set('Host', 'thief.example').expect(503);
    // Rotated at the mother and in the tenants table: the next answer uses the new secret.
    secret = 'sk_beats_rotated_9876';
    emulator.setPanel('pk_beats', { apiSecret: secret });
    try {
      await request(app).get('/').set('Host', 'beats.example'); // the stale answer is served and asked again in the background
      await waitFor(
        async () => (await request(app).get('/').set('Host', 'beats.example')).status === 200 && guard.status('beats.example')?.lastError === null,
        'the rotated secret',
      );
    } finally {
      emulator.setPanel('pk_beats', { apiSecret: PANELS['beats.example'].apiSecret });
    }
  });

  it('drops the runtime a rotated secret left behind, so nothing checks with the old secret', async () => {
    let secret = PANELS['beats.example'].apiSecret as string;
    let offset = 0;
    const { app, guard } = deployment({
      now: () => Date.now() + offset,
      panels: { resolve: async () => ({ apiKey: 'pk_beats', apiSecret: secret }), resolveTtlMs: 1, checkIntervalMs: 10_000 },
    });
    await request(app).get('/').set('Host', 'beats.example').expect(200);
    secret = 'sk_beats_rotated_9876';
    emulator.setPanel('pk_beats', { apiSecret: secret });
    try {
      await request(app).get('/').set('Host', 'beats.example'); // the stale answer, asked again in the background
      await waitFor(
        async () => (await request(app).get('/').set('Host', 'beats.example')).status === 200 && guard.status('beats.example')?.lastError === null,
        'the rotated secret',
      );
      const rejected = () => emulator.requests.filter((r) => r.apiKey === 'pk_beats' && r.status === 401).length;
      const before = rejected();
      const checks = checksBy('pk_beats');
      // A whole interval later every runtime has had its regular check: only the new one is left.
      offset += 20_000;
      await waitFor(() => checksBy('pk_beats') > checks, 'the regular check');
      await sleep(1500);
      expect(rejected()).toBe(before);
    } finally {
      emulator.setPanel('pk_beats', { apiSecret: PANELS['beats.example'].apiSecret });
    }
  });

  it("answers the load balancer for the instance, whatever the host, and names a panel's hosts in its events", async () => {
    const resolve = vi.fn(async (host: string) => {
      const known = PANELS[host as Host];
      return known ? { apiKey: known.apiKey, apiSecret: known.apiSecret, panel: `tenant-${known.apiKey.slice(3)}` } : null;
    });
    const { guard } = deployment({}, resolve as never);
    const locks: { panel?: string; hosts?: string[] }[] = [];
    guard.on('lock', (event) => locks.push(event));
    const lb = express();
    lb.get('/lb', guard.healthHandler());
    lb.use(guard);
    // An IP is no panel's host: the status handler says 404, the health handler answers for the instance.
    let health = await request(lb).get('/lb').set('Host', '10.0.0.7').expect(200);
    expect(health.body).toEqual({ ok: true, panels: { total: 0, active: 0, grace: 0, locked: 0, pending: 0 }, store: 'none' });
    await request(lb).get('/').set('Host', 'beats.example').expect(404); // no route behind the guard, but served
    emulator.setPanel('pk_acme', { active: false, reason: 'Suspended.' });
    await request(lb).get('/').set('Host', 'acme.example').expect(503);
    health = await request(lb).get('/lb').set('Host', '10.0.0.7').expect(200);
    expect(health.body.panels).toMatchObject({ total: 2, active: 1, locked: 1 });
    const acme = guard.status('acme.example')?.panel as string;
    expect(guard.hostsOf(acme)).toEqual(['acme.example']);
    expect(guard.hostsOf('tenant-acme')).toEqual(['acme.example']);
    expect(guard.hostsOf('tenant-nobody')).toEqual([]);
    expect(locks).toEqual([expect.objectContaining({ panel: acme, hosts: ['acme.example'] })]);
    await guard.close();
    await request(lb).get('/lb').set('Host', '10.0.0.7').expect(503);
  });

  it('keeps no route for odd spellings of a host: 400 requests with a 15 KB port leave the heap as it was', async () => {
    const { app } = deployment();
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    const { port } = server.address() as import('node:net').AddressInfo;
    const get = (host: string) =>
      new Promise<number>((resolve, reject) => {
        const req = http.request({ port, host: '127.0.0.1', path: '/', headers: { Host: host }, agent: false }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        });
        req.on('error', reject);
        req.end();
      });
    try {
      expect(await get('beats.example')).toBe(200);
      const gc = vm.runInNewContext('gc') as () => void;
      gc();
      const before = process.memoryUsage().heapUsed;
      for (let i = 0; i < 400; i++) expect(await get(`beats.example:${String(i).padStart(15_000, '0')}`)).toBe(200);
      gc();
      // A route per spelling would keep ~16 KB each (6.5 MB in all).
      expect(process.memoryUsage().heapUsed - before).toBeLessThan(2_000_000);
    } finally {
      server.close();
    }
  });

  it('keeps a known host through a flood of unknown ones and a resolver outage, and stops resolving after close()', async () => {
    let failing = false;
    const resolve = vi.fn(async (host: string) => {
      if (failing) throw new Error('tenant database down');
      return PANELS[host as Host] ?? null;
    });
    const { app, guard } = deployment({ panels: { resolve, max: 2, resolveTtlMs: 1 } }, resolve);
    await request(app).get('/').set('Host', 'acme.example').expect(200);
    for (let i = 0; i < 20; i++) await request(app).get('/').set('Host', `junk${i}.attacker.example`).expect(404);
    failing = true;
    await request(app).get('/').set('Host', 'acme.example').expect(200);
    await sleep(20);
    await request(app).get('/').set('Host', 'acme.example').expect(200);
    await guard.close();
    const calls = resolve.mock.calls.length;
    await request(app).get('/').set('Host', 'acme.example').expect(200);
    await request(app).get('/').set('Host', 'new.example').expect(404);
    expect(resolve.mock.calls.length).toBe(calls);
  });

  it('keeps serving a known panel while the resolver fails after its answer expired', async () => {
    let failing = false;
    const resolve = async (host: string) => {
      if (failing) throw new Error('tenant database down');
      return PANELS[host as Host] ?? null;
    };
    const { app } = deployment({ panels: { resolve, resolveTtlMs: 1 } });
    await request(app).get('/').set('Host', 'acme.example').expect(200);
    failing = true;
    for (let i = 0; i < 3; i++) await request(app).get('/').set('Host', 'acme.example').expect(200);
  });

  it('does not trust a panel back from idling past its grace while its check is slow', async () => {
    let offset = 0;
    const { app } = deployment({
      now: () => Date.now() + offset,
      gracePeriodMs: 3_600_000,
      startupTimeoutMs: 300,
      panels: { resolve: async (host) => PANELS[host as Host] ?? null, idleMs: 60_000, checkIntervalMs: 10_000 },
    });
    await request(app).get('/').set('Host', 'acme.example').expect(200);
    offset += 2 * 3_600_000; // two hours without a request: idle, and past its grace
    await sleep(1200); // a spreader tick finds it idle
    emulator.setPanel('pk_acme', { active: false, reason: 'Revoked' });
    emulator.setFaults({ delayMs: 1500 });
    try {
      await request(app).get('/').set('Host', 'acme.example').expect(503);
    } finally {
      emulator.setFaults({});
    }
  });

  it('resumes an evicted panel from its last verdict (grace during an outage), checking it in its turn', async () => {
    const { app } = deployment({ panels: { resolve: async (host) => PANELS[host as Host] ?? null, max: 2 } });
    for (const host of ['beats.example', 'labelx.example']) await request(app).get('/').set('Host', host).expect(200);
    emulator.setFaults({ down: true });
    try {
      await request(app).get('/').set('Host', 'acme.example').expect(503); // new, and the mother is down
      // beats was evicted; back during the outage it resumes within its grace.
      await request(app).get('/').set('Host', 'beats.example').expect(200);
      const before = checksBy('pk_beats');
      for (let i = 0; i < 5; i++) for (const host of ['labelx.example', 'beats.example']) await request(app).get('/').set('Host', host).expect(200);
      expect(checksBy('pk_beats') - before).toBeLessThanOrEqual(1);
    } finally {
      emulator.setFaults({});
    }
  });

  it('after close(), serves the last verdicts and starts nothing new', async () => {
    emulator.setPanel('pk_labelx', { active: false, reason: 'Unpaid' });
    const { app, guard } = deployment();
    await request(app).get('/').set('Host', 'labelx.example').expect(503);
    await request(app).get('/').set('Host', 'beats.example').expect(200);
    await guard.close();
    const calls = emulator.requests.length;
    await request(app).get('/').set('Host', 'labelx.example').expect(503);
    await request(app).get('/').set('Host', 'beats.example').expect(200);
    await request(app).get('/').set('Host', 'acme.example').expect(404);
    expect(await guard.refresh('labelx.example')).toBe('locked');
    expect(emulator.requests.length).toBe(calls);
  });

  it('refuses single-panel options and names bad ones', () => {
    const base = { baseUrl: emulator.url, panels: { resolve: () => null } };
    expect(() => licenseGuard({ ...base, apiKey: 'pk' })).toThrow(/`apiKey` was given together with `panels`/);
    expect(() => licenseGuard({ ...base, schedule: '* * * * *' })).toThrow(/`schedule` was given together with `panels`.*checkIntervalMs/);
    expect(() => licenseGuard({ baseUrl: emulator.url, panels: {} as never })).toThrow(/`panels.resolve` is required/);
    expect(() => licenseGuard({ ...base, panels: { resolve: () => null, maxPanels: 3 } as never })).toThrow(/`panels.maxPanels` is not a panels option/);
    expect(() => licenseGuard({ ...base, baseUrl: 'ftp://x' })).toThrow(/baseUrl/);
  });
});

describe('the check spreader', () => {
  it('spreads 10,000 panels evenly over the interval and caps a burst of retries', () => {
    vi.useFakeTimers({ now: 1_700_000_000_000 });
    try {
      const runs: number[] = [];
      const ids = Array.from({ length: 10_000 }, (_, i) => `panel-${i}`);
      const spreader = createCheckSpreader({ intervalMs: 300_000, now: Date.now, count: () => ids.length, run: () => runs.push(Date.now()) });
      for (const id of ids) spreader.scheduleRegular(id);
      // The first regular check of each falls in (150 s, 450 s]: half an interval at least from now.
      vi.advanceTimersByTime(451_000);
      expect(runs).toHaveLength(10_000);
      const perSecond = new Map<number, number>();
      for (const at of runs) perSecond.set(Math.floor(at / 1000), (perSecond.get(Math.floor(at / 1000)) ?? 0) + 1);
      // The even rate is 33.3 a second; the hash-chosen phases come within a small factor of it.
      expect(Math.max(...perSecond.values())).toBeLessThanOrEqual(70);
      // Every retry due in the same second (a mother outage): at most twice the even rate start.
      runs.length = 0;
      for (const id of ids) spreader.scheduleAt(id, Date.now() + 1000);
      vi.advanceTimersByTime(2000);
      expect(runs.length).toBeLessThanOrEqual(2 * 67);
      expect(spreader.peakPerSecond()).toBeLessThanOrEqual(67);
      spreader.close();
    } finally {
      vi.useRealTimers();
    }
  });

  it('runs a panel with the time it was scheduled for, so late timers on two instances agree on its slot', () => {
    vi.useFakeTimers({ now: 1_700_000_000_000 });
    try {
      const runs: [string, number][] = [];
      const spreader = createCheckSpreader({ intervalMs: 300_000, now: Date.now, count: () => 1, run: (id, dueAtMs) => runs.push([id, dueAtMs]) });
      spreader.scheduleRegular('p');
      const due = spreader.nextAt('p') as number;
      vi.advanceTimersByTime(due - Date.now() - 2000);
      expect(runs).toEqual([]);
      // The timer's next firing comes 160 s after the due time (a loaded or paused process): the
      // panel runs with the time it was scheduled for, whose slot is not the late moment's.
      vi.setSystemTime(due + 160_000);
      vi.advanceTimersByTime(1000);
      expect(runs).toEqual([['p', due]]);
      expect(spreader.slotOf('p', due)).not.toBe(spreader.slotOf('p', Date.now()));
      spreader.close();
    } finally {
      vi.useRealTimers();
    }
  });

  it('stops checking an idle panel (no timer keeps running for it)', async () => {
    const ran = vi.fn();
    const spreader = createCheckSpreader({ intervalMs: 10_000, now: Date.now, count: () => 1, run: ran });
    spreader.scheduleAt('p', Date.now());
    await sleep(1100);
    expect(ran).toHaveBeenCalledTimes(1);
    expect(spreader.nextAt('p')).toBeUndefined();
    spreader.close();
  });
});

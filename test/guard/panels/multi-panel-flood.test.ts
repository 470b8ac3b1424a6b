// `panels` mode against random `Host` headers: resolver calls for new hosts are bounded process-wide
// (the excess gets 503 + Retry-After, known hosts are untouched), failures are told as a summary
// without host names, and what is kept per host stays bounded.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import express from 'express';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { type LicenseGuard, type LicenseGuardOptions, licenseGuard } from '../../../src/index.js';
import type { MotherEmulator } from '../../../src/testing.js';
import { startEmulator } from '../../support/helpers.js';

v8.setFlagsFromString('--expose-gc');
const BEATS = { apiKey: 'pk_beats', apiSecret: 'sk_beats_0123456789' };

let emulator: MotherEmulator;
beforeAll(async () => {
  emulator = await startEmulator([{ ...BEATS, active: true, panel: { name: 'Beats' } }]);
});
afterAll(() => emulator.close());
const closing: (() => unknown)[] = [];
afterEach(async () => {
  await Promise.all(closing.splice(0).map((close) => close()));
});

async function serve(options: Partial<LicenseGuardOptions>) {
  const guard: LicenseGuard = licenseGuard({ baseUrl: emulator.url, ...options });
  const app = express();
  app.use(guard);
  app.get('/', (_req, res) => {
    res.send(res.locals.branding.name);
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
  closing.push(
    () => guard.close(),
    () => server.close(),
    () => agent.destroy(),
  );
  const { port } = server.address() as AddressInfo;
  const get = (host: string) =>
    new Promise<{ status: number; headers: http.IncomingHttpHeaders }>((resolve, reject) => {
      const req = http.request({ port, host: '127.0.0.1', path: '/', headers: { Host: host }, agent }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
      });
      req.on('error', reject);
      req.end();
    });
  return { guard, get };
}

describe('panels mode under a flood of new hosts', () => {
  it('bounds resolver calls for new hosts process-wide, answers the excess 503 + Retry-After, and keeps serving a known host', async () => {
    let calls = 0;
    const warn = vi.fn();
    const { get } = await serve({
      logger: { warn, error: warn },
      panels: {
        resolve: async (host) => {
          calls++;
          if (host === 'beats.example') return BEATS;
          // As database drivers do, the error quotes its input: the host.
          if (host.startsWith('t')) throw new Error(`invalid input syntax for type uuid: "${host}"`);
          return null;
        },
        resolvePerSecond: 20,
        resolveBurst: 20,
        resolveConcurrency: 4,
      },
    });
    expect((await get('beats.example')).status).toBe(200);
    const started = performance.now();
    const statuses = new Map<number, number>();
    for (let batch = 0; batch < 12; batch++) {
      const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => get(`${batch % 2 ? 't' : 'r'}${batch}-${i}.flood.example`)));
      for (const { status, headers } of answers) {
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        if (status === 503) {
          expect(Number(headers['retry-after'])).toBeGreaterThanOrEqual(1);
          expect(headers['cache-control']).toBe('no-store');
        }
      }
      // The known host, throughout: never refused, never waiting on the resolver.
      expect((await get('beats.example')).status).toBe(200);
    }
    const seconds = (performance.now() - started) / 1000;
    // The burst, the rate over the time taken, and the known host's one call.
    expect(calls).toBeLessThanOrEqual(20 + Math.ceil(20 * seconds) + 1);
    expect(statuses.get(503)).toBeGreaterThan(0);
    expect(statuses.get(404)).toBeGreaterThan(0);
    expect([...statuses.keys()].sort()).toEqual([404, 503]);
    // One line per interval at most, and never an attacker's host name in it.
    expect(warn.mock.calls.length).toBeLessThanOrEqual(2);
    const logged = JSON.stringify(warn.mock.calls);
    expect(logged).not.toContain('flood.example');
    expect(logged).toMatch(/503 with Retry-After/);
  });

  it('keeps memory bounded for any number of hosts a catch-all resolver maps to one panel', { timeout: 60_000 }, async () => {
    const { get } = await serve({
      logger: { warn: () => {}, error: () => {} },
      panels: { resolve: async () => BEATS, max: 10, resolvePerSecond: 1_000_000, resolveBurst: 1_000_000, resolveConcurrency: 100_000 },
    });
    const gc = vm.runInNewContext('gc') as () => void;
    for (let i = 0; i < 2000; i++) await get(`warm-${i}.catchall.example`);
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let batch = 0; batch < 60; batch++)
      await Promise.all(Array.from({ length: 500 }, async (_, i) => expect((await get(`h${batch}x${i}.catchall.example`)).status).toBe(200)));
    gc();
    // 30,000 hosts: a host kept each would be 2 MB at ~66 B (a spelling cached), 9 MB at ~300 B
    // (answer, route and spelling); the caches of hosts are bounded, so nothing grows.
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(1_500_000);
  });
});

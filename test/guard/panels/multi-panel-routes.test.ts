// `panels` mode's request path for known hosts: routes keyed by the Host header as sent, ended by
// the routes' own clock (no clock read per request), and a panel served only by its routes is
// never taken for idle.
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import express from 'express';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type LicenseGuard, type LicenseGuardOptions, licenseGuard } from '../../../src/index.js';
import { hostKey } from '../../../src/serve/request-host.js';
import type { MotherEmulator } from '../../../src/testing.js';
import { silentLogger } from '../../support/guard-app.js';
import { startEmulator, waitFor } from '../../support/helpers.js';

const BEATS = { apiKey: 'pk_beats', apiSecret: 'sk_beats_0123456789' };
const ACME = { apiKey: 'pk_acme', apiSecret: 'sk_acme_0123456789' };

let emulator: MotherEmulator;
beforeAll(async () => {
  emulator = await startEmulator([
    { ...BEATS, active: true, panel: { name: 'Beats' } },
    { ...ACME, active: true, panel: { name: 'Acme' } },
  ]);
});
afterAll(() => emulator.close());
const guards: LicenseGuard[] = [];
afterEach(async () => {
  await Promise.all(guards.splice(0).map((guard) => guard.close()));
  emulator.reset();
});

function deployment(options: Partial<LicenseGuardOptions>) {
  const guard = licenseGuard({ baseUrl: emulator.url, logger: silentLogger, ...options });
  guards.push(guard);
  const app = express();
  app.use(guard);
  app.get('/', (_req, res) => {
    res.send(res.locals.branding.name);
  });
  return { app, guard };
}

/** Sends raw request head lines (odd casing, repeated headers) and returns the JSON answer. */
function rawGet(port: number, lines: string[]): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () =>
      socket.end(`GET / HTTP/1.1\r\n${lines.map((line) => `${line}\r\n`).join('')}Connection: close\r\n\r\n`),
    );
    let text = '';
    socket.on('data', (chunk) => {
      text += chunk.toString('latin1');
    });
    socket.on('end', () => resolve(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))));
    socket.on('error', reject);
  });
}

describe("panels mode's routes", () => {
  it("keys a request as Express names its host, reading the raw headers (casing, repeats, a proxy's header)", async () => {
    const cases = [
      ['Host: beats.example'],
      ['host: beats.example:8080'],
      ['HOST: Beats.Example'],
      ['Host: beats.example', 'Host: acme.example'],
      ['Host: internal:3000', 'X-Forwarded-Host: beats.example'],
      ['Host: internal:3000', 'x-forwarded-host: acme.example', 'X-Forwarded-Host: beats.example'],
      ['Host: beats.example', 'X-Forwarded-Host: '],
      ['X-Forwarded-Host: acme.example'],
    ];
    for (const trust of [false, true]) {
      const app = express();
      if (trust) app.set('trust proxy', 'loopback');
      app.get('/', (req, res) => {
        res.json({
          key: hostKey(req) ?? null,
          hostname: req.hostname ?? null,
          host: req.headers.host ?? null,
          forwarded: req.headers['x-forwarded-host'] ?? null,
        });
      });
      const server = app.listen(0, '127.0.0.1');
      await new Promise((resolve) => server.once('listening', resolve));
      try {
        const hostnameOf = new Map<unknown, unknown>();
        for (const lines of cases) {
          const seen = await rawGet((server.address() as AddressInfo).port, lines);
          // The Host header itself where no proxy header came; else what Express decided.
          expect(seen.key, lines.join(' | ')).toBe(seen.forwarded === null || seen.forwarded === '' ? seen.host : seen.hostname);
          // One key, one req.hostname: a route never serves a request Express would name otherwise.
          if (hostnameOf.has(seen.key)) expect(hostnameOf.get(seen.key)).toBe(seen.hostname);
          hostnameOf.set(seen.key, seen.hostname);
        }
      } finally {
        server.close();
      }
    }
  });

  it("ends a host's route with the resolver's answer, by the routes' own clock", async () => {
    let panelOfBeats = BEATS;
    const { app } = deployment({ panels: { resolve: async (host) => (host === 'beats.example' ? panelOfBeats : null), resolveTtlMs: 2000 } });
    expect((await request(app).get('/').set('Host', 'beats.example').expect(200)).text).toBe('Beats');
    panelOfBeats = ACME;
    // Within the answer's 2 s the route serves the panel it was made for...
    expect((await request(app).get('/').set('Host', 'beats.example').expect(200)).text).toBe('Beats');
    // ...and after it the host is asked again: its requests move to the new panel.
    await waitFor(async () => (await request(app).get('/').set('Host', 'beats.example')).text === 'Acme', 'the new answer', 6000);
  });

  it('ends routes on time after the event loop was blocked (the tick catches up)', async () => {
    let panelOfBeats = BEATS;
    const { app } = deployment({ panels: { resolve: async (host) => (host === 'beats.example' ? panelOfBeats : null), resolveTtlMs: 6000 } });
    expect((await request(app).get('/').set('Host', 'beats.example').expect(200)).text).toBe('Beats');
    panelOfBeats = ACME;
    // 7 s of a blocked loop: past the answer's 6 s, though the tick's timer fired not once.
    const until = Date.now() + 7000;
    while (Date.now() < until) {
      // busy
    }
    // The route is over: the host is asked again at once (not a route's life of ticks later).
    await waitFor(async () => (await request(app).get('/').set('Host', 'beats.example')).text === 'Acme', 'the new answer', 1500);
  });

  it('never takes a panel served only by its route for idle', async () => {
    let offset = 0;
    const { app, guard } = deployment({
      now: () => Date.now() + offset,
      panels: { resolve: async (host) => (host === 'beats.example' ? BEATS : null), idleMs: 10_000, checkIntervalMs: 10_000 },
    });
    await request(app).get('/').set('Host', 'beats.example').expect(200);
    const checks = () => emulator.requests.filter((r) => r.endpoint === 'license.php').length;
    // Requests by the route alone: the full path saw only the first.
    for (let i = 0; i < 20; i++) await request(app).get('/').set('Host', 'beats.example').expect(200);
    // 16 s later on the guard's clock (a regular check is due), with requests served a moment ago
    // by the route's: the panel is in use, so it gets its check and stays scheduled.
    offset += 16_000;
    await waitFor(() => checks() === 2, 'the regular check', 3000);
    await waitFor(() => typeof guard.status('beats.example')?.nextCheckAt === 'number', 'the next check scheduled', 3000);
  });
});

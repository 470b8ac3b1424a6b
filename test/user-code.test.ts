import express from 'express';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type LicenseGuard, type LicenseGuardOptions, licenseGuard } from '../src/index.js';
import type { MotherEmulator } from '../src/testing.js';
import { API_KEY, API_SECRET, startEmulator } from './support/helpers.js';

// Every call into the host's code is isolated: whatever it throws, even a value whose String()
// throws, cannot change a verdict, skip a transition, or escape into the host app.
const unprintable = () => Object.create(null) as unknown;

let emulator: MotherEmulator;
const guards: LicenseGuard[] = [];
beforeAll(async () => {
  emulator = await startEmulator([{ apiKey: API_KEY, apiSecret: API_SECRET, active: true, panel: { name: 'P' } }]);
});
afterAll(() => emulator.close());
afterEach(() => {
  emulator.setPanel(API_KEY, { active: true, reason: null });
  for (const guard of guards.splice(0)) guard.close();
});

function appWith(options: Partial<LicenseGuardOptions>) {
  const logged: string[] = [];
  const guard = licenseGuard({
    baseUrl: emulator.url,
    apiKey: API_KEY,
    apiSecret: API_SECRET,
    logger: { warn: (m: string) => logged.push(m), error: (m: string) => logged.push(m) },
    ...options,
  });
  guards.push(guard);
  const app = express();
  // A view engine whose templates fail with an unprintable value.
  app.engine('bad', (_path, _options, callback) => callback(unprintable() as Error));
  app.set('views', import.meta.dirname);
  app.use(guard);
  app.get('/dashboard', (_req, res) => {
    res.send('PROTECTED');
  });
  app.use((_error: unknown, _req: express.Request, res: express.Response, next: express.NextFunction) => {
    res.status(299).send('host error handler');
    void next;
  });
  return { app, guard, logged };
}

describe('user code that throws an unprintable value', () => {
  it('an allow predicate: the request gets the lock response', async () => {
    emulator.setPanel(API_KEY, { active: false, reason: 'x' });
    const { app, guard, logged } = appWith({
      allow: [
        () => {
          throw unprintable();
        },
      ],
    });
    expect(await guard.start()).toBe('locked');
    for (let i = 0; i < 3; i++) await request(app).get('/dashboard').set('Accept', 'application/json').expect(503);
    expect(logged.filter((m) => m.includes('predicate threw'))).toHaveLength(1);
  });

  it("a 'change' listener: a verified verdict stays verified", async () => {
    const { guard, logged } = appWith({});
    guard.on('change', () => {
      throw unprintable();
    });
    let second = 0;
    guard.on('change', () => second++);
    expect(await guard.start()).toBe('active');
    expect(guard.status()).toMatchObject({ state: 'active', consecutiveFailures: 0, lastError: null });
    expect(second).toBe(1);
    expect(logged.some((m) => m.includes("'change' listener threw: a thrown value that cannot be shown"))).toBe(true);
  });

  it('a lockView: people get the built-in lock page', async () => {
    emulator.setPanel(API_KEY, { active: false, reason: 'x' });
    const { app, guard } = appWith({ lockView: 'locked.bad' });
    expect(await guard.start()).toBe('locked');
    const res = await request(app).get('/dashboard').set('Accept', 'text/html').expect(503);
    expect(res.text).toContain('id="lock-message"');
  });
});

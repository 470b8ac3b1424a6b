// Test fixture: a small panel app behind licenseGuard(), under Express 4 or 5.
import { resolve } from 'node:path';
import express5 from 'express';
import express4 from 'express4';
import { type LicenseGuard, type LicenseGuardOptions, licenseGuard } from '../../src/index.js';
import type { MotherEmulator } from '../../src/testing.js';
import { API_KEY, API_SECRET } from './helpers.js';

export const EXPRESS_VERSIONS = [
  ['express 5', express5],
  ['express 4', express4],
] as const;

export type ExpressFactory = (typeof EXPRESS_VERSIONS)[number][1];

export const silentLogger = { warn: () => {}, error: () => {} };

export interface GuardedApp {
  app: ReturnType<typeof express5>;
  guard: LicenseGuard;
  /** How many times the host's `locked` view was rendered. */
  renders: () => number;
}

export function guardedApp(express: ExpressFactory, emulator: MotherEmulator, options: Partial<LicenseGuardOptions> = {}): GuardedApp {
  const app = express() as unknown as ReturnType<typeof express5>;
  app.set('views', resolve(import.meta.dirname, '../fixtures/views'));
  app.set('view engine', 'ejs');
  let renders = 0;
  app.locals.renderCount = () => ++renders;
  const guard = licenseGuard({
    baseUrl: emulator.url,
    apiKey: API_KEY,
    apiSecret: API_SECRET,
    allow: ['/healthz', '/static/*'],
    apiPrefix: '/api',
    jitterMs: 0,
    logger: silentLogger,
    ...options,
  });
  app.use(guard);
  app.get('/healthz', (_req, res) => {
    res.json({ ok: true, license: res.locals.license.state });
  });
  app.get('/static/app.css', (_req, res) => {
    res.type('css').send('body{}');
  });
  app.get('/api/data', (_req, res) => {
    res.json({ data: 1 });
  });
  app.get(/.*/, (_req, res) => {
    res.render('page');
  });
  return { app, guard, renders: () => renders };
}

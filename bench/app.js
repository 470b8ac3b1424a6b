// The Express apps under test: one small HTML route, bare, behind licenseGuard, behind helmet, or a lock-page stand-in.
import express from 'express';
import helmet from 'helmet';
import { Redis as IORedis } from 'ioredis';
import { licenseGuard } from 'panel-license-guard';
import { redisLicenseStore } from 'panel-license-guard/redis';
import { createClient } from 'redis';

/** Branding the emulator is configured with; bare and helmet apps use it as a constant, so every body has the same size. */
export const BENCH_BRANDING = Object.freeze({ name: 'Bench Records', color: '#2563eb' });

/** The emulator's panel record for the benchmark's panels (same name and colour as BENCH_BRANDING). */
export const BENCH_PANEL = { name: BENCH_BRANDING.name, brand_color: BENCH_BRANDING.color };

/** Credentials of the two emulated panels: one active, one locked. */
export const PANELS = {
  active: { apiKey: 'bench-active', apiSecret: 'bench-active-secret', active: true, panel: BENCH_PANEL },
  locked: { apiKey: 'bench-locked', apiSecret: 'bench-locked-secret', active: false, reason: 'License suspended for the benchmark.', panel: BENCH_PANEL },
};

/** Hosted panels for the many-panels variant: one host each, all with the same branding (same body). */
export const HOSTED_COUNT = 1000;
export const hostOf = (i) => `panel-${i}.bench.example`;
/** The emulator's records of `count` hosted panels (host `hostOf(i)` is panel i). */
export const hostedPanels = (count) =>
  Array.from({ length: count }, (_, i) => ({ apiKey: `bench-hosted-${i}`, apiSecret: `bench-hosted-secret-${i}`, active: true, panel: BENCH_PANEL }));
export const HOSTED_PANELS = hostedPanels(HOSTED_COUNT);

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const escapeHtml = (value) => String(value).replace(/[&<>"']/g, (c) => ESCAPES[c]);

/** The page every variant serves: it reads `res.locals.branding`, as a host app's template would. */
export function renderHome(branding) {
  const name = escapeHtml(branding.name);
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>${name}</title>
<style>header{background:${branding.color};color:#fff;padding:1rem}body{font:16px system-ui;margin:0}</style></head>
<body><header><h1>${name}</h1></header>
<main><p>Welcome back. Your releases, royalties and reports are below.</p>
<ul><li>Releases this month: 12</li><li>Pending review: 3</li><li>Royalties: $1,204.50</li></ul></main>
</body>
</html>
`;
}

function baseApp() {
  const app = express();
  // ETag off everywhere: otherwise res.send() hashes every body, a cost the guard's lock page
  // does not pay, which would make the baselines slower and the ratios flattering.
  app.set('etag', false);
  app.disable('x-powered-by');
  return app;
}

function mountHome(app) {
  app.get('/', (_req, res) => {
    res.send(renderHome(res.locals.branding ?? BENCH_BRANDING));
  });
}

function guardFor(panel, baseUrl, store, extra = {}) {
  // Far-away schedule and no jitter: the only check is the one at start(), none during the measurement.
  return licenseGuard({ baseUrl, apiKey: panel.apiKey, apiSecret: panel.apiSecret, schedule: '0 0 1 1 *', jitterMs: 0, ...(store && { store }), ...extra });
}

/** Cluster mode's store on a real Redis, with its own prefix per run, on node-redis or ioredis. */
async function redisStore(redisUrl, library = 'node-redis') {
  const prefix = `bench-${process.pid}:`;
  if (library === 'ioredis') {
    const client = new IORedis(redisUrl, { lazyConnect: true });
    client.on('error', () => {});
    await client.connect();
    return { store: redisLicenseStore({ client, prefix }), close: () => client.quit() };
  }
  const client = createClient({ url: redisUrl });
  client.on('error', () => {});
  await client.connect();
  return { store: redisLicenseStore({ client, prefix }), close: () => client.close() };
}

/** Cluster mode's store on PostgreSQL, MySQL/MariaDB or SQLite: a table (or file) of this process's own. */
async function sqlStore(kind, { databaseUrl, mysqlUrl }) {
  const table = `bench_request_${process.pid}`;
  if (kind === 'postgres') {
    const { default: pg } = await import('pg');
    const { postgresLicenseStore } = await import('panel-license-guard/postgres');
    const pool = new pg.Pool({ connectionString: databaseUrl, max: 3 });
    const drop = () => pool.query(`DROP TABLE IF EXISTS "${table}", "${table}_migrations"`).catch(() => {});
    return { store: postgresLicenseStore({ pool, table }), close: () => drop().then(() => pool.end()) };
  }
  if (kind === 'mysql') {
    const { default: mysql } = await import('mysql2/promise');
    const { mysqlLicenseStore } = await import('panel-license-guard/mysql');
    const pool = mysql.createPool({ uri: mysqlUrl, connectionLimit: 3 });
    const drop = () => pool.query(`DROP TABLE IF EXISTS \`${table}\`, \`${table}_migrations\``).catch(() => {});
    return { store: mysqlLicenseStore({ pool, table }), close: () => drop().then(() => pool.end()) };
  }
  const { mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const { sqliteLicenseStore } = await import('panel-license-guard/sqlite');
  const folder = mkdtempSync(join(tmpdir(), 'plg-bench-request-'));
  const store = sqliteLicenseStore({ file: join(folder, 'license.db') });
  const close = () => {
    store.close();
    rmSync(folder, { recursive: true, force: true });
  };
  return { store, close };
}

/** `panels` mode with HOSTED_COUNT panels by host, every one checked (active) before it serves. */
async function panelsGuard(baseUrl) {
  // As the README shows it: the resolver names your id of the panel too (res.locals.panel).
  const byHost = new Map(HOSTED_PANELS.map(({ apiKey, apiSecret }, i) => [hostOf(i), { apiKey, apiSecret, panel: `tenant-${i}` }]));
  // Every host new at once in the warm-up: above the default bound on first resolver calls.
  const guard = licenseGuard({
    baseUrl,
    panels: { resolve: (host) => byHost.get(host) ?? null, max: HOSTED_COUNT, resolveBurst: HOSTED_COUNT, resolveConcurrency: HOSTED_COUNT },
  });
  for (let i = 0; i < HOSTED_COUNT; i += 50) {
    const states = await Promise.all(Array.from({ length: Math.min(50, HOSTED_COUNT - i) }, (_, j) => guard.refresh(hostOf(i + j))));
    if (states.some((state) => state !== 'active')) throw new Error(`bench: a hosted panel started in state ${states.find((s) => s !== 'active')}`);
  }
  return guard;
}

/**
 * Builds one variant. Resolves with `{ app, close }` once the app is ready to serve
 * (for guarded variants: once the first license check has settled).
 * - `bare`: the route alone. `guard`: behind an active licenseGuard. `helmet`: behind helmet().
 * - `guard-redis`: the same guard in cluster mode on a Redis store (`redisUrl`), on node-redis; `guard-ioredis`: on ioredis.
 * - `guard-postgres`, `guard-mysql`, `guard-sqlite`: the same on the SQL license stores (`databaseUrl`, `mysqlUrl`).
 * - `panels`: `panels` mode with HOSTED_COUNT panels (requests rotate over their hosts).
 * - `noop`: behind `(req, res, next) => next()`: what any one middleware costs in Express, the guard's floor.
 * - `locked`: behind a locked licenseGuard (every request gets the lock page).
 * - `static-lock`: a route that res.send()s `lockHtml` (the lock page's bytes) with the same status.
 * - `guard-untraced`: `guard` with `tracing: false`; `guard-traced`: `guard` with an OpenTelemetry SDK registered (figure 14).
 */
export async function buildApp({ variant, baseUrl, lockHtml, redisUrl, databaseUrl, mysqlUrl }) {
  const app = baseApp();
  let guard;
  let redis;
  const sqlKind = { 'guard-postgres': 'postgres', 'guard-mysql': 'mysql', 'guard-sqlite': 'sqlite' }[variant];
  // Figure 14: `tracing: false` (the API never loaded), and the default with an SDK registered.
  if (variant === 'guard-traced') await (await import('./tracing.js')).registerNoopSdk();
  if (variant === 'guard-untraced') guard = guardFor(PANELS.active, baseUrl, undefined, { tracing: false });
  else if (variant === 'guard-traced') guard = guardFor(PANELS.active, baseUrl);
  if (guard) {
    if ((await guard.start()) !== 'active') throw new Error(`bench: the ${variant} guard did not start active`);
    app.use(guard);
  } else if (variant === 'guard' || variant === 'locked' || variant === 'guard-redis' || variant === 'guard-ioredis' || sqlKind) {
    if (variant === 'guard-redis') redis = await redisStore(redisUrl);
    if (variant === 'guard-ioredis') redis = await redisStore(redisUrl, 'ioredis');
    if (sqlKind) redis = await sqlStore(sqlKind, { databaseUrl, mysqlUrl });
    guard = guardFor(variant === 'locked' ? PANELS.locked : PANELS.active, baseUrl, redis?.store);
    const state = await guard.start();
    const expected = variant === 'locked' ? 'locked' : 'active';
    if (state !== expected) throw new Error(`bench: the ${variant} guard started in state "${state}", expected "${expected}"`);
    app.use(guard);
  } else if (variant === 'panels') {
    guard = await panelsGuard(baseUrl);
    app.use(guard);
  } else if (variant === 'noop') {
    app.use((_req, _res, next) => next());
  } else if (variant === 'helmet') {
    app.use(helmet());
  } else if (variant === 'static-lock') {
    if (typeof lockHtml !== 'string') throw new TypeError('bench: the static-lock variant needs `lockHtml`');
    app.get('/', (_req, res) => {
      res.status(503).type('html').send(lockHtml);
    });
    return { app, close: () => {} };
  } else if (variant !== 'bare') {
    throw new TypeError(`bench: unknown variant "${variant}"`);
  }
  mountHome(app);
  return { app, close: () => guard?.close().then(() => redis?.close()) };
}

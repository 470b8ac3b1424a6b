// One outbox for many panels: each release under its own panel's credentials, to its own mother, fairly.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { MotherEmulator } from '../../../src/emulator/emulator.js';
import type { OutboxPanelCredentials } from '../../../src/outbox/options.js';
import { createReleaseOutbox, type ReleaseOutbox } from '../../../src/outbox/outbox.js';
import type { OutboxStore } from '../../../src/outbox/store.js';
import { memoryOutboxStore } from '../../../src/outbox/stores/memory/memory-store.js';
import { mysqlOutboxStore } from '../../../src/outbox/stores/mysql/mysql-store.js';
import { postgresOutboxStore } from '../../../src/outbox/stores/postgres/postgres-store.js';
import { sqliteOutboxStore } from '../../../src/outbox/stores/sqlite/sqlite-store.js';
import { failure, sleep, startEmulator, waitFor } from '../../support/helpers.js';
import { DATABASE_URL, MYSQL_URL, mysqlAnswers, postgresAnswers, serviceAvailable } from '../../support/services.js';

// Two mothers, as the contract allows: tenants 1 and 2 on the first, tenant 3 on the second.
const KEYS = { t1: 'pk_tenant_1', t2: 'pk_tenant_2', t3: 'pk_tenant_3' };
const SECRET = (key: string) => `sk_${key}_0123456789`;
let first: MotherEmulator;
let second: MotherEmulator;
const dir = mkdtempSync(join(tmpdir(), 'outbox-panels-'));
const havePostgres = serviceAvailable('PostgreSQL', DATABASE_URL, await postgresAnswers());
const pool = havePostgres ? new pg.Pool({ connectionString: DATABASE_URL, max: 8 }) : undefined;
const schema = `test_panels_${process.pid}`;
const haveMysql = serviceAvailable('MySQL/MariaDB', MYSQL_URL, await mysqlAnswers());
const mysqlPool = haveMysql ? mysql.createPool({ uri: MYSQL_URL, connectionLimit: 8 }) : undefined;
const mysqlTables: string[] = [];
beforeAll(async () => {
  first = await startEmulator([KEYS.t1, KEYS.t2].map((apiKey) => ({ apiKey, apiSecret: SECRET(apiKey) })));
  second = await startEmulator([{ apiKey: KEYS.t3, apiSecret: SECRET(KEYS.t3) }]);
});
afterAll(async () => {
  await Promise.all([first.close(), second.close()]);
  rmSync(dir, { recursive: true, force: true });
  await pool?.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool?.end();
  for (const table of mysqlTables) await mysqlPool?.query(`DROP TABLE IF EXISTS ${table}, ${table}_tracks, ${table}_migrations, ${table}_controls`);
  await mysqlPool?.end();
});
const opened: ReleaseOutbox[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((outbox) => outbox.close()));
  for (const mother of [first, second]) {
    mother.setFaults({});
    mother.reset();
  }
});

/** The tenants table of a hosting provider: tenant id → credentials (and mother). */
const tenants = new Map<string, OutboxPanelCredentials>();
function resetTenants() {
  tenants.clear();
  tenants.set('tenant-1', { apiKey: KEYS.t1, apiSecret: SECRET(KEYS.t1) });
  tenants.set('tenant-2', { apiKey: KEYS.t2, apiSecret: SECRET(KEYS.t2) });
  tenants.set('tenant-3', { apiKey: KEYS.t3, apiSecret: SECRET(KEYS.t3), baseUrl: second.url });
}

const FAST = { baseDelayMs: 20, maxDelayMs: 200, authRetryDelayMs: 300, pollIntervalMs: 20, random: () => 0.5 } as const;
function manyOutbox(store: OutboxStore, options: Partial<Parameters<typeof createReleaseOutbox>[0]> = {}) {
  resetTenants();
  const outbox = createReleaseOutbox({
    store,
    baseUrl: first.url,
    panels: { resolve: async (panel) => tenants.get(panel) ?? null, unresolvedRetryMs: 100, resolveTtlMs: 50 },
    timeoutMs: 2000,
    logger: { warn: vi.fn(), error: vi.fn() },
    ...FAST,
    ...options,
  });
  opened.push(outbox);
  return outbox;
}
const drained = (outbox: ReleaseOutbox) => outbox.drain({ signal: AbortSignal.timeout(15_000) });
const received = () => [...first.releases, ...second.releases];
const keyOf = (title: string) => received().find((r) => r.release.title === title)?.apiKey;

let tables = 0;
const stores: [string, () => OutboxStore][] = [
  ['memory', () => memoryOutboxStore()],
  ['SQLite', () => sqliteOutboxStore({ file: join(dir, `panels-${++tables}.db`) })],
  ...(pool ? [['PostgreSQL', () => postgresOutboxStore({ pool, schema, table: `panels_${++tables}` })] as [string, () => OutboxStore]] : []),
  ...(mysqlPool
    ? [
        [
          'MySQL',
          () => {
            const table = `test_panels_${process.pid}_${++tables}`;
            mysqlTables.push(table);
            return mysqlOutboxStore({ pool: mysqlPool, table });
          },
        ] as [string, () => OutboxStore],
      ]
    : []),
];

describe.each(stores)('createReleaseOutbox({ panels }) on %s', (_name, makeStore) => {
  it("sends every panel's releases with its own key to its own mother", async () => {
    const outbox = manyOutbox(makeStore());
    for (let i = 0; i < 4; i++)
      for (const panel of ['tenant-1', 'tenant-2', 'tenant-3']) await outbox.enqueue({ title: `${panel} song ${i}`, remote_track_id: `trk-${i}` }, { panel });
    await drained(outbox);
    expect(first.releases).toHaveLength(8);
    expect(second.releases).toHaveLength(4);
    for (const r of received()) expect(r.apiKey).toBe(tenants.get(String(r.release.title).split(' ')[0] as string)?.apiKey);
    expect(await outbox.stats({ panel: 'tenant-3' })).toMatchObject({ panel: 'tenant-3', pending: 0, delivered: 4 });
    // De-duplication is per panel: the same track id and content in another panel is its own release.
    expect((await outbox.enqueue({ title: 'tenant-1 song 0', remote_track_id: 'trk-0' }, { panel: 'tenant-1' })).deduplicated).toBe('already-delivered');
    expect((await outbox.enqueue({ title: 'tenant-1 song 0', remote_track_id: 'trk-0' }, { panel: 'tenant-2' })).deduplicated).toBeUndefined();
  });

  it('sends panels whose ids a driver could fold into one each under its own key, and refuses an id no store keeps', async () => {
    const outbox = manyOutbox(makeStore());
    // Tenant ids that differ only by what a cut emoji or a normalisation would change.
    tenants.set('tenant\uFFFD', { apiKey: KEYS.t1, apiSecret: SECRET(KEYS.t1) });
    tenants.set('tenant😀', { apiKey: KEYS.t2, apiSecret: SECRET(KEYS.t2) });
    tenants.set('caf\u00e9', { apiKey: KEYS.t3, apiSecret: SECRET(KEYS.t3), baseUrl: second.url });
    tenants.set('cafe\u0301', { apiKey: KEYS.t1, apiSecret: SECRET(KEYS.t1) });
    const sent = new Map([
      ['tenant\uFFFD', KEYS.t1],
      ['tenant😀', KEYS.t2],
      ['caf\u00e9', KEYS.t3],
      ['cafe\u0301', KEYS.t1],
    ]);
    const ids = new Set<number>();
    for (const panel of sent.keys()) ids.add((await outbox.enqueue({ title: `song of ${panel}`, remote_track_id: 'song-1' }, { panel })).id);
    expect(ids.size).toBe(4);
    // `name.slice(0, n)` that cut an emoji: refused, never stored as another tenant's id.
    for (const panel of ['tenant\uD83D', 'tenant\uDE00', 'caf\uD800'])
      await expect(outbox.enqueue({ title: 'cut', remote_track_id: 'song-1' }, { panel })).rejects.toThrow(/well-formed Unicode/);
    // Nor does a read find another track's rows through what the driver would make of a cut id.
    await expect(outbox.list({ panel: 'tenant\uFFFD', track: 'song-\uD800' })).rejects.toThrow(/well-formed Unicode/);
    await drained(outbox);
    expect(
      received()
        .map((r) => [r.release.title, r.apiKey])
        .sort(),
    ).toEqual([...sent].map(([panel, key]) => [`song of ${panel}`, key]).sort());
    for (const panel of sent.keys()) expect(await outbox.stats({ panel })).toMatchObject({ panel, pending: 0, delivered: 1 });
  });

  it('lets a panel the resolver does not know wait, without holding back the others', async () => {
    const outbox = manyOutbox(makeStore());
    const errors: { panel?: string | undefined; error: Error }[] = [];
    outbox.on('error', (event) => errors.push(event));
    for (let i = 0; i < 3; i++) await outbox.enqueue({ title: `ghost ${i}` }, { panel: 'tenant-404' });
    for (let i = 0; i < 3; i++) await outbox.enqueue({ title: `tenant-1 ${i}` }, { panel: 'tenant-1' });
    await waitFor(async () => (await outbox.stats({ panel: 'tenant-1' })).delivered === 3, "tenant-1's releases");
    await waitFor(() => errors.length > 0, 'the unresolved panel reported');
    expect(errors[0]).toMatchObject({
      panel: 'tenant-404',
      error: { code: 'PANEL_UNRESOLVED', message: expect.stringMatching(/knows no panel "tenant-404"/) },
    });
    const waiting = await outbox.list({ panel: 'tenant-404' });
    expect(waiting.map((entry) => entry.state)).toEqual(['pending', 'pending', 'pending']);
    expect(waiting.some((entry) => /knows no panel/.test(entry.lastError ?? ''))).toBe(true);
    expect(await outbox.panelStats()).toEqual([{ panel: 'tenant-404', pending: 3, dead: 0, oldestPendingAt: expect.any(Number) }]);
    // Provisioned later: its releases go out at the next retry, with its own key.
    tenants.set('tenant-404', { apiKey: KEYS.t2, apiSecret: SECRET(KEYS.t2) });
    await drained(outbox);
    expect(keyOf('ghost 0')).toBe(KEYS.t2);
  });

  it("keeps a panel whose mother is down from holding back another mother's panels, probing it one release at a time", async () => {
    const outbox = manyOutbox(makeStore(), { concurrency: 4 });
    second.setFaults({ down: true });
    for (let i = 0; i < 20; i++) await outbox.enqueue({ title: `tenant-3 ${i}` }, { panel: 'tenant-3' });
    for (let i = 0; i < 20; i++) await outbox.enqueue({ title: `tenant-1 ${i}` }, { panel: 'tenant-1' });
    await waitFor(async () => (await outbox.stats({ panel: 'tenant-1' })).delivered === 20, "tenant-1's releases");
    await sleep(300);
    // Backing off as a whole: probes one release at a time, never every row failing on its own
    // (that is 20 rows, each retried). How many probes fit depends on how long tenant-1 takes,
    // which a loaded machine stretches: 12–13 were seen with both cores busy.
    const probes = second.requests.length;
    expect(probes).toBeGreaterThan(0);
    expect(probes).toBeLessThan(20);
    expect((await outbox.stats()).failingPanels).toBe(1);
    second.setFaults({});
    await drained(outbox);
    expect(second.releases).toHaveLength(20);
  });

  it("delivers one panel's single release right behind another panel's backlog, not after it", async () => {
    const outbox = manyOutbox(makeStore(), { concurrency: 2, autoStart: false });
    for (let i = 0; i < 200; i++) await outbox.enqueue({ title: `backlog ${i}` }, { panel: 'tenant-1' });
    first.setFaults({ delayMs: 5 });
    outbox.start();
    await waitFor(() => first.releases.length >= 20, 'the backlog under way');
    await outbox.enqueue({ title: 'the single release' }, { panel: 'tenant-2' });
    const before = first.releases.length;
    await waitFor(() => keyOf('the single release') !== undefined, 'the single release');
    const position = first.releases.findIndex((r) => r.release.title === 'the single release');
    // At most the pushes already in flight (concurrency) and one more go before it.
    expect(position - before).toBeLessThanOrEqual(3);
    expect(first.releases.length).toBeLessThan(200);
  });
});

describe('createReleaseOutbox({ panels }) credentials past their TTL', () => {
  it('never waits on a hanging resolver for a known panel, and takes a fast answer (a rotated key) at once', async () => {
    resetTenants();
    let hang = false;
    const outbox = createReleaseOutbox({
      store: memoryOutboxStore(),
      baseUrl: first.url,
      // resolveTimeoutMs is long: a delivery that waited for the resolver would take 5 s.
      panels: { resolve: async (panel) => (hang ? new Promise(() => {}) : (tenants.get(panel) ?? null)), resolveTtlMs: 1, resolveTimeoutMs: 5000 },
      logger: { warn: vi.fn(), error: vi.fn() },
      ...FAST,
    });
    opened.push(outbox);
    await outbox.enqueue({ title: 'before' }, { panel: 'tenant-1' });
    await drained(outbox);
    hang = true;
    await sleep(5);
    const began = Date.now();
    await outbox.enqueue({ title: 'while the resolver hangs' }, { panel: 'tenant-1' });
    await waitFor(() => keyOf('while the resolver hangs') === KEYS.t1, 'the delivery with the known credentials', 3000);
    expect(Date.now() - began).toBeLessThan(2000);
    // A resolver that answers within the short wait: its new credentials are used at once.
    const moving = createReleaseOutbox({
      store: memoryOutboxStore(),
      baseUrl: first.url,
      panels: { resolve: async (panel) => tenants.get(panel) ?? null, resolveTtlMs: 1 },
      logger: { warn: vi.fn(), error: vi.fn() },
      ...FAST,
    });
    opened.push(moving);
    await moving.enqueue({ title: 'before the move' }, { panel: 'tenant-1' });
    await drained(moving);
    tenants.set('tenant-1', { apiKey: KEYS.t2, apiSecret: SECRET(KEYS.t2) });
    await sleep(5);
    await moving.enqueue({ title: 'after the move' }, { panel: 'tenant-1' });
    await waitFor(() => keyOf('after the move') !== undefined, 'the delivery after the move');
    expect(keyOf('after the move')).toBe(KEYS.t2);
  });
});

describe('createReleaseOutbox({ panels }) options', () => {
  const store = memoryOutboxStore();
  const resolve = () => null;
  it('names what is wrong, and the fix', async () => {
    const client = { panelId: 'x', pushSerializedRelease: async () => ({ ok: true as const, release_id: 1 }) };
    expect(() => createReleaseOutbox({ store, client, panels: { resolve } })).toThrow(/`client` was given together with `panels`/);
    expect(() => createReleaseOutbox({ store, panels: {} as never })).toThrow(/`panels.resolve` is required/);
    expect(() => createReleaseOutbox({ store, panels: { resolve, ttl: 5 } as never })).toThrow(/`panels.ttl` is not a panels option/);
    expect(() => createReleaseOutbox({ store, client, baseUrl: 'https://mother.example/api' })).toThrow(/`baseUrl` is for `panels`/);
    expect(() => createReleaseOutbox({ store, panels: { resolve }, baseUrl: 'ftp://mother.example/' })).toThrow(/baseUrl/);
    expect(() => createReleaseOutbox({ store, client: { pushSerializedRelease: client.pushSerializedRelease } })).toThrow(/`client` has no `panelId`/);
    const many = createReleaseOutbox({ store, panels: { resolve }, autoStart: false });
    opened.push(many);
    expect(await failure(many.enqueue({ title: 'x' }))).toMatchObject({ message: expect.stringMatching(/enqueue\(\) needs `panel`/) });
    expect(await failure(many.enqueue({ title: 'x' }, { panel: 'a\nb' }))).toMatchObject({ message: expect.stringMatching(/no control characters/) });
    const single = createReleaseOutbox({ store, client, autoStart: false });
    opened.push(single);
    expect(await failure(single.enqueue({ title: 'x' }, { panel: 'tenant-1' }))).toMatchObject({ message: expect.stringMatching(/sends for one panel/) });
  });
});

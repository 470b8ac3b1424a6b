// Two panels' outboxes on one table: every release goes out under its own panel's key, never another's.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createMotherClient } from '../../../src/client/mother-client.js';
import { loadSqliteDriver } from '../../../src/db/sqlite-driver.js';
import type { MotherEmulator } from '../../../src/emulator/emulator.js';
import { createReleaseOutbox, type ReleaseOutbox } from '../../../src/outbox/outbox.js';
import type { OutboxStore } from '../../../src/outbox/store.js';
import { memoryOutboxStore } from '../../../src/outbox/stores/memory/memory-store.js';
import { postgresOutboxStore } from '../../../src/outbox/stores/postgres/postgres-store.js';
import { sqliteOutboxStore } from '../../../src/outbox/stores/sqlite/sqlite-store.js';
import { sleep, startEmulator, waitFor } from '../../support/helpers.js';
import { DATABASE_URL, postgresAnswers, serviceAvailable } from '../../support/services.js';

const PANEL_A = { apiKey: 'pk_reseller_a', apiSecret: 'sk_reseller_a_0123456789' };
const PANEL_B = { apiKey: 'pk_reseller_b', apiSecret: 'sk_reseller_b_0123456789' };

let emulator: MotherEmulator;
const dir = mkdtempSync(join(tmpdir(), 'outbox-shared-'));
const havePostgres = serviceAvailable('PostgreSQL', DATABASE_URL, await postgresAnswers());
const pool = havePostgres ? new pg.Pool({ connectionString: DATABASE_URL, max: 6 }) : undefined;
const schema = `test_shared_${process.pid}`;
let tables = 0;
beforeAll(async () => {
  emulator = await startEmulator([PANEL_A, PANEL_B]);
});
afterAll(async () => {
  await emulator.close();
  rmSync(dir, { recursive: true, force: true });
  await pool?.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool?.end();
});
const opened: ReleaseOutbox[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((outbox) => outbox.close()));
  emulator.reset();
});

const quiet = () => ({ warn: vi.fn(), error: vi.fn() });
function outboxOf(panel: typeof PANEL_A, store: OutboxStore, options: { autoStart?: boolean; logger?: ReturnType<typeof quiet> } = {}) {
  const client = createMotherClient({ baseUrl: emulator.url, ...panel, timeoutMs: 2000 });
  const outbox = createReleaseOutbox({ client, store, pollIntervalMs: 20, logger: quiet(), ...options });
  opened.push(outbox);
  return outbox;
}
const keysOf = (title: RegExp) => emulator.releases.filter((r) => title.test(String(r.release.title))).map((r) => r.apiKey);

let files = 0;
/** Two stores on one table, as two processes (or two outboxes of one process) would open it. */
const tablesOf: [string, () => [OutboxStore, OutboxStore]][] = [
  [
    'memory',
    () => {
      const store = memoryOutboxStore();
      return [store, store];
    },
  ],
  [
    'SQLite',
    () => {
      const file = join(dir, `shared-${++files}.db`);
      return [sqliteOutboxStore({ file }), sqliteOutboxStore({ file })];
    },
  ],
  ...(pool
    ? [
        [
          'PostgreSQL',
          () => {
            const table = `shared_${++tables}`;
            return [postgresOutboxStore({ pool, schema, table }), postgresOutboxStore({ pool, schema, table })];
          },
        ] as [string, () => [OutboxStore, OutboxStore]],
      ]
    : []),
];

describe.each(tablesOf)('two single-panel outboxes on one %s table', (_name, open) => {
  it("never sends panel A's releases under panel B's key, even with A's outbox stopped", async () => {
    const [storeA, storeB] = open();
    const a = outboxOf(PANEL_A, storeA, { autoStart: false });
    for (let i = 0; i < 10; i++) await a.enqueue({ title: `A ${i}`, remote_track_id: `a-${i}` });
    const b = outboxOf(PANEL_B, storeB);
    await b.enqueue({ title: 'B 0', remote_track_id: 'b-0' });
    await b.drain({ signal: AbortSignal.timeout(10_000) });
    await sleep(150); // several polls of B's worker
    expect(keysOf(/^B/)).toEqual([PANEL_B.apiKey]);
    expect(keysOf(/^A/)).toEqual([]);
    expect((await b.stats()).pending).toBe(0);
    expect((await a.stats()).pending).toBe(10);
    a.start();
    await a.drain({ signal: AbortSignal.timeout(10_000) });
    expect(keysOf(/^A/)).toEqual(Array(10).fill(PANEL_A.apiKey));
  });

  it('de-duplicates per panel: one track id in two panels is two tracks', async () => {
    const [storeA, storeB] = open();
    const a = outboxOf(PANEL_A, storeA, { autoStart: false });
    const b = outboxOf(PANEL_B, storeB, { autoStart: false });
    const first = await a.enqueue({ title: 'Same id, panel A', remote_track_id: 'trk-1' });
    const second = await b.enqueue({ title: 'Same id, panel B', remote_track_id: 'trk-1' });
    expect(second.deduplicated).toBeUndefined();
    expect(second.id).not.toBe(first.id);
    expect((await a.list()).map((entry) => entry.release.title)).toEqual(['Same id, panel A']);
    expect((await b.list()).map((entry) => entry.release.title)).toEqual(['Same id, panel B']);
    expect(await a.get(second.id)).toBeUndefined(); // another panel's row is not this outbox's to see
  });
});

describe('a table written before rows recorded their panel', () => {
  /** Rows as the previous version left them: the file or table migrated in place, panel ''. */
  const legacyTables: [string, () => Promise<[OutboxStore, OutboxStore]>][] = [
    [
      'SQLite',
      async () => {
        const file = join(dir, `legacy-${++files}.db`);
        const seed = sqliteOutboxStore({ file });
        for (let i = 0; i < 5; i++)
          await seed.enqueue(
            { panel: 'x', remoteTrackId: `old-${i}`, body: JSON.stringify({ release: { title: `Old ${i}` } }), contentHash: `h${i}` },
            Date.now(),
          );
        seed.close();
        // Back to schema v2: no panel column.
        const db = new (loadSqliteDriver())(file);
        db.exec(
          'DROP INDEX release_outbox_panel_due; DROP INDEX release_outbox_panel_track; DROP INDEX release_outbox_list; DROP INDEX release_outbox_panel_list; DROP INDEX release_outbox_track_list',
        );
        // And what later versions added: the feed's index (it names the panel) and the trace context.
        db.exec('DROP INDEX release_outbox_feed');
        db.exec('ALTER TABLE release_outbox DROP COLUMN panel');
        db.exec('ALTER TABLE release_outbox DROP COLUMN trace_context');
        db.pragma('user_version = 2');
        db.close();
        return [sqliteOutboxStore({ file }), sqliteOutboxStore({ file })];
      },
    ],
    ...(pool
      ? [
          [
            'PostgreSQL',
            async () => {
              const table = `legacy_${++tables}`;
              const seed = postgresOutboxStore({ pool, schema, table });
              for (let i = 0; i < 5; i++)
                await seed.enqueue(
                  { panel: 'x', remoteTrackId: `old-${i}`, body: JSON.stringify({ release: { title: `Old ${i}` } }), contentHash: `h${i}` },
                  Date.now(),
                );
              // Back to schema v3: no panel column, the one-pending-row index on the track alone.
              await pool.query(`ALTER TABLE "${schema}"."${table}" DROP COLUMN panel`);
              await pool.query(`CREATE UNIQUE INDEX "${table}_pending" ON "${schema}"."${table}" (remote_track_id) WHERE state = 'pending'`);
              await pool.query(`DELETE FROM "${schema}"."${table}_migrations" WHERE version >= 4`);
              return [postgresOutboxStore({ pool, schema, table }), postgresOutboxStore({ pool, schema, table })];
            },
          ] as [string, () => Promise<[OutboxStore, OutboxStore]>],
        ]
      : []),
  ];

  describe.each(legacyTables)('on %s', (_name, open) => {
    it('is migrated in place; its rows are sent by nobody until the panel that stored them adopts them', async () => {
      const [storeA, storeB] = await open();
      const logger = quiet();
      const b = outboxOf(PANEL_B, storeB, { logger });
      await b.enqueue({ title: 'New B', remote_track_id: 'old-1' });
      await b.drain({ signal: AbortSignal.timeout(10_000) });
      await sleep(150);
      expect(emulator.releases.map((r) => r.release.title)).toEqual(['New B']);
      await waitFor(() => logger.warn.mock.calls.length > 0, 'the warning about rows without a panel');
      expect(String(logger.warn.mock.calls[0]?.[0])).toMatch(/5 pending releases were stored before releases recorded their panel.*adoptUnassigned/);
      const a = outboxOf(PANEL_A, storeA);
      await a.enqueue({ title: 'Delivered Old 2', remote_track_id: 'old-2' });
      await a.drain({ signal: AbortSignal.timeout(10_000) });
      await a.enqueue({ title: 'Newer Old 4', remote_track_id: 'old-4' });
      // Old 2 and Old 4 give way to the newer content panel A stored since (delivered, pending):
      // sending them now would put older content over newer at the mother.
      expect(await a.adoptUnassigned()).toBe(5);
      await a.drain({ signal: AbortSignal.timeout(10_000) });
      expect(keysOf(/Old/).every((key) => key === PANEL_A.apiKey)).toBe(true);
      const sent = emulator.releases.map((r) => String(r.release.title)).filter((t) => /Old/.test(t));
      expect(sent.sort()).toEqual(['Delivered Old 2', 'Newer Old 4', 'Old 0', 'Old 1', 'Old 3']);
      expect(await a.stats()).toMatchObject({ pending: 0, dead: 2 });
      const dead = await a.list({ state: 'dead' });
      expect(dead.map((entry) => entry.lastError)).toEqual(Array(2).fill(expect.stringMatching(/Superseded when rows without a panel were adopted/)));
    });
  });
});

describe('a custom store that ignores `panel`', () => {
  it("still never sends another panel's row: the worker refuses it and says so", async () => {
    const shared = memoryOutboxStore();
    await shared.enqueue({ panel: 'someone-else', remoteTrackId: 'x', body: JSON.stringify({ release: { title: 'Not mine' } }), contentHash: 'h' }, Date.now());
    // A store written before rows had a panel: it claims whatever is due.
    const careless: OutboxStore = { ...shared, claimDue: (request) => shared.claimDue({ ...request, panel: 'someone-else' }) };
    const errors: unknown[] = [];
    const b = outboxOf(PANEL_B, careless);
    b.on('error', (event) => errors.push(event));
    await waitFor(() => errors.length > 0, 'the refusal');
    expect(errors[0]).toMatchObject({ panel: 'someone-else', error: { code: 'PANEL_MISMATCH' } });
    expect(emulator.releases).toEqual([]);
  });
});

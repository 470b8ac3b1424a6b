import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { loadSqliteDriver } from '../../src/db/sqlite-driver.js';
import type { PrunedEvent } from '../../src/outbox/events.js';
import type { ReleaseOutboxOptions } from '../../src/outbox/options.js';
import { createReleaseOutbox, type ReleaseOutbox } from '../../src/outbox/outbox.js';
import type { OutboxStore } from '../../src/outbox/store.js';
import { memoryOutboxStore } from '../../src/outbox/stores/memory/memory-store.js';
import { sqliteOutboxStore } from '../../src/outbox/stores/sqlite/sqlite-store.js';
import { postgresOutboxStore } from '../../src/postgres.js';
import { serializeRelease } from '../../src/release.js';
import { waitFor } from '../support/helpers.js';
import { DATABASE_URL, postgresAnswers, serviceAvailable } from '../support/services.js';

// Retention through the outbox: options, the background pass, and a 100,000-row history pruned
// in batches while enqueues go on (SQLite and PostgreSQL). The row rules are in outbox-store.test.ts.
const DAY = 24 * 60 * 60_000;
const client = { panelId: 'panel-a', pushSerializedRelease: async () => ({ ok: true as const, release_id: 1 }) };
const dir = mkdtempSync(join(tmpdir(), 'outbox-retention-'));
const havePostgres = serviceAvailable('PostgreSQL', DATABASE_URL, await postgresAnswers());
const pool = havePostgres ? new pg.Pool({ connectionString: DATABASE_URL, max: 6 }) : undefined;
const schema = `test_retention_${process.pid}`;
afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  await pool?.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool?.end();
});
const opened: ReleaseOutbox[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((outbox) => outbox.close()));
});

function outboxOn(store: OutboxStore, options: Partial<ReleaseOutboxOptions> = {}) {
  const outbox = createReleaseOutbox({ client, store, autoStart: false, ...options });
  opened.push(outbox);
  return outbox;
}

/** Delivers one release through the store directly, `ageDays` ago. */
async function deliveredLongAgo(store: OutboxStore, title: string, track: string | undefined, ageDays: number) {
  const at = Date.now() - ageDays * DAY;
  const body = JSON.stringify({ release: { title, primary_artist: 'Ada', ...(track ? { remote_track_id: track } : {}) } });
  await store.enqueue({ panel: 'panel-a', remoteTrackId: track, body, contentHash: `h:${body}` }, at);
  const [claimed] = await store.claimDue({ panel: 'panel-a', owner: 'seed', limit: 1, nowMs: at, leaseMs: 60_000 });
  if (!claimed) throw new Error('expected a due row');
  await store.settle(claimed, 'seed', { kind: 'delivered', releaseId: 1 }, at);
}

describe('retention', () => {
  it('names bad options', () => {
    const store = memoryOutboxStore();
    const make = (retention: unknown) => () => createReleaseOutbox({ client, store, autoStart: false, retention: retention as never });
    expect(make('30d')).toThrow(/`retention` must be an object or false/);
    expect(make({ deliveredMs: -1 })).toThrow(/`retention.deliveredMs` must be an integer of at least 1/);
    expect(make({ deadMs: 1.5, batchSize: 0 })).toThrow(/`retention.deadMs`[\s\S]*`retention.batchSize` must be an integer from 1 to 10000/);
    expect(make({ keepDays: 3 })).toThrow(/`retention.keepDays` is not a retention option/);
    const { prune: _prune, ...withoutPrune } = store;
    expect(() => createReleaseOutbox({ client, store: withoutPrune, retention: { deliveredMs: 1 } })).toThrow(/`retention` needs a store with a `prune\(\)`/);
  });

  it('runs a pass now on prune(), reports it, and keeps everything with `retention: false`', async () => {
    const store = memoryOutboxStore();
    await deliveredLongAgo(store, 'Old', undefined, 40);
    await deliveredLongAgo(store, 'Recent', undefined, 10);
    expect(await outboxOn(store, { retention: false }).prune()).toBe(0);
    const outbox = outboxOn(store);
    const pruned: PrunedEvent[] = [];
    outbox.on('pruned', (event) => pruned.push(event));
    expect(await outbox.prune()).toBe(1);
    expect(pruned).toMatchObject([{ deleted: 1 }]);
    expect((await outbox.list()).map((entry) => entry.release.title)).toEqual(['Recent']);
  });

  it('runs in the background every `intervalMs` once started', async () => {
    const store = memoryOutboxStore();
    await deliveredLongAgo(store, 'Old', undefined, 2);
    const outbox = outboxOn(store, { retention: { deliveredMs: DAY, intervalMs: 30 } });
    const pruned = vi.fn();
    outbox.on('pruned', pruned);
    outbox.start();
    await waitFor(() => pruned.mock.calls.length > 0, 'a background retention pass');
    expect((await outbox.stats()).delivered).toBe(0);
  });

  it('ends a pass under way when the outbox closes, between two batches', async () => {
    const store = memoryOutboxStore();
    for (let i = 0; i < 40; i++) await deliveredLongAgo(store, `Old ${i}`, undefined, 40);
    const slow = {
      ...store,
      prune: async (request: Parameters<NonNullable<OutboxStore['prune']>>[0]) => {
        const started = Date.now();
        while (Date.now() - started < 20); // a batch that takes 20 ms: the rest after it does too
        return (store.prune as NonNullable<OutboxStore['prune']>)(request);
      },
    };
    const outbox = createReleaseOutbox({ client, store: slow, autoStart: false, retention: { batchSize: 1 } });
    const pass = outbox.prune();
    await new Promise((resolve) => setTimeout(resolve, 100));
    await outbox.close();
    const deleted = await pass;
    expect(deleted).toBeGreaterThan(0);
    expect(deleted).toBeLessThan(40);
  });

  it('reports a failing pass as an error, once per interval', async () => {
    const store = memoryOutboxStore();
    const failing = { ...store, prune: () => Promise.reject(new Error('database is down')) };
    const outbox = outboxOn(failing, { retention: { intervalMs: 20 } });
    const errors = vi.fn();
    outbox.on('error', errors);
    await expect(outbox.prune()).rejects.toThrow('database is down');
    outbox.start();
    await waitFor(() => errors.mock.calls.length > 0, 'the error event');
    expect(errors.mock.calls[0]?.[0].error.message).toBe('database is down');
  });
});

// A history of 20,000 tracks delivered five times each, 40 days ago: 80,000 rows may go.
const TRACKS = 20_000;
const HISTORY = TRACKS * 5;
// The latest delivery of track-7 carries real content, to show a re-upload is still recognised.
const REUPLOAD = { title: 'Song 7 v5', primary_artist: 'Ada', remote_track_id: 'track-7' };
const reuploadBody = serializeRelease(REUPLOAD);
const reuploadHash = createHash('sha256').update(reuploadBody, 'utf8').digest('hex');

function seedSqlite(file: string): void {
  sqliteOutboxStore({ file }).close();
  const db = new (loadSqliteDriver())(file);
  const at = Date.now() - 40 * DAY;
  const insert = db.prepare(`INSERT INTO release_outbox (panel, remote_track_id, body, content_hash, state, attempts, next_attempt_at, release_id,
    delivered_seq, delivered_at, created_at, updated_at) VALUES ('panel-a', ?, ?, ?, 'delivered', 1, ?, ?, ?, ?, ?, ?)`);
  db.transaction(() => {
    for (let i = 0; i < HISTORY; i++) {
      const track = `track-${i % TRACKS}`;
      const seq = Math.floor(i / TRACKS) + 1;
      const body = JSON.stringify({ release: { title: `Song ${i % TRACKS} v${seq}`, primary_artist: 'Ada', remote_track_id: track } });
      insert.run(track, body, `h${i % TRACKS}v${seq}`, at, i + 1, seq, at, at, at);
    }
  })();
  db.prepare("UPDATE release_outbox SET body = ?, content_hash = ? WHERE remote_track_id = 'track-7' AND delivered_seq = 5").run(reuploadBody, reuploadHash);
  db.close();
}

async function seedPostgres(table: string): Promise<void> {
  await postgresOutboxStore({ pool: pool as pg.Pool, schema, table }).migrate();
  const at = Date.now() - 40 * DAY;
  await pool?.query(
    `INSERT INTO "${schema}"."${table}" (panel, remote_track_id, body, content_hash, state, attempts, next_attempt_at, release_id, delivered_seq, delivered_at, created_at, updated_at)
     SELECT 'panel-a', 'track-' || (i % $1), json_build_object('release', json_build_object('title', 'Song ' || (i % $1) || ' v' || (i / $1 + 1), 'primary_artist', 'Ada', 'remote_track_id', 'track-' || (i % $1)))::text,
       'h' || (i % $1) || 'v' || (i / $1 + 1), 'delivered', 1, $2, i + 1, i / $1 + 1, $2, $2, $2
     FROM generate_series(0, $3 - 1) AS i`,
    [TRACKS, at, HISTORY],
  );
  await pool?.query(`UPDATE "${schema}"."${table}" SET body = $1, content_hash = $2 WHERE remote_track_id = 'track-7' AND delivered_seq = 5`, [
    reuploadBody,
    reuploadHash,
  ]);
}

const bigStores: [string, () => Promise<OutboxStore>][] = [
  [
    'SQLite',
    async () => {
      const file = join(dir, 'history.db');
      seedSqlite(file);
      return sqliteOutboxStore({ file });
    },
  ],
  ...(pool
    ? [
        [
          'PostgreSQL',
          async () => {
            await seedPostgres('history');
            return postgresOutboxStore({ pool, schema, table: 'history' });
          },
        ] as [string, () => Promise<OutboxStore>],
      ]
    : []),
];

describe.skipIf(!pool)('retention on PostgreSQL', () => {
  it('keeps everything with `Infinity`, and prunes with finite ages', async () => {
    const store = postgresOutboxStore({ pool: pool as pg.Pool, schema, table: 'forever' });
    await deliveredLongAgo(store, 'Old', undefined, 400);
    const forever = outboxOn(store, { retention: { deliveredMs: Number.POSITIVE_INFINITY, deadMs: Number.POSITIVE_INFINITY } });
    expect(await forever.prune()).toBe(0);
    expect(await outboxOn(store).prune()).toBe(1);
  });
});

describe.each(bigStores)('a 100,000-row history on %s', (_name, open) => {
  it('is pruned in batches while enqueues keep committing, and still recognises a re-upload', { timeout: 120_000 }, async () => {
    const store = await open();
    const outbox = outboxOn(store, { retention: { batchSize: 500 } });
    let pruning = true;
    const pass = outbox.prune().finally(() => {
      pruning = false;
    });
    let enqueuedDuringPrune = 0;
    for (let i = 0; pruning; i++) {
      await outbox.enqueue({ title: `New ${i}`, primary_artist: 'Ada', remote_track_id: `new-${i}` });
      if (pruning) enqueuedDuringPrune++;
    }
    expect(await pass).toBe(HISTORY - TRACKS);
    // Enqueues were not held up until the end of the pass: they committed between its batches.
    expect(enqueuedDuringPrune).toBeGreaterThan(10);
    const stats = await outbox.stats();
    expect(stats.delivered).toBe(TRACKS);
    expect(stats.pending).toBeGreaterThan(enqueuedDuringPrune);
    const again = await outbox.enqueue(REUPLOAD);
    expect(again).toMatchObject({ deduplicated: 'already-delivered', releaseId: 4 * TRACKS + 8 });
    await store.close();
  });
});

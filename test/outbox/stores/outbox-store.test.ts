import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { loadSqliteDriver } from '../../../src/db/sqlite-driver.js';
import type { ClaimedRow, NewOutboxRow, OutboxStore } from '../../../src/outbox/store.js';
import { memoryOutboxStore } from '../../../src/outbox/stores/memory/memory-store.js';
import { mysqlOutboxStore } from '../../../src/outbox/stores/mysql/mysql-store.js';
import { postgresOutboxStore } from '../../../src/outbox/stores/postgres/postgres-store.js';
import { sqliteOutboxStore } from '../../../src/outbox/stores/sqlite/sqlite-store.js';
import { NO_BACKSLASH_ESCAPES_ON, valuesApartOnly } from '../../support/mysql-sessions.js';
import { DATABASE_URL, MYSQL_URL, mysqlAnswers, postgresAnswers, serviceAvailable } from '../../support/services.js';

const dir = mkdtempSync(join(tmpdir(), 'outbox-store-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let fileCounter = 0;
const freshFile = () => join(dir, `store-${++fileCounter}.db`);

const T0 = 1_700_000_000_000;
const LEASE = 60_000;
const A = 'worker-a';
const B = 'worker-b';

function row(title: string, remoteTrackId?: string): NewOutboxRow {
  const body = JSON.stringify({ release: { title, ...(remoteTrackId === undefined ? {} : { remote_track_id: remoteTrackId }) } });
  return { panel: 'panel-a', remoteTrackId, body, contentHash: `hash:${body}` };
}

async function claim(store: OutboxStore, owner = A, nowMs = T0, limit = 10): Promise<ClaimedRow[]> {
  return store.claimDue({ panel: 'panel-a', owner, limit, nowMs, leaseMs: LEASE });
}

async function claimOne(store: OutboxStore, owner = A, nowMs = T0): Promise<ClaimedRow> {
  const [first] = await claim(store, owner, nowMs, 1);
  if (!first) throw new Error('expected a due row');
  return first;
}

// One contract suite for every store: a rule can never hold for one and not another.
const havePostgres = serviceAvailable('PostgreSQL', DATABASE_URL, await postgresAnswers());
const pool = havePostgres ? new pg.Pool({ connectionString: DATABASE_URL, max: 8 }) : undefined;
const schemas: string[] = [];
const freshSchema = () => {
  const schema = `test_outbox_${process.pid}_${schemas.length + 1}`;
  schemas.push(schema);
  return schema;
};
afterAll(async () => {
  if (!pool) return;
  for (const schema of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
});

const haveMysql = serviceAvailable('MySQL/MariaDB', MYSQL_URL, await mysqlAnswers());
const mysqlPool = haveMysql ? mysql.createPool({ uri: MYSQL_URL, connectionLimit: 8 }) : undefined;
const mysqlTables: string[] = [];
const freshMysqlTable = () => {
  const table = `test_outbox_${process.pid}_${mysqlTables.length + 1}`;
  mysqlTables.push(table);
  return table;
};
// The same store on sessions with NO_BACKSLASH_ESCAPES, under which mysql2's escaping of values
// in the text is unsafe: every statement must send its values apart (a `query()` given any fails).
const unescapedPool = haveMysql ? mysql.createPool({ uri: MYSQL_URL, connectionLimit: 8 }) : undefined;
unescapedPool?.pool.on('connection', (connection) => connection.query(NO_BACKSLASH_ESCAPES_ON));
afterAll(async () => {
  if (!mysqlPool) return;
  for (const table of mysqlTables) await mysqlPool.query(`DROP TABLE IF EXISTS ${table}, ${table}_tracks, ${table}_migrations, ${table}_controls`);
  await Promise.all([mysqlPool.end(), unescapedPool?.end()]);
});

const stores: [string, () => OutboxStore][] = [
  ['memoryOutboxStore()', () => memoryOutboxStore()],
  ['sqliteOutboxStore()', () => sqliteOutboxStore({ file: freshFile() })],
  ...(pool ? [['postgresOutboxStore()', () => postgresOutboxStore({ pool, schema: freshSchema(), leaseClock: 'outbox' })] as [string, () => OutboxStore]] : []),
  ...(mysqlPool
    ? [
        ['mysqlOutboxStore()', () => mysqlOutboxStore({ pool: mysqlPool, table: freshMysqlTable(), leaseClock: 'outbox' })] as [string, () => OutboxStore],
        [
          'mysqlOutboxStore() on sessions with NO_BACKSLASH_ESCAPES',
          () => mysqlOutboxStore({ pool: valuesApartOnly(unescapedPool as mysql.Pool), table: freshMysqlTable(), leaseClock: 'outbox' }),
        ] as [string, () => OutboxStore],
      ]
    : []),
];

const open: OutboxStore[] = [];
afterEach(async () => {
  for (const store of open.splice(0)) await store.close();
});

describe.each(stores)('%s', (_name, create) => {
  const make = () => {
    const store = create();
    open.push(store);
    return store;
  };

  describe('when enqueuing', () => {
    it('applies the rules in call order to enqueues of one track made in the same turn', async () => {
      const store = make();
      const [v1, v2, other] = await Promise.all([
        store.enqueue(row('v1', 'same-turn'), T0),
        store.enqueue(row('v2', 'same-turn'), T0),
        store.enqueue(row('other'), T0),
      ]);
      expect(v1?.deduplicated).toBeUndefined();
      expect(v2).toEqual({ id: v1?.id, state: 'pending', releaseId: undefined, deduplicated: 'replaced-pending' });
      expect(other?.id).not.toBe(v1?.id);
      const pending = await store.list({ state: 'pending', limit: 10 });
      expect(pending.map((r) => JSON.parse(r.body).release.title).sort()).toEqual(['other', 'v2']);
    });

    it('tells apart tracks and panels that differ only by trailing spaces', async () => {
      const store = make();
      const plain = await store.enqueue(row('Song A', 'track-1'), T0);
      const spaced = await store.enqueue(row('Song B', 'track-1 '), T0);
      expect(spaced.deduplicated).toBeUndefined();
      expect(spaced.id).not.toBe(plain.id);
      await store.enqueue({ ...row('Other tenant'), panel: 'panel-a ' }, T0);
      // panel-a's claim takes its own two rows, never those of "panel-a ".
      const claimed = await claim(store);
      expect(claimed.map((r) => JSON.parse(r.body).release.title).sort()).toEqual(['Song A', 'Song B']);
    });

    // What a driver or a collation could fold into one: a replacement character and the emoji a
    // cut left as a lone surrogate, composed and decomposed accents, case, full width, a 4-byte
    // character (MySQL's utf8mb3 cannot hold it).
    const LOOKALIKES = [
      ['tenant\uFFFD', 'tenant😀'],
      ['caf\u00e9', 'cafe\u0301'],
      ['Tenant', 'tenant'],
      ['ｔｅｎａｎｔ', 'tenant'],
    ] as const;

    it.each(LOOKALIKES)('keeps panel and track ids %j and %j apart, byte for byte', async (one, other) => {
      const store = make();
      const first = await store.enqueue({ ...row('first', one), panel: one }, T0);
      // The same track id in the other panel, and the other track id in the same panel: new rows both.
      const otherPanel = await store.enqueue({ ...row('other panel', one), panel: other }, T0);
      const otherTrack = await store.enqueue({ ...row('other track', other), panel: one }, T0);
      expect([otherPanel.deduplicated, otherTrack.deduplicated]).toEqual([undefined, undefined]);
      expect(new Set([first.id, otherPanel.id, otherTrack.id]).size).toBe(3);
      const ofOne = await store.list({ state: 'pending', limit: 10, panel: one });
      expect(ofOne.map((r) => [r.panel, r.remoteTrackId])).toEqual([
        [one, one],
        [one, other],
      ]);
      expect((await store.list({ state: 'pending', limit: 10, panel: other })).map((r) => [r.panel, r.remoteTrackId])).toEqual([[other, one]]);
      expect((await store.list({ state: undefined, limit: 10, panel: one, track: other })).map((r) => r.id)).toEqual([otherTrack.id]);
      const claimed = await store.claimDue({ panel: other, owner: A, limit: 10, nowMs: T0, leaseMs: LEASE });
      expect(claimed.map((r) => [r.panel, r.remoteTrackId, JSON.parse(r.body).release.title])).toEqual([[other, one, 'other panel']]);
      expect(await store.counts({ panel: one })).toMatchObject({ pending: 2 });
    });

    it('always queues a release without remote_track_id', async () => {
      const store = make();
      const first = await store.enqueue(row('Same'), T0);
      const second = await store.enqueue(row('Same'), T0);
      expect(first).toEqual({ id: 1, state: 'pending', releaseId: undefined, deduplicated: undefined });
      expect(second.id).toBe(2);
      expect(await store.counts()).toEqual({ pending: 2, delivered: 0, dead: 0, cancelled: 0 });
    });

    it('replaces the payload of a pending row with the same remote_track_id, keeping its id and place', async () => {
      const store = make();
      await store.enqueue(row('First', 't1'), T0);
      await store.enqueue(row('Other', 't2'), T0);
      const replaced = await store.enqueue(row('First v2', 't1'), T0 + 5);
      expect(replaced).toEqual({ id: 1, state: 'pending', releaseId: undefined, deduplicated: 'replaced-pending' });
      const claimed = await claim(store, A, T0 + 10);
      expect(claimed.map((c) => [c.id, c.body])).toEqual([
        [1, row('First v2', 't1').body],
        [2, row('Other', 't2').body],
      ]);
    });

    it('answers an identical, already delivered release with its release_id and queues nothing', async () => {
      const store = make();
      await store.enqueue(row('Song', 't1'), T0);
      await store.settle(await claimOne(store), A, { kind: 'delivered', releaseId: 77 }, T0);
      expect(await store.enqueue(row('Song', 't1'), T0)).toEqual({ id: 1, state: 'delivered', releaseId: 77, deduplicated: 'already-delivered' });
      expect(await store.counts()).toEqual({ pending: 0, delivered: 1, dead: 0, cancelled: 0 });
    });

    it('queues delivered content again when a later release of the track died, and that one can no longer be retried over it', async () => {
      const store = make();
      await store.enqueue(row('Song', 't1'), T0);
      await store.settle(await claimOne(store), A, { kind: 'delivered', releaseId: 77 }, T0);
      await store.enqueue(row('Song (remix)', 't1'), T0 + 1);
      await store.settle(await claimOne(store, A, T0 + 1), A, { kind: 'dead', error: 'HTTP 422' }, T0 + 1);
      // The remix may have reached the mother before it was refused: "Song" is the panel's last word.
      expect(await store.enqueue(row('Song', 't1'), T0 + 2)).toEqual({ id: 3, state: 'pending', releaseId: undefined, deduplicated: undefined });
      expect(await store.requeueDead(2, T0 + 3)).toBe(0);
      expect((await claim(store, A, T0 + 3)).map((c) => [c.id, c.body])).toEqual([[3, row('Song', 't1').body]]);
    });

    it('also when the latest delivery is an older payload recorded after its row took the newer one, which then died', async () => {
      const store = make();
      await store.enqueue(row('Remix', 't1'), T0);
      const inFlight = await claimOne(store);
      // Replaced while in flight: row 1 carries "Song"; the "Remix" send is recorded as history row 2.
      await store.enqueue(row('Song', 't1'), T0);
      expect(await store.settle(inFlight, A, { kind: 'delivered', releaseId: 5 }, T0)).toBe('superseded');
      await store.settle(await claimOne(store), A, { kind: 'dead', error: 'HTTP 422' }, T0);
      // Back to "Remix": "Song" (row 1) came after it, although its id is lower than the history row's.
      expect(await store.enqueue(row('Remix', 't1'), T0 + 2)).toMatchObject({ id: 3, state: 'pending', deduplicated: undefined });
      expect(await store.requeueDead(1, T0 + 3)).toBe(0);
      expect((await claim(store, A, T0 + 3)).map((c) => c.body)).toEqual([row('Remix', 't1').body]);
    });

    it('queues changed content of a delivered release as an update', async () => {
      const store = make();
      await store.enqueue(row('Song', 't1'), T0);
      await store.settle(await claimOne(store), A, { kind: 'delivered', releaseId: 77 }, T0);
      expect(await store.enqueue(row('Song (remastered)', 't1'), T0)).toEqual({ id: 2, state: 'pending', releaseId: undefined, deduplicated: undefined });
    });
  });

  describe('when claiming', () => {
    it('leases at most `limit` due rows, oldest due first, and never the same row to two workers', async () => {
      const store = make();
      for (let i = 0; i < 5; i++) await store.enqueue(row(`Song ${i}`), T0 + i);
      const first = await claim(store, A, T0 + 10, 2);
      const second = await claim(store, B, T0 + 10, 10);
      expect(first.map((c) => c.id)).toEqual([1, 2]);
      expect(second.map((c) => c.id)).toEqual([3, 4, 5]);
      expect(await claim(store, A, T0 + 10)).toEqual([]);
    });

    it('skips rows not yet due and hands out an expired lease again', async () => {
      const store = make();
      await store.enqueue(row('Later'), T0 + 1000);
      expect(await claim(store, A, T0)).toEqual([]);
      expect((await claim(store, A, T0 + 1000)).map((c) => c.id)).toEqual([1]);
      expect(await claim(store, B, T0 + 1000 + LEASE - 1)).toEqual([]);
      expect((await claim(store, B, T0 + 1000 + LEASE)).map((c) => c.id)).toEqual([1]);
    });

    it('never leases a row the worker says it is still sending', async () => {
      const store = make();
      for (const title of ['a', 'b', 'c']) await store.enqueue(row(title), T0);
      const claimed = await store.claimDue({ panel: 'panel-a', owner: A, limit: 10, nowMs: T0, leaseMs: LEASE, exclude: [1, 3] });
      expect(claimed.map((c) => c.id)).toEqual([2]);
    });

    it('sends a payload replaced in flight as soon as its row is claimable again, but not while it is still being sent', async () => {
      const store = make();
      await store.enqueue(row('v1', 't1'), T0);
      const inFlight = await claimOne(store);
      await store.enqueue(row('v2', 't1'), T0);
      expect(await store.settle(inFlight, A, { kind: 'delivered', releaseId: 1 }, T0)).toBe('superseded');
      // The worker has not finished with v1's send yet: it asks the store to skip the row.
      expect(await store.claimDue({ panel: 'panel-a', owner: A, limit: 10, nowMs: T0, leaseMs: LEASE, exclude: [inFlight.id] })).toEqual([]);
      expect((await claim(store, A, T0)).map((c) => [c.id, c.body])).toEqual([[1, row('v2', 't1').body]]);
    });
  });

  describe('when claiming across panels (claimFair)', () => {
    const inPanel = (panel: string, title: string): NewOutboxRow => ({ ...row(title), panel });
    const fair = (store: OutboxStore, request: Partial<Parameters<NonNullable<OutboxStore['claimFair']>>[0]> = {}) =>
      Promise.resolve(
        store.claimFair?.({ owner: A, limit: 4, nowMs: T0, leaseMs: LEASE, after: '', maxPanels: 64, skipPanels: [], probePanels: [], ...request }),
      );

    it('takes every panel its turn before any panel a second row, and says where to go on', async () => {
      const store = make();
      for (let i = 0; i < 5; i++) await store.enqueue(inPanel('p-a', `a${i}`), T0);
      await store.enqueue(inPanel('p-b', 'b0'), T0);
      await store.enqueue(inPanel('p-c', 'c0'), T0);
      await store.enqueue(row('no panel'), T0); // panel-a of the other tests
      const taken = await fair(store, { after: 'p' });
      expect(taken?.rows.map((r) => `${r.panel}:${JSON.parse(r.body).release.title}`)).toEqual(['p-a:a0', 'p-b:b0', 'p-c:c0', 'panel-a:no panel']);
      expect(taken?.lastPanel).toBe('panel-a');
      // Going on after it wraps round to the first panel: only p-a has rows left.
      expect((await fair(store, { after: 'panel-a', limit: 2 }))?.rows.map((r) => r.panel)).toEqual(['p-a', 'p-a']);
    });

    it('passes over held panels, takes one row of a probing panel, never rows without a panel', async () => {
      const store = make();
      for (let i = 0; i < 3; i++) {
        await store.enqueue(inPanel('held', `h${i}`), T0);
        await store.enqueue(inPanel('probing', `p${i}`), T0);
        await store.enqueue(inPanel('', `legacy${i}`), T0);
      }
      const taken = await fair(store, { skipPanels: ['held'], probePanels: ['probing'] });
      expect(taken?.rows.map((r) => r.panel)).toEqual(['probing']);
      expect(taken?.lastPanel).toBe('probing');
    });

    it('visits at most `maxPanels` panels, and goes on after the last one visited', async () => {
      const store = make();
      for (const panel of ['p1', 'p2', 'p3']) await store.enqueue(inPanel(panel, panel), T0 + 10_000); // not due yet
      const taken = await fair(store, { maxPanels: 2 });
      expect(taken).toEqual({ rows: [], lastPanel: 'p2' });
      // From after p2, round to p1 and p2 again: every panel visited.
      expect(await fair(store, { after: 'p2', maxPanels: 2 })).toEqual({ rows: [], lastPanel: 'p1' });
      expect(await fair(store, { after: 'p2', maxPanels: 3 })).toEqual({ rows: [], lastPanel: undefined });
    });
  });

  describe('when requeueing a dead row', () => {
    it('leaves it dead when the track has a newer release, so older content never follows newer', async () => {
      const store = make();
      await store.enqueue(row('v1', 't1'), T0);
      await store.settle(await claimOne(store), A, { kind: 'dead', error: 'refused' }, T0);
      await store.enqueue(row('v2', 't1'), T0);
      expect(await store.requeueDead(1, T0)).toBe(0);
      await store.settle(await claimOne(store), A, { kind: 'delivered', releaseId: 2 }, T0);
      expect(await store.requeueDead(undefined, T0)).toBe(0);
      expect(await store.counts()).toEqual({ pending: 0, delivered: 1, dead: 1, cancelled: 0 });
    });

    it('brings back only the newest dead payload of a track, and every dead release without a track', async () => {
      const store = make();
      for (const [title, track] of [['v1', 't1'], ['free'], ['v2', 't1']] as const) {
        await store.enqueue(row(title, track), T0);
        await store.settle(await claimOne(store), A, { kind: 'dead', error: 'refused' }, T0);
      }
      expect(await store.requeueDead(undefined, T0)).toBe(2);
      expect((await store.list({ state: 'pending', limit: 10 })).map((r) => r.id)).toEqual([2, 3]);
    });

    it('requeues a row whose newer payload was refused after its older payload reached the mother', async () => {
      const store = make();
      await store.enqueue(row('v1', 't1'), T0);
      const inFlight = await claimOne(store);
      await store.enqueue(row('v2', 't1'), T0);
      expect(await store.settle(inFlight, A, { kind: 'delivered', releaseId: 1 }, T0)).toBe('superseded');
      await store.settle(await claimOne(store), A, { kind: 'dead', error: 'refused' }, T0);
      // Row 2 records v1 (older content): v2, refused, may still be sent again.
      expect(await store.requeueDead(1, T0)).toBe(1);
      expect((await claimOne(store)).body).toBe(row('v2', 't1').body);
    });
  });

  describe('when pruning', () => {
    const DAY = 24 * 60 * 60_000;
    const prune = (store: OutboxStore, now: number, afterId = 0, limit = 100) =>
      (store.prune as NonNullable<OutboxStore['prune']>)({ deliveredBefore: now - 30 * DAY, deadBefore: now - 90 * DAY, afterId, limit });

    it('deletes old deliveries and dead rows, keeping the latest delivery of each track and every pending row', async () => {
      const store = make();
      const deliver = async (title: string, track: string | undefined, at: number) => {
        await store.enqueue(row(title, track), at);
        await store.settle(await claimOne(store, A, at), A, { kind: 'delivered', releaseId: 1 }, at);
      };
      await deliver('v1', 't1', T0); // 1: superseded by 2
      await deliver('v2', 't1', T0); // 2: latest of t1: kept
      await deliver('free', undefined, T0); // 3: no track: old, deleted
      await deliver('recent', undefined, T0 + 40 * DAY); // 4: too recent
      await store.enqueue(row('dies', 't9'), T0);
      await store.settle(await claimOne(store, A, T0), A, { kind: 'dead', error: 'refused' }, T0); // 5: dead, 50 days old
      await store.enqueue(row('waits', 't2'), T0 + 200 * DAY); // 6: pending
      expect(await prune(store, T0 + 50 * DAY)).toEqual({ deleted: 2, lastId: 6, highestId: 6 });
      expect((await store.list({ state: undefined, limit: 10 })).map((r) => r.id)).toEqual([2, 4, 5, 6]);
      expect(await prune(store, T0 + 100 * DAY)).toEqual({ deleted: 2, lastId: 6, highestId: 6 });
      expect((await store.list({ state: undefined, limit: 10 })).map((r) => r.id)).toEqual([2, 6]);
      // The kept delivery still answers an identical re-upload.
      expect(await store.enqueue(row('v2', 't1'), T0 + 100 * DAY)).toMatchObject({ id: 2, deduplicated: 'already-delivered' });
      expect(await store.enqueue(row('v1', 't1'), T0 + 100 * DAY)).toMatchObject({ state: 'pending', deduplicated: undefined });
    });

    it('keeps the payload the mother holds when an older one was recorded later (replaced in flight)', async () => {
      const store = make();
      await store.enqueue(row('v1', 't1'), T0);
      const inFlight = await claimOne(store);
      await store.enqueue(row('v2', 't1'), T0);
      await store.settle(inFlight, A, { kind: 'delivered', releaseId: 1 }, T0); // row 2: v1, history
      await store.settle(await claimOne(store), A, { kind: 'delivered', releaseId: 2 }, T0); // row 1: v2, latest
      expect((await prune(store, T0 + 50 * DAY)).deleted).toBe(1);
      expect(await store.enqueue(row('v2', 't1'), T0 + 50 * DAY)).toMatchObject({ id: 1, deduplicated: 'already-delivered' });
    });

    it('examines rows in id ranges of `limit`, and says where to continue', async () => {
      const store = make();
      for (let i = 0; i < 5; i++) {
        await store.enqueue(row(`Song ${i}`), T0);
        await store.settle(await claimOne(store), A, { kind: 'delivered', releaseId: i }, T0);
      }
      expect(await prune(store, T0 + 50 * DAY, 0, 2)).toEqual({ deleted: 2, lastId: 2, highestId: 5 });
      expect(await prune(store, T0 + 50 * DAY, 2, 2)).toEqual({ deleted: 2, lastId: 4, highestId: 5 });
      expect(await prune(store, T0 + 50 * DAY, 4, 2)).toEqual({ deleted: 1, lastId: 5, highestId: 5 });
      expect(await prune(store, T0 + 50 * DAY, 5, 2)).toEqual({ deleted: 0, lastId: undefined, highestId: undefined });
      expect(await store.counts()).toEqual({ pending: 0, delivered: 0, dead: 0, cancelled: 0 });
    });
  });

  describe('when settling', () => {
    it('records a delivery, a retry and a refusal', async () => {
      const store = make();
      for (const title of ['ok', 'retry', 'dead']) await store.enqueue(row(title), T0);
      const [ok, retry, dead] = (await claim(store)) as [ClaimedRow, ClaimedRow, ClaimedRow];
      expect(await store.settle(ok, A, { kind: 'delivered', releaseId: 5 }, T0 + 1)).toBe('applied');
      expect(await store.settle(retry, A, { kind: 'retry', nextAttemptAt: T0 + 500, error: 'HTTP 503' }, T0 + 1)).toBe('applied');
      expect(await store.settle(dead, A, { kind: 'dead', error: 'Missing release title.' }, T0 + 1)).toBe('applied');
      const rows = await store.list({ state: undefined, limit: 10 });
      expect(rows.map((r) => [r.state, r.attempts, r.releaseId, r.lastError, r.leaseOwner])).toEqual([
        // A delivered or dead row keeps who recorded it (outbox-store-records.test.ts says why); a pending one has no lease.
        ['delivered', 1, 5, undefined, A],
        ['pending', 1, undefined, 'HTTP 503', undefined],
        ['dead', 1, undefined, 'Missing release title.', A],
      ]);
      expect(rows[1]?.nextAttemptAt).toBe(T0 + 500);
      expect(rows[0]?.deliveredAt).toBe(T0 + 1);
    });

    it('ignores a failure reported after the lease was taken over', async () => {
      const store = make();
      await store.enqueue(row('slow'), T0);
      const stale = await claimOne(store, A, T0);
      const fresh = await claimOne(store, B, T0 + LEASE);
      expect(await store.settle(stale, A, { kind: 'retry', nextAttemptAt: T0, error: 'late' }, T0 + LEASE)).toBe('stale');
      expect(await store.settle(fresh, B, { kind: 'delivered', releaseId: 9 }, T0 + LEASE)).toBe('applied');
      expect(await store.settle(stale, A, { kind: 'delivered', releaseId: 10 }, T0 + LEASE)).toBe('stale');
      expect((await store.list({ state: 'delivered', limit: 10 }))[0]?.releaseId).toBe(9);
    });

    it('records a delivery reported after the lease was taken over, with its note and due time as they were', async () => {
      const store = make();
      await store.enqueue(row('slow'), T0);
      const late = await claimOne(store, A, T0);
      const fresh = await claimOne(store, B, T0 + LEASE);
      // The mother has it either way: recorded, B's lease cleared, and B's own answer then stale.
      const note = 'answered 2xx with a body that is not valid JSON';
      expect(await store.settle(late, A, { kind: 'delivered', releaseId: undefined, note }, T0 + LEASE + 1)).toBe('applied');
      expect(await store.list({ state: undefined, limit: 10 })).toMatchObject([
        { state: 'delivered', attempts: 1, releaseId: undefined, lastError: note, leaseOwner: A, nextAttemptAt: T0, deliveredAt: T0 + LEASE + 1 },
      ]);
      expect(await store.settle(fresh, B, { kind: 'delivered', releaseId: 9 }, T0 + LEASE + 2)).toBe('stale');
    });

    it('keeps a payload replaced in flight pending, and remembers what the mother got', async () => {
      const store = make();
      await store.enqueue(row('v1', 't1'), T0);
      const inFlight = await claimOne(store);
      expect(await store.enqueue(row('v2', 't1'), T0)).toMatchObject({ id: 1, deduplicated: 'replaced-pending' });
      expect(await store.settle(inFlight, A, { kind: 'delivered', releaseId: 100 }, T0)).toBe('superseded');
      const next = await claimOne(store);
      expect([next.id, next.body]).toEqual([1, row('v2', 't1').body]);
      expect(await store.settle(next, A, { kind: 'delivered', releaseId: 101 }, T0)).toBe('applied');
      // v2 is what the mother holds now, although v1's record has the higher id.
      expect(await store.enqueue(row('v2', 't1'), T0)).toEqual({ id: 1, state: 'delivered', releaseId: 101, deduplicated: 'already-delivered' });
      expect(await store.enqueue(row('v1', 't1'), T0)).toMatchObject({ state: 'pending', deduplicated: undefined });
      expect(await store.counts()).toEqual({ pending: 1, delivered: 2, dead: 0, cancelled: 0 });
    });

    it('gives a payload replaced in flight its own chance when the older one is refused', async () => {
      const store = make();
      await store.enqueue(row('v1', 't1'), T0);
      const inFlight = await claimOne(store);
      await store.enqueue(row('v2', 't1'), T0);
      expect(await store.settle(inFlight, A, { kind: 'dead', error: 'refused' }, T0)).toBe('superseded');
      expect(await store.list({ state: undefined, limit: 10 })).toMatchObject([{ id: 1, state: 'pending', attempts: 0, body: row('v2', 't1').body }]);
    });
  });

  describe('when settling many at once (settleMany)', () => {
    it('records every outcome as settle() would, one by one, and answers in order', async () => {
      const store = make();
      const settleMany = store.settleMany?.bind(store);
      if (!settleMany) throw new Error('every built-in store has settleMany()');
      await store.enqueue(row('slow'), T0);
      const stale = await claimOne(store, A, T0);
      await claimOne(store, B, T0 + LEASE);
      for (const title of ['ok', 'retry', 'dead']) await store.enqueue(row(title), T0 + LEASE);
      await store.enqueue(row('v1', 't1'), T0 + LEASE);
      const [ok, retry, dead, replaced] = (await claim(store, A, T0 + LEASE)) as [ClaimedRow, ClaimedRow, ClaimedRow, ClaimedRow];
      await store.enqueue(row('v2', 't1'), T0 + LEASE);
      const at = T0 + LEASE + 1;
      const results = await settleMany(
        [
          { claim: stale, outcome: { kind: 'retry', nextAttemptAt: at, error: 'late' }, nowMs: at },
          { claim: ok, outcome: { kind: 'delivered', releaseId: 5 }, nowMs: at },
          { claim: retry, outcome: { kind: 'retry', nextAttemptAt: at + 500, error: 'HTTP 503' }, nowMs: at },
          { claim: dead, outcome: { kind: 'dead', error: 'Missing release title.' }, nowMs: at },
          { claim: replaced, outcome: { kind: 'delivered', releaseId: 100 }, nowMs: at },
        ],
        A,
      );
      expect(results).toEqual(['stale', 'applied', 'applied', 'applied', 'superseded']);
      const rows = await store.list({ state: undefined, limit: 10 });
      expect(rows.map((r) => [JSON.parse(r.body).release.title, r.state, r.attempts, r.releaseId, r.lastError, r.leaseOwner])).toEqual([
        ['slow', 'pending', 0, undefined, undefined, B],
        ['ok', 'delivered', 1, 5, undefined, A],
        ['retry', 'pending', 1, undefined, 'HTTP 503', undefined],
        ['dead', 'dead', 1, undefined, 'Missing release title.', A],
        ['v2', 'pending', 0, undefined, undefined, undefined],
        ['v1', 'delivered', 1, 100, undefined, A],
      ]);
      expect(rows[2]?.nextAttemptAt).toBe(at + 500);
      expect(rows[1]?.deliveredAt).toBe(at);
    });
  });

  describe('when listing and requeueing', () => {
    it('filters by state, honours the limit, and requeues every dead row', async () => {
      const store = make();
      for (let i = 0; i < 4; i++) await store.enqueue(row(`Song ${i}`), T0);
      for (const claimed of await claim(store)) await store.settle(claimed, A, { kind: 'dead', error: 'no' }, T0);
      expect((await store.list({ state: 'dead', limit: 2 })).map((r) => r.id)).toEqual([1, 2]);
      expect(await store.requeueDead(99, T0)).toBe(0);
      expect(await store.requeueDead(undefined, T0 + 1)).toBe(4);
      expect(await store.counts()).toEqual({ pending: 4, delivered: 0, dead: 0, cancelled: 0 });
      expect((await store.list({ state: 'pending', limit: 10 }))[0]).toMatchObject({ attempts: 0, nextAttemptAt: T0 + 1 });
    });

    it('pages after an id, and finds the rows of one track', async () => {
      const store = make();
      for (let i = 0; i < 5; i++) await store.enqueue(row(`Song ${i}`, `track-${i % 2}-${i}`), T0);
      await store.enqueue(row('Other', 'wanted'), T0);
      const firstPage = await store.list({ state: 'pending', limit: 2 });
      const secondPage = await store.list({ state: 'pending', limit: 2, afterId: firstPage.at(-1)?.id });
      const lastPage = await store.list({ state: 'pending', limit: 2, afterId: secondPage.at(-1)?.id });
      expect([...firstPage, ...secondPage, ...lastPage].map((r) => r.id)).toEqual([1, 2, 3, 4, 5, 6]);
      expect(await store.list({ state: undefined, limit: 10, afterId: 6 })).toEqual([]);
      expect((await store.list({ state: undefined, limit: 10, track: 'wanted' })).map((r) => r.remoteTrackId)).toEqual(['wanted']);
      expect(await store.list({ state: 'dead', limit: 10, track: 'wanted' })).toEqual([]);
    });
  });
});

describe('sqliteOutboxStore()', () => {
  it('keeps rows across reopening, in a directory it creates', async () => {
    const file = join(dir, 'nested', 'deeper', 'outbox.db');
    const first = sqliteOutboxStore({ file });
    await first.enqueue(row('Durable', 't1'), T0);
    await first.close();
    const second = sqliteOutboxStore({ file });
    open.push(second);
    expect(await second.list({ state: 'pending', limit: 10 })).toMatchObject([{ id: 1, remoteTrackId: 't1', body: row('Durable', 't1').body }]);
  });

  it('never leases one row to two connections on the same file', async () => {
    const file = freshFile();
    const [one, two] = [sqliteOutboxStore({ file }), sqliteOutboxStore({ file })];
    open.push(one, two);
    for (let i = 0; i < 20; i++) await one.enqueue(row(`Song ${i}`), T0);
    const claimed: number[] = [];
    for (let round = 0; round < 10; round++) {
      for (const [store, owner] of [
        [one, A],
        [two, B],
      ] as const) {
        claimed.push(...(await claim(store, owner, T0, 1)).map((c) => c.id));
      }
    }
    expect(claimed.sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
  });

  it('refuses a file written by a newer schema', async () => {
    const file = freshFile();
    const Driver = loadSqliteDriver();
    const db = new Driver(file);
    db.pragma('user_version = 99');
    db.close();
    expect(() => sqliteOutboxStore({ file })).toThrow(/schema v99.*newer version/);
  });

  it('reads a v1 file as it is, and migrates it in place when opened for writing', async () => {
    const file = freshFile();
    const first = sqliteOutboxStore({ file });
    await first.enqueue(row('Old', 't1'), T0);
    await first.close();
    // Back to what version 1 of the schema looked like.
    const Driver = loadSqliteDriver();
    const db = new Driver(file);
    db.exec(
      'DROP INDEX release_outbox_panel_due; DROP INDEX release_outbox_panel_track; DROP INDEX release_outbox_list; DROP INDEX release_outbox_panel_list; DROP INDEX release_outbox_track_list; DROP INDEX release_outbox_feed',
    );
    db.exec('ALTER TABLE release_outbox DROP COLUMN feed_position; DROP TABLE release_outbox_controls');
    db.exec('ALTER TABLE release_outbox DROP COLUMN panel');
    db.exec('ALTER TABLE release_outbox DROP COLUMN history_of');
    db.exec('ALTER TABLE release_outbox DROP COLUMN trace_context');
    db.pragma('user_version = 1');
    db.close();
    const reader = sqliteOutboxStore({ file, readonly: true });
    expect(await reader.list({ state: undefined, limit: 10 })).toMatchObject([{ id: 1, panel: '', remoteTrackId: 't1' }]);
    await reader.close();
    const writer = sqliteOutboxStore({ file });
    open.push(writer);
    // A row stored before rows recorded their panel is nobody's until adopted.
    expect(await claim(writer)).toEqual([]);
    expect(await writer.adoptUnassigned?.('panel-a', T0)).toBe(1);
    const inFlight = await claimOne(writer);
    await writer.enqueue(row('New', 't1'), T0);
    expect(await writer.settle(inFlight, A, { kind: 'delivered', releaseId: 1 }, T0)).toBe('superseded');
    const check = new Driver(file, { readonly: true });
    expect(check.pragma('user_version', { simple: true })).toBe(6);
    expect(check.prepare('SELECT history_of FROM release_outbox WHERE id = 2').get()).toEqual({ history_of: 1 });
    check.close();
  });

  it('rejects unknown and invalid options by name', () => {
    expect(() => sqliteOutboxStore({ file: freshFile(), busyTimeout: 5 } as never)).toThrow(/unknown option `busyTimeout`.*`busyTimeoutMs`/);
    expect(() => sqliteOutboxStore({ file: '' })).toThrow(/`file` must be a non-empty path/);
  });
});

describe('loadSqliteDriver()', () => {
  it('tells the user how to install better-sqlite3 when it is missing', () => {
    const missing = () => {
      throw Object.assign(new Error("Cannot find module 'better-sqlite3'"), { code: 'MODULE_NOT_FOUND' });
    };
    expect(() => loadSqliteDriver(missing)).toThrow(/npm install better-sqlite3@12/);
  });

  it('tells the user to rebuild a driver that fails to load', () => {
    const broken = () => {
      throw new Error('NODE_MODULE_VERSION 127 does not match 115');
    };
    expect(() => loadSqliteDriver(broken)).toThrow(/npm rebuild better-sqlite3/);
  });
});

describe('sqliteOutboxStore() group commit', () => {
  it('rejects every caller of a batch that the database rolled back as a whole', async () => {
    const file = freshFile();
    const store = sqliteOutboxStore({ file });
    open.push(store);
    // A trigger that aborts the whole transaction (as SQLITE_FULL or an I/O error would).
    const Driver = loadSqliteDriver();
    const side = new Driver(file);
    side.exec(`CREATE TRIGGER poison BEFORE INSERT ON release_outbox WHEN NEW.body LIKE '%poison%' BEGIN SELECT RAISE(ROLLBACK, 'disk on fire'); END`);
    side.close();
    const outcomes = await Promise.allSettled([store.enqueue(row('a'), T0), store.enqueue(row('poison'), T0), store.enqueue(row('c'), T0)]);
    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected', 'rejected']);
    expect(await store.counts()).toEqual({ pending: 0, delivered: 0, dead: 0, cancelled: 0 });
  });
});

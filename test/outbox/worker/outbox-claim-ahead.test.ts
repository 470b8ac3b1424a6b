import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PartialSettleError } from '../../../src/errors.js';
import { createReleaseOutbox } from '../../../src/outbox/outbox.js';
import type { ReleaseSender } from '../../../src/outbox/release-sender.js';
import type { OutboxStore } from '../../../src/outbox/store.js';
import { sqliteOutboxStore } from '../../../src/outbox/stores/sqlite/sqlite-store.js';
import { sleep, waitFor } from '../../support/helpers.js';
import { enqueueTracks, gatedSender, PANEL, watchedStore } from '../../support/worker-fakes.js';

// The worker claims a few rows ahead of its free slots and records outcomes in batches; these
// tests watch the store calls it makes, and what becomes of rows claimed ahead but never sent.
const dir = mkdtempSync(join(tmpdir(), 'outbox-ahead-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const freshFile = () => join(dir, `ahead-${++files}.db`);
const silent = { warn() {}, error() {} };

describe('the delivery worker, claiming ahead and recording in batches', () => {
  it('claims several rows per claim and records several outcomes per statement, never more pushes than `concurrency`', async () => {
    const gate = gatedSender();
    // Every push waiting is answered together every 2 ms, as a busy mother's answers arrive.
    const ticker = setInterval(gate.answerWaiting, 2);
    const { store, inner, claims, batches } = watchedStore(freshFile());
    const outbox = createReleaseOutbox({ client: gate.sender, store, concurrency: 4, autoStart: false, logger: silent });
    try {
      await enqueueTracks(outbox, 200);
      outbox.start();
      const stats = await outbox.drain({ signal: AbortSignal.timeout(20_000) });
      expect(stats).toMatchObject({ pending: 0, delivered: 200, dead: 0 });
      expect(gate.bodies).toHaveLength(200);
      expect(gate.mostActive()).toBeLessThanOrEqual(4);
      // The pushes and as many rows ahead (at most 64): never more leased at once.
      expect(Math.max(...claims.map((claim) => claim.limit))).toBeLessThanOrEqual(4 + 64);
      expect(claims.length).toBeLessThanOrEqual(200 / 2);
      const settled = batches.flat();
      expect(new Set(settled.map((settle) => settle.claim.id)).size).toBe(200);
      expect(batches.length).toBeLessThanOrEqual(200 / 2);
      expect(Math.max(...batches.map((batch) => batch.length))).toBeGreaterThanOrEqual(2);
    } finally {
      clearInterval(ticker);
      await outbox.close();
      await inner.close();
    }
  });

  it('claims ahead even with one slot: a release starts as soon as the one before it is answered', async () => {
    const gate = gatedSender();
    gate.open();
    const { store, inner, claims } = watchedStore(freshFile());
    const outbox = createReleaseOutbox({ client: gate.sender, store, concurrency: 1, autoStart: false, logger: silent });
    try {
      await enqueueTracks(outbox, 120);
      outbox.start();
      await outbox.drain({ signal: AbortSignal.timeout(20_000) });
      expect(gate.bodies).toHaveLength(120);
      expect(gate.mostActive()).toBe(1);
      // One claim for every sixteen releases at most (one per release without claiming ahead; 64
      // claimed ahead, and claimed again once three quarters of them are used).
      expect(claims.length).toBeLessThanOrEqual(120 / 16);
    } finally {
      await outbox.close();
      await inner.close();
    }
  });

  it('makes one claim for releases enqueued together while it runs, not one claim each', async () => {
    const gate = gatedSender();
    gate.open();
    const { store, inner, claims } = watchedStore(freshFile());
    const outbox = createReleaseOutbox({ client: gate.sender, store, concurrency: 8, autoStart: false, logger: silent });
    try {
      outbox.start();
      await outbox.drain();
      const before = claims.length;
      // Eight callers at a time, twenty times: each batch of enqueues resolves in one turn.
      for (let round = 0; round < 20; round++) {
        await Promise.all(Array.from({ length: 8 }, (_, i) => outbox.enqueue({ title: `Track ${round}-${i}`, remote_track_id: `t-${round}-${i}` })));
        await waitFor(() => gate.bodies.length === (round + 1) * 8, `round ${round} sent`);
      }
      // A claim used to read the store for every enqueue (7 a round here, most finding nothing);
      // now one for the batch, and one or two as the pushes answer.
      expect(claims.length - before).toBeLessThanOrEqual(20 * 5);
    } finally {
      await outbox.close();
      await inner.close();
    }
  });

  it('at concurrency 1, lets a few outcomes wait for a slow store (nine releases unrecorded at most), and records them together', async () => {
    const gate = gatedSender();
    gate.open();
    const { store, inner, batches } = watchedStore(freshFile());
    let recording = 0;
    let mostRecording = 0;
    const slowStore: OutboxStore = {
      ...store,
      async settleMany(settles, owner) {
        recording += settles.length;
        mostRecording = Math.max(mostRecording, recording);
        await sleep(15);
        recording -= settles.length;
        return (store.settleMany as NonNullable<OutboxStore['settleMany']>)(settles, owner);
      },
    };
    const outbox = createReleaseOutbox({ client: gate.sender, store: slowStore, concurrency: 1, autoStart: false, logger: silent });
    try {
      await enqueueTracks(outbox, 40);
      outbox.start();
      await outbox.drain({ signal: AbortSignal.timeout(20_000) });
      expect(gate.bodies).toHaveLength(40);
      // Releases pushed and not yet recorded: nine at most (`concurrency` + 8), all a crash can send again.
      expect(mostRecording).toBeLessThanOrEqual(9);
      expect(mostRecording).toBeGreaterThanOrEqual(5);
      expect(Math.max(...batches.map((batch) => batch.length))).toBeGreaterThanOrEqual(2);
      expect(batches.length).toBeLessThan(40);
    } finally {
      await outbox.close();
      await inner.close();
    }
  });

  it.each([
    { store: 'writing a batch before it answers (SQLite)', later: false, perCommit: 7 },
    { store: 'answering with a promise (a server)', later: true, perCommit: 4 },
  ])(
    'at concurrency 1, with a store $store, records $perCommit outcomes per commit while the next pushes are under way, not one each',
    async ({ later, perCommit }) => {
      const bodies: string[] = [];
      // Each answer in a turn of its own, as a mother's answers over HTTP arrive.
      const sender: ReleaseSender = {
        panelId: PANEL,
        timeoutMs: 5000,
        async pushSerializedRelease(body) {
          await new Promise((resolve) => setImmediate(resolve));
          bodies.push(body);
          return { ok: true, release_id: bodies.length };
        },
      };
      const { store, inner, batches } = watchedStore(freshFile(), { later });
      const outbox = createReleaseOutbox({ client: sender, store, concurrency: 1, autoStart: false, logger: silent });
      const delivered: number[] = [];
      outbox.on('delivered', (event) => delivered.push(event.id));
      try {
        await enqueueTracks(outbox, 120);
        outbox.start();
        await outbox.drain({ signal: AbortSignal.timeout(20_000) });
        expect(new Set(delivered).size).toBe(120);
        expect(new Set(batches.flat().map((settle) => settle.claim.id)).size).toBe(120);
        // One commit per outcome before; now about one per `perCommit` (a claim's last rows may go with fewer).
        expect(batches.length).toBeLessThanOrEqual(Math.ceil((120 / perCommit) * 1.25));
        expect(Math.max(...batches.map((batch) => batch.length))).toBe(perCommit);
      } finally {
        await outbox.close();
        await inner.close();
      }
    },
  );

  it('records an outcome held for its batch within moments, even when the push after it hangs', async () => {
    let pushes = 0;
    let releaseHung: () => void = () => {};
    const hung = new Promise<void>((resolve) => {
      releaseHung = resolve;
    });
    const sender: ReleaseSender = {
      panelId: PANEL,
      timeoutMs: 5000,
      async pushSerializedRelease() {
        const n = ++pushes;
        if (n === 1) await new Promise((resolve) => setImmediate(resolve));
        else await hung;
        return { ok: true, release_id: n };
      },
    };
    const { store, inner } = watchedStore(freshFile());
    const outbox = createReleaseOutbox({ client: sender, store, concurrency: 1, autoStart: false, logger: silent });
    try {
      const first = await outbox.enqueue({ title: 'Track 1', remote_track_id: 't-1' });
      await outbox.enqueue({ title: 'Track 2', remote_track_id: 't-2' });
      const recorded = new Promise<number>((resolve) => outbox.on('delivered', (event) => resolve(event.id)));
      outbox.start();
      const began = performance.now();
      // Held while the second push is under way (it hangs), then written by the hold's timer.
      expect(await recorded).toBe(first.id);
      expect(pushes).toBe(2);
      expect(performance.now() - began).toBeLessThan(1000);
      expect((await outbox.list({ state: 'delivered' })).map((row) => row.id)).toEqual([first.id]);
    } finally {
      releaseHung();
      await outbox.close();
      await inner.close();
    }
  });

  it('records again only the outcomes a batch failed to record, so each delivered release is told once', async () => {
    const gate = gatedSender();
    const ticker = setInterval(gate.answerWaiting, 2);
    const { store, inner } = watchedStore(freshFile());
    const singles: number[] = [];
    let partials = 0;
    // A batch that records its first half, then loses its connection (say): the rest are not recorded.
    const flaky: OutboxStore = {
      ...store,
      async settle(claim, owner, outcome, nowMs) {
        singles.push(claim.id);
        return inner.settle(claim, owner, outcome, nowMs);
      },
      async settleMany(settles, owner) {
        if (settles.length < 2) return (store.settleMany as NonNullable<OutboxStore['settleMany']>)(settles, owner);
        const half = Math.ceil(settles.length / 2);
        const recorded = await (store.settleMany as NonNullable<OutboxStore['settleMany']>)(settles.slice(0, half), owner);
        partials++;
        throw new PartialSettleError([...recorded, ...settles.slice(half).map(() => undefined)], new Error('connection lost'));
      },
    };
    const outbox = createReleaseOutbox({ client: gate.sender, store: flaky, concurrency: 4, autoStart: false, logger: silent });
    const delivered: number[] = [];
    outbox.on('delivered', (event) => delivered.push(event.id));
    try {
      await enqueueTracks(outbox, 60);
      outbox.start();
      await outbox.drain({ signal: AbortSignal.timeout(20_000) });
      expect(partials).toBeGreaterThan(0);
      // Each release told delivered exactly once: none read back as 'stale' after being recorded twice.
      expect(delivered).toHaveLength(60);
      expect(new Set(delivered).size).toBe(60);
      expect(new Set(singles).size).toBe(singles.length);
      expect(await inner.counts()).toMatchObject({ pending: 0, delivered: 60 });
    } finally {
      clearInterval(ticker);
      await outbox.close();
      await inner.close();
    }
  });

  it('hands rows claimed ahead back at close(): another process sends them at once, as never attempted', async () => {
    const file = freshFile();
    const gate = gatedSender();
    const { store, inner, claims } = watchedStore(file);
    const first = createReleaseOutbox({ client: gate.sender, store, concurrency: 1, autoStart: false, logger: silent });
    for (let i = 0; i < 10; i++) await first.enqueue({ title: `Track ${i}`, remote_track_id: `t-${i}` });
    first.start();
    await waitFor(() => gate.active() === 1 && claims.length > 0, 'the first push under way');
    await sleep(20);
    const closing = first.close();
    gate.open();
    await closing;
    await inner.close();
    const reopened = sqliteOutboxStore({ file });
    try {
      const pending = await reopened.list({ state: 'pending', limit: 100 });
      expect(pending).toHaveLength(9);
      // Not leased (no waiting for a lease to run out), no attempt counted, and a note of why.
      for (const row of pending) expect(row).toMatchObject({ leaseOwner: undefined, attempts: 0 });
      expect(pending.filter((row) => row.lastError?.startsWith('not sent: handed back')).length).toBeGreaterThanOrEqual(1);
      const next = gatedSender();
      next.open();
      // A lease left behind would hold its row for a minute: a drain this short would fail.
      const second = createReleaseOutbox({ client: next.sender, store: reopened, leaseMs: 60_000, logger: silent });
      try {
        await second.drain({ signal: AbortSignal.timeout(3000) });
        expect(next.bodies).toHaveLength(9);
      } finally {
        await second.close();
      }
    } finally {
      await reopened.close();
    }
  });

  it('sends no row claimed ahead whose lease has run short while it waited: it goes back and is claimed again', async () => {
    // Lease 5.1 s, push 1 ms, margin 5 s: a row may wait 99 ms for a slot, timed on a monotonic clock.
    const gate = gatedSender(1);
    const { store, inner, batches } = watchedStore(freshFile());
    const outbox = createReleaseOutbox({ client: gate.sender, store, concurrency: 1, leaseMs: 5100, autoStart: false, logger: silent });
    try {
      await enqueueTracks(outbox, 3);
      outbox.start();
      await waitFor(() => gate.active() === 1, 'the first push under way');
      await sleep(300);
      gate.open();
      await outbox.drain({ signal: AbortSignal.timeout(5000) });
      expect(gate.bodies).toHaveLength(3);
      const handedBack = batches.flat().filter((settle) => settle.outcome.kind === 'retry' && settle.outcome.notSent === true);
      // Both waited 300 ms behind the first push; on a busy machine one may wait too long again.
      expect(new Set(handedBack.map((settle) => settle.claim.remoteTrackId))).toEqual(new Set(['t-1', 't-2']));
      const rows = await outbox.list({ state: 'delivered', limit: 10 });
      expect(rows.map((row) => row.attempts)).toEqual([1, 1, 1]);
    } finally {
      await outbox.close();
      await inner.close();
    }
  });

  it('claims fewer rows ahead for a slow mother, so none waits out its lease and goes back unsent', async () => {
    // Lease 6 s, push timeout 200 ms, margin 5 s: a row may wait 800 ms for the one slot. Each push
    // takes 50 ms: 32 rows ahead would keep the last waiting 1.6 s; 8 wait 400 ms.
    const bodies: string[] = [];
    const sender: ReleaseSender = {
      panelId: PANEL,
      timeoutMs: 200,
      async pushSerializedRelease(body) {
        await sleep(50);
        bodies.push(body);
        return { ok: true, release_id: bodies.length };
      },
    };
    const { store, inner, claims, batches } = watchedStore(freshFile());
    const outbox = createReleaseOutbox({ client: sender, store, concurrency: 1, leaseMs: 6000, autoStart: false, logger: silent });
    try {
      await enqueueTracks(outbox, 40);
      outbox.start();
      await outbox.drain({ signal: AbortSignal.timeout(20_000) });
      expect(bodies).toHaveLength(40);
      expect(batches.flat().filter((settle) => settle.outcome.kind === 'retry')).toEqual([]);
      expect(Math.max(...claims.map((claim) => claim.limit))).toBeLessThanOrEqual(1 + 8);
    } finally {
      await outbox.close();
      await inner.close();
    }
  });

  it('claims ahead nothing, and hands nothing back, when the lease leaves no room to wait', async () => {
    // Lease exactly push + margin (allowed): every row is claimed for a free slot and sent.
    const gate = gatedSender(1000);
    gate.open();
    const { store, inner, batches } = watchedStore(freshFile());
    const outbox = createReleaseOutbox({ client: gate.sender, store, concurrency: 2, leaseMs: 6000, autoStart: false, logger: silent });
    try {
      await enqueueTracks(outbox, 20);
      outbox.start();
      await outbox.drain({ signal: AbortSignal.timeout(5000) });
      expect(gate.bodies).toHaveLength(20);
      expect(batches.flat().filter((settle) => settle.outcome.kind === 'retry')).toEqual([]);
    } finally {
      await outbox.close();
      await inner.close();
    }
  });
});

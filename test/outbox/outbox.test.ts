import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { MotherClientOptions } from '../../src/client/mother-client.js';
import type { MotherEmulator } from '../../src/emulator/emulator.js';
import { AuthenticationError, InvalidReleaseError } from '../../src/errors.js';
import type { OutboxEventName, OutboxEvents } from '../../src/outbox/events.js';
import type { ReleaseOutboxOptions } from '../../src/outbox/options.js';
import { createReleaseOutbox, type ReleaseOutbox } from '../../src/outbox/outbox.js';
import { memoryOutboxStore } from '../../src/outbox/stores/memory/memory-store.js';
import { API_KEY, API_SECRET, clientFor, failure, sleep, startEmulator, waitFor } from '../support/helpers.js';

let emulator: MotherEmulator;
const dir = mkdtempSync(join(tmpdir(), 'outbox-'));
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(async () => {
  await emulator.close();
  rmSync(dir, { recursive: true, force: true });
});

const opened: ReleaseOutbox[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((outbox) => outbox.close()));
  emulator.setFaults({});
  emulator.setPanel(API_KEY, { apiSecret: API_SECRET });
  emulator.reset();
});

let fileCounter = 0;
const freshFile = () => join(dir, `outbox-${++fileCounter}.db`);
const quietLogger = () => ({ warn: vi.fn(), error: vi.fn() });

// Small delays so retries happen within a test; the jitter is pinned to the middle of the window.
const FAST = { baseDelayMs: 20, maxDelayMs: 100, authRetryDelayMs: 150, pollIntervalMs: 20, random: () => 0.5 } as const;

function outboxFor(options: Partial<ReleaseOutboxOptions> = {}, client: Partial<MotherClientOptions> = {}): ReleaseOutbox {
  const outbox = createReleaseOutbox({
    client: clientFor(emulator, { timeoutMs: 1000, ...client }),
    file: ':memory:',
    logger: quietLogger(),
    ...FAST,
    ...options,
  });
  opened.push(outbox);
  return outbox;
}

/** Records every event of an outbox, in order. */
function recordEvents(outbox: ReleaseOutbox) {
  const seen: { [E in OutboxEventName]: OutboxEvents[E][] } = {
    delivered: [],
    retrying: [],
    dead: [],
    error: [],
    pruned: [],
    cancelled: [],
    paused: [],
    resumed: [],
  };
  for (const name of Object.keys(seen) as OutboxEventName[]) outbox.on(name, (event) => (seen[name] as unknown[]).push(event));
  return seen;
}

const drained = (outbox: ReleaseOutbox) => outbox.drain({ signal: AbortSignal.timeout(10_000) });
const titles = () => emulator.releases.map((r) => r.release.title);

describe('createReleaseOutbox()', () => {
  describe('when constructed', () => {
    const client = { panelId: 'panel-a', pushSerializedRelease: async () => ({ ok: true as const, release_id: 1 }) };
    const cases: [string, unknown, RegExp][] = [
      ['a misspelt option', { client, file: ':memory:', concurency: 2 }, /unknown option `concurency`.*Did you mean `concurrency`/],
      ['no client', { file: ':memory:' }, /`client` must be a mother client.*createMotherClient/],
      ['neither file nor store', { client }, /`file` is required \(or `store`\)/],
      ['both file and store', { client, file: ':memory:', store: {} }, /`file` and `store` were both given/],
      ['a store without the methods', { client, store: { enqueue() {} } }, /`store` is not an outbox store \(no `claimDue\(\)` method\)/],
      ['zero concurrency', { client, file: ':memory:', concurrency: 0 }, /`concurrency` must be an integer of at least 1/],
      ['maxDelayMs below baseDelayMs', { client, file: ':memory:', baseDelayMs: 5000, maxDelayMs: 100 }, /`maxDelayMs` \(100\) is below `baseDelayMs`/],
      ['a logger without error()', { client, file: ':memory:', logger: { warn() {} } }, /`logger` must have `warn` and `error`/],
      ['a non-boolean autoStart', { client, file: ':memory:', autoStart: 'yes' }, /`autoStart` must be true or false/],
      [
        'a lease shorter than a push',
        { client: { ...client, timeoutMs: 10_000 }, file: ':memory:', leaseMs: 5000 },
        /`leaseMs` \(5000\) must exceed the client's `timeoutMs` \(10000\) by at least 5000 ms/,
      ],
      [
        'a lease that leaves no time to record the outcome',
        { client: { ...client, timeoutMs: 1000 }, file: ':memory:', leaseMs: 1500 },
        /`leaseMs` \(1500\) must exceed the client's `timeoutMs` \(1000\) by at least 5000 ms.*Set `leaseMs` to 6000 or more/,
      ],
    ];
    for (const [what, options, message] of cases) {
      it(`throws a TypeError naming the fix for ${what}`, () => {
        expect(() => createReleaseOutbox(options as ReleaseOutboxOptions)).toThrow(TypeError);
        expect(() => createReleaseOutbox(options as ReleaseOutboxOptions)).toThrow(message);
      });
    }
  });

  describe('when enqueuing', () => {
    it('rejects an invalid release naming the field, and stores nothing', async () => {
      const outbox = outboxFor();
      const missingTitle = await failure(outbox.enqueue({ title: '  ' }));
      expect(missingTitle).toBeInstanceOf(InvalidReleaseError);
      expect(missingTitle).toMatchObject({ field: 'title', message: 'Missing release title.' });
      expect(await failure(outbox.enqueue({ title: 'x', isrc: 'nope' }))).toMatchObject({ field: 'isrc' });
      expect(await failure(outbox.enqueue({ title: 'x', colour: 'red' } as never))).toMatchObject({ field: 'colour' });
      expect(await outbox.stats()).toMatchObject({ pending: 0, delivered: 0, dead: 0 });
      expect(emulator.requests).toHaveLength(0);
    });

    it('resolves once stored, then delivers the exact bytes and reports the release_id', async () => {
      const outbox = outboxFor();
      const events = recordEvents(outbox);
      const queued = await outbox.enqueue({ title: 'Café 🎵', isrc: 'us-rc1-76-07839', remote_track_id: 'trk-1' });
      expect(queued).toEqual({ id: 1, state: 'pending', releaseId: undefined, deduplicated: undefined });
      await drained(outbox);
      const received = emulator.releases[0];
      expect(received?.release).toEqual({ title: 'Café 🎵', isrc: 'USRC17607839', remote_track_id: 'trk-1' });
      expect(events.delivered).toEqual([
        {
          id: 1,
          panel: expect.stringMatching(/^[0-9a-f]{32}$/),
          remoteTrackId: 'trk-1',
          releaseId: received?.releaseId,
          attempts: 1,
          durationMs: expect.any(Number),
          superseded: false,
          unconfirmed: undefined,
        },
      ]);
      expect(await outbox.list()).toMatchObject([{ id: 1, state: 'delivered', releaseId: received?.releaseId, release: received?.release, leased: false }]);
    });
  });

  describe('get(id)', () => {
    it('returns the release with that id, or undefined, even from a store that ignores the id filter', async () => {
      const memory = memoryOutboxStore();
      const ignoresId: typeof memory = { ...memory, list: ({ state, limit }) => memory.list({ state, limit }) };
      const outbox = createReleaseOutbox({ client: clientFor(emulator), store: ignoresId, autoStart: false, logger: quietLogger() });
      opened.push(outbox);
      await outbox.enqueue({ title: 'first' });
      await outbox.enqueue({ title: 'second' });
      expect((await outbox.get(1))?.release.title).toBe('first');
      expect(await outbox.get(2)).toBeUndefined(); // the store answered row 1: not trusted
      expect(await outbox.get(99)).toBeUndefined();
    });
  });

  describe('when the mother accepts', () => {
    for (const successStatus of [200, 201, 202]) {
      it(`marks the release delivered on HTTP ${successStatus}`, async () => {
        emulator.setFaults({ successStatus });
        const outbox = outboxFor();
        await outbox.enqueue({ title: `Status ${successStatus}` });
        expect(await drained(outbox)).toMatchObject({ pending: 0, delivered: 1, dead: 0 });
      });
    }
  });

  describe('when the mother fails for a while', () => {
    const cases: [string, Parameters<MotherEmulator['setFaults']>[0], Partial<MotherClientOptions>, string][] = [
      ['is down (503 HTML)', { down: true }, {}, 'HTTP_STATUS'],
      ['answers an HTML 500', { htmlError: true }, {}, 'HTTP_STATUS'],
      ['answers 502', { status: 502 }, {}, 'HTTP_STATUS'],
      ['answers 408', { status: 408 }, {}, 'HTTP_STATUS'],
      ['is too slow', { delayMs: 400 }, { timeoutMs: 100 }, 'TIMEOUT'],
      ['cuts its JSON error answer short', { status: 502, truncateJson: true }, {}, 'HTTP_STATUS'],
    ];
    for (const [what, faults, client, code] of cases) {
      it(`retries with backoff when it ${what}, then delivers`, async () => {
        emulator.setFaults(faults);
        const outbox = outboxFor({}, client);
        const events = recordEvents(outbox);
        const { id } = await outbox.enqueue({ title: what, remote_track_id: 'trk-retry' });
        await waitFor(() => events.retrying.length >= 2, 'two retries');
        expect(events.retrying[0]).toMatchObject({ id, remoteTrackId: 'trk-retry', attempts: 1, error: { code } });
        expect(events.retrying[0]?.delayMs).toBeLessThanOrEqual(FAST.maxDelayMs);
        expect(await outbox.stats()).toMatchObject({ delivered: 0, dead: 0 });
        emulator.setFaults({});
        expect(await drained(outbox)).toMatchObject({ pending: 0, delivered: 1, dead: 0 });
        expect(events.dead).toEqual([]);
        expect(emulator.releases.length).toBeGreaterThanOrEqual(1);
      });
    }

    it('schedules retries on the injected clock, not the wall clock', async () => {
      let clock = 1_700_000_000_000;
      emulator.setFaults({ down: true });
      const outbox = outboxFor({ now: () => clock, baseDelayMs: 60_000, maxDelayMs: 600_000 });
      const events = recordEvents(outbox);
      await outbox.enqueue({ title: 'Later' });
      await waitFor(() => events.retrying.length === 1, 'a retry');
      expect(events.retrying[0]).toMatchObject({ delayMs: 30_000, nextAttemptAt: clock + 30_000 });
      emulator.setFaults({});
      await sleep(150);
      expect(await outbox.stats()).toMatchObject({ pending: 1, delivered: 0 });
      clock += 30_000;
      expect(await drained(outbox)).toMatchObject({ pending: 0, delivered: 1 });
      expect(emulator.requests).toHaveLength(2);
    });

    it('sends again when the answer was lost after the mother stored the release (at-least-once)', async () => {
      emulator.setFaults({ dropAnswer: true });
      const outbox = outboxFor();
      const events = recordEvents(outbox);
      await outbox.enqueue({ title: 'Lost answer' });
      await waitFor(() => events.retrying.length >= 1, 'a retry');
      emulator.setFaults({});
      await drained(outbox);
      expect(titles().filter((t) => t === 'Lost answer').length).toBeGreaterThanOrEqual(2);
      expect(events.delivered).toHaveLength(1);
    });

    it('reports an unreachable mother as a network error and keeps the release', async () => {
      const server = createServer();
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const { port } = server.address() as { port: number };
      await new Promise((resolve) => server.close(resolve));
      const outbox = outboxFor({}, { baseUrl: `http://127.0.0.1:${port}/api` });
      const events = recordEvents(outbox);
      await outbox.enqueue({ title: 'Nowhere' });
      await waitFor(() => events.retrying.length >= 1, 'a retry');
      expect(events.retrying[0]?.error).toMatchObject({ code: 'NETWORK' });
      expect(await outbox.stats()).toMatchObject({ pending: 1, dead: 0 });
    });

    it('honours Retry-After on a 429, for the row and for the whole worker', async () => {
      emulator.setFaults({ status: 429, retryAfterSeconds: 1 });
      const outbox = outboxFor({ maxDelayMs: 2000 });
      const events = recordEvents(outbox);
      await outbox.enqueue({ title: 'Throttled' });
      await waitFor(() => events.retrying.length >= 1, 'a retry');
      const [retry] = events.retrying;
      expect(retry?.delayMs).toBeGreaterThanOrEqual(1000);
      expect(retry?.delayMs).toBeLessThanOrEqual(2000);
      expect((await outbox.stats()).pausedUntil).toBeGreaterThanOrEqual(Date.now() + 500);
      await outbox.enqueue({ title: 'Also throttled' });
      await sleep(200);
      expect(emulator.requests).toHaveLength(1);
      emulator.setFaults({});
      expect(await drained(outbox)).toMatchObject({ delivered: 2 });
    });

    it('retries slowly on 401, reports an error, never drops the release, and delivers once the credentials work', async () => {
      emulator.setPanel(API_KEY, { apiSecret: 'rotated-secret' });
      const outbox = outboxFor();
      const events = recordEvents(outbox);
      await outbox.enqueue({ title: 'Rotated', remote_track_id: 'trk-auth' });
      await waitFor(() => events.error.length >= 1, 'an error event');
      expect(events.error[0]?.error).toBeInstanceOf(AuthenticationError);
      expect(events.error[0]).toMatchObject({ id: 1, remoteTrackId: 'trk-auth' });
      expect(events.retrying[0]).toMatchObject({ delayMs: FAST.authRetryDelayMs });
      expect(await outbox.stats()).toMatchObject({ pending: 1, dead: 0 });
      emulator.setPanel(API_KEY, { apiSecret: API_SECRET });
      expect(await drained(outbox)).toMatchObject({ delivered: 1, dead: 0 });
      expect(events.dead).toEqual([]);
    });
  });

  describe('when the mother refuses a release', () => {
    it("marks it dead with the mother's 422 message, and retry() sends it again", async () => {
      emulator.setFaults({ status: 422 });
      const outbox = outboxFor();
      const events = recordEvents(outbox);
      const { id } = await outbox.enqueue({ title: 'Refused' });
      await waitFor(() => events.dead.length === 1, 'a dead event');
      expect(events.dead[0]).toMatchObject({ id, attempts: 1, message: 'The mother rejected the request: Injected failure (HTTP 422).' });
      expect(await outbox.list({ state: 'dead' })).toMatchObject([{ id, lastError: 'The mother rejected the request: Injected failure (HTTP 422).' }]);
      expect(emulator.requests).toHaveLength(1);
      emulator.setFaults({});
      expect(await outbox.retry(id)).toBe(true);
      expect(await outbox.retry(id)).toBe(false);
      expect(await drained(outbox)).toMatchObject({ delivered: 1, dead: 0 });
    });

    for (const [what, faults] of [
      ['405', { status: 405 }],
      ['400', { status: 400 }],
      ['a redirect', { redirectTo: 'http://127.0.0.1:9/elsewhere' }],
    ] as const) {
      it(`marks it dead on ${what}, and retryAllDead() requeues every dead release`, async () => {
        emulator.setFaults(faults);
        const logger = quietLogger();
        const outbox = outboxFor({ logger });
        await outbox.enqueue({ title: 'One' });
        await outbox.enqueue({ title: 'Two' });
        expect(await drained(outbox)).toMatchObject({ pending: 0, dead: 2 });
        // Nobody listens for 'dead': the logger hears about it instead.
        expect(logger.warn).toHaveBeenCalledWith(
          expect.stringMatching(/release #1 is dead after 1 attempt; the mother said: /),
          expect.objectContaining({ event: 'release_dead', release: 1, attempt: 1, code: expect.any(String) }),
        );
        emulator.setFaults({});
        expect(await outbox.retryAllDead()).toBe(2);
        expect(await drained(outbox)).toMatchObject({ delivered: 2, dead: 0 });
      });
    }
  });

  describe('when de-duplicating by remote_track_id', () => {
    it('replaces a pending payload in place, so only the latest is sent', async () => {
      const outbox = outboxFor({ autoStart: false });
      await outbox.enqueue({ title: 'Draft', remote_track_id: 't1' });
      await outbox.enqueue({ title: 'Other', remote_track_id: 't2' });
      expect(await outbox.enqueue({ title: 'Final', remote_track_id: 't1' })).toEqual({
        id: 1,
        state: 'pending',
        releaseId: undefined,
        deduplicated: 'replaced-pending',
      });
      outbox.start();
      await drained(outbox);
      expect(titles()).toEqual(['Final', 'Other']);
    });

    it('answers identical delivered content with its release_id, and sends changed content as an update', async () => {
      const outbox = outboxFor();
      await outbox.enqueue({ title: 'Song', isrc: 'US-RC1-76-07839', remote_track_id: 't1' });
      await drained(outbox);
      const releaseId = emulator.releases[0]?.releaseId;
      expect(await outbox.enqueue({ title: 'Song', isrc: 'USRC17607839', remote_track_id: 't1' })).toEqual({
        id: 1,
        state: 'delivered',
        releaseId,
        deduplicated: 'already-delivered',
      });
      expect(await outbox.enqueue({ title: 'Song (edit)', isrc: 'USRC17607839', remote_track_id: 't1' })).toMatchObject({
        id: 2,
        state: 'pending',
        deduplicated: undefined,
      });
      await drained(outbox);
      expect(titles()).toEqual(['Song', 'Song (edit)']);
    });

    it('always sends releases without remote_track_id', async () => {
      const outbox = outboxFor();
      await outbox.enqueue({ title: 'Twice' });
      await outbox.enqueue({ title: 'Twice' });
      await drained(outbox);
      expect(titles()).toEqual(['Twice', 'Twice']);
    });

    it('does not lose an update made while the previous payload is in flight', async () => {
      emulator.setFaults({ delayMs: 300 });
      const outbox = outboxFor();
      const events = recordEvents(outbox);
      await outbox.enqueue({ title: 'v1', remote_track_id: 't1' });
      await waitFor(async () => (await outbox.list())[0]?.leased, 'v1 in flight');
      expect(await outbox.enqueue({ title: 'v2', remote_track_id: 't1' })).toMatchObject({ id: 1, deduplicated: 'replaced-pending' });
      await drained(outbox);
      expect(titles()).toEqual(['v1', 'v2']);
      expect(events.delivered.map((e) => [e.id, e.superseded])).toEqual([
        [1, true],
        [1, false],
      ]);
      expect(await outbox.enqueue({ title: 'v2', remote_track_id: 't1' })).toMatchObject({ id: 1, deduplicated: 'already-delivered' });
    });
  });

  describe('when closed and reopened on the same file', () => {
    it('keeps pending releases and delivers them after the restart', async () => {
      const file = freshFile();
      emulator.setFaults({ down: true });
      const first = outboxFor({ file });
      const events = recordEvents(first);
      for (const title of ['A', 'B', 'C']) await first.enqueue({ title, remote_track_id: `trk-${title}` });
      await waitFor(() => events.retrying.length >= 1, 'a failed attempt');
      await first.close();
      const second = outboxFor({ file, autoStart: false });
      expect(await second.stats()).toMatchObject({ pending: 3, delivered: 0 });
      emulator.setFaults({});
      second.start();
      expect(await drained(second)).toMatchObject({ pending: 0, delivered: 3 });
      expect(titles().sort()).toEqual(['A', 'B', 'C']);
    });

    it('waits on close() for a push in flight and records it', async () => {
      const file = freshFile();
      emulator.setFaults({ delayMs: 200 });
      const first = outboxFor({ file });
      await first.enqueue({ title: 'In flight' });
      await waitFor(async () => (await first.stats()).inFlight === 1, 'a push in flight');
      await first.close();
      await expect(first.enqueue({ title: 'late' })).rejects.toThrow(/after close\(\)/);
      const second = outboxFor({ file, autoStart: false });
      expect(await second.stats()).toMatchObject({ pending: 0, delivered: 1 });
    });
  });

  describe('drain()', () => {
    it('needs a running worker, and gives up when its signal aborts', async () => {
      const idle = outboxFor({ autoStart: false });
      await expect(idle.drain()).rejects.toThrow(/call outbox.start\(\) first/);
      emulator.setFaults({ down: true });
      const outbox = outboxFor();
      await outbox.enqueue({ title: 'Stuck' });
      await expect(outbox.drain({ signal: AbortSignal.timeout(100) })).rejects.toMatchObject({ name: 'TimeoutError' });
    });
  });

  describe('when a listener throws', () => {
    it('logs it and keeps delivering', async () => {
      const logger = quietLogger();
      const outbox = outboxFor({ logger });
      outbox.on('delivered', () => {
        throw new Error('listener bug');
      });
      await outbox.enqueue({ title: 'One' });
      await outbox.enqueue({ title: 'Two' });
      expect(await drained(outbox)).toMatchObject({ delivered: 2 });
      expect(logger.error).toHaveBeenCalledWith(expect.stringMatching(/'delivered' listener threw: /), { event: 'listener_threw', listener: 'delivered' });
    });
  });

  describe('when its store fails', () => {
    it('reports the trouble once, not at every poll, and again after a recovery', async () => {
      const store = memoryOutboxStore();
      let down = true;
      const flaky = {
        ...store,
        claimDue: (request: Parameters<typeof store.claimDue>[0]) => {
          if (down) throw new Error('database is restarting');
          return store.claimDue(request);
        },
      };
      let clock = Date.now();
      const outbox = createReleaseOutbox({ client: clientFor(emulator), store: flaky, logger: quietLogger(), ...FAST, now: () => clock, autoStart: false });
      opened.push(outbox);
      const errors: string[] = [];
      outbox.on('error', (event) => errors.push(event.error.message));
      outbox.start();
      await waitFor(() => errors.length > 0, 'the first report');
      await sleep(200); // about ten polls at 20 ms
      expect(errors).toEqual(['database is restarting']);
      clock += 61_000; // a minute later it is said again
      await waitFor(() => errors.length > 1, 'the reminder');
      down = false;
      await outbox.enqueue({ title: 'After the outage' });
      expect(await drained(outbox)).toMatchObject({ delivered: 1 });
      down = true;
      await waitFor(() => errors.length > 2, 'the report of a new outage');
      expect(errors).toHaveLength(3);
    });
  });
});

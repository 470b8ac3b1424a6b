import http, { type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createMotherClient } from '../../src/client/mother-client.js';
import type { MotherEmulator } from '../../src/emulator/emulator.js';
import type { DeliveredEvent } from '../../src/outbox/events.js';
import { createReleaseOutbox, type ReleaseOutbox } from '../../src/outbox/outbox.js';
import type { OutboxStore } from '../../src/outbox/store.js';
import { memoryOutboxStore } from '../../src/outbox/stores/memory/memory-store.js';
import { clientFor, failure, sleep, startEmulator, waitFor } from '../support/helpers.js';

// Duplicates outside the stated guarantee (no crash, no lost answer) must be impossible.
let emulator: MotherEmulator;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(() => emulator.close());
const opened: ReleaseOutbox[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((outbox) => outbox.close()));
  emulator.setFaults({});
  emulator.reset();
});

const titles = () => emulator.releases.map((r) => r.release.title).sort();

/** An outbox that retries within milliseconds, recording its 'delivered' events. */
function fastOutbox(client: ReturnType<typeof clientFor>) {
  const outbox = createReleaseOutbox({
    client,
    file: ':memory:',
    baseDelayMs: 10,
    maxDelayMs: 20,
    pollIntervalMs: 10,
    logger: { warn: vi.fn(), error: vi.fn() },
  });
  opened.push(outbox);
  const delivered: DeliveredEvent[] = [];
  outbox.on('delivered', (event) => delivered.push(event));
  return { outbox, delivered };
}

describe('the release outbox', () => {
  it('never claims a release it is still sending, even when the wall clock jumps past the lease', async () => {
    let jump = 0;
    const outbox = createReleaseOutbox({
      client: clientFor(emulator, { timeoutMs: 3000 }),
      file: ':memory:',
      leaseMs: 8000,
      pollIntervalMs: 20,
      now: () => Date.now() + jump,
      logger: { warn: vi.fn(), error: vi.fn() },
    });
    opened.push(outbox);
    const delivered: DeliveredEvent[] = [];
    outbox.on('delivered', (event) => delivered.push(event));
    emulator.setFaults({ delayMs: 600 });
    await outbox.enqueue({ title: 'First' });
    await waitFor(async () => (await outbox.stats()).inFlight > 0, 'the push to start');
    jump = 60_000; // NTP step or a suspended VM: the lease "expires" while the push is in flight
    await outbox.enqueue({ title: 'Second' }); // kicks the worker, which claims due rows again
    await outbox.drain({ signal: AbortSignal.timeout(10_000) });
    expect(titles()).toEqual(['First', 'Second']);
    expect(delivered).toHaveLength(2);
  });

  it('sends a payload replaced in flight as soon as the older send is recorded, not a lease later', async () => {
    const store = memoryOutboxStore();
    let outbox: ReleaseOutbox | undefined;
    // Another release queued at the moment v1's outcome is recorded (v2 replaced v1 in flight):
    // its enqueue makes the worker claim while it still holds v1's row.
    const racing: OutboxStore = {
      ...store,
      // The worker records outcomes through settleMany() (in batches) when the store has it.
      async settleMany(settles, owner) {
        const results = await (store.settleMany as NonNullable<OutboxStore['settleMany']>)(settles, owner);
        if (results.includes('superseded')) await outbox?.enqueue({ title: 'Other' });
        return results;
      },
    };
    outbox = createReleaseOutbox({ client: clientFor(emulator), store: racing, pollIntervalMs: 20, logger: { warn: vi.fn(), error: vi.fn() } });
    opened.push(outbox);
    emulator.setFaults({ delayMs: 300 });
    await outbox.enqueue({ title: 'v1', remote_track_id: 'trk-race' });
    await waitFor(async () => (await (outbox as ReleaseOutbox).stats()).inFlight > 0, 'v1 to be in flight');
    await outbox.enqueue({ title: 'v2', remote_track_id: 'trk-race' });
    // With the default 60 s lease, a row leased to itself again would miss this deadline.
    await outbox.drain({ signal: AbortSignal.timeout(5000) });
    expect(titles()).toEqual(['Other', 'v1', 'v2']);
  });

  it('starts a release enqueued while a claim is under way at once, not at the next poll', async () => {
    const store = memoryOutboxStore();
    const slowClaims: OutboxStore = {
      ...store,
      claimDue: async (request) => {
        await sleep(40);
        return store.claimDue(request);
      },
    };
    const t0 = Date.now();
    const started: Record<string, number> = {};
    const client = {
      timeoutMs: 1000,
      panelId: 'panel-a',
      async pushSerializedRelease(body: string) {
        started[JSON.parse(body).release.title] = Date.now() - t0;
        await sleep(1500);
        return { ok: true as const, release_id: 1 };
      },
    };
    const outbox = createReleaseOutbox({ client, store: slowClaims, concurrency: 4, pollIntervalMs: 1000, logger: { warn: vi.fn(), error: vi.fn() } });
    opened.push(outbox);
    await sleep(60); // the start-up claim is over: the worker is idle
    await outbox.enqueue({ title: 'r1' });
    await sleep(10); // r1's claim is under way
    await outbox.enqueue({ title: 'r2' });
    await waitFor(() => started.r2 !== undefined, 'r2 to start');
    // Three slots were free: r2 waits for a claim (40 ms), not for the next poll (1 s).
    expect((started.r2 as number) - (started.r1 as number)).toBeLessThan(500);
  });

  it('records a 2xx it cannot parse as delivered and never sends it again', async () => {
    emulator.setFaults({ truncateJson: true, endpoint: 'release.php' });
    const { outbox, delivered } = fastOutbox(clientFor(emulator, { timeoutMs: 1000 }));
    const { id } = await outbox.enqueue({ title: 'Stored once', remote_track_id: 'trk-2xx' });
    expect(await outbox.drain({ signal: AbortSignal.timeout(10_000) })).toMatchObject({ pending: 0, delivered: 1, dead: 0 });
    await new Promise((r) => setTimeout(r, 200));
    expect(titles()).toEqual(['Stored once']);
    expect(delivered).toEqual([
      expect.objectContaining({ id, releaseId: undefined, unconfirmed: expect.stringMatching(/accepted it, but its answer was unusable/) }),
    ]);
    const [row] = await outbox.list();
    expect(row).toMatchObject({ state: 'delivered', releaseId: undefined, lastError: expect.stringMatching(/unusable/) });
    // The same content again is recognised as delivered: the mother has it.
    expect(await outbox.enqueue({ title: 'Stored once', remote_track_id: 'trk-2xx' })).toMatchObject({ deduplicated: 'already-delivered' });
  });

  it("keeps one push, the clock-skew retry included, within the client's timeoutMs", async () => {
    // The first attempt gets a 401 (our clock is an hour off), the retry is slow: together they
    // used to take twice timeoutMs and outlive a lease sized for one.
    emulator.setFaults({ clockOffsetSeconds: 3600, delayMs: 600 });
    const client = clientFor(emulator, { timeoutMs: 1000 });
    const error = await failure(client.pushRelease({ title: 'Slow twice' }));
    expect(error).toMatchObject({ code: 'TIMEOUT' });
  });
});

describe('a 2xx whose body never fully arrives', () => {
  for (const [what, finish] of [
    ['the connection resets after the status line', (res: ServerResponse) => res.socket?.destroy()],
    ['the body stalls until the timeout', (_res: ServerResponse) => {}],
  ] as const) {
    it(`is recorded as delivered, not resent, when ${what}`, async () => {
      let posts = 0;
      const server = http.createServer((req, res) => {
        req.resume();
        posts++;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"ok":true,');
        setTimeout(() => finish(res), 20);
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const { port } = server.address() as AddressInfo;
      const client = createMotherClient({ baseUrl: `http://127.0.0.1:${port}/api`, apiKey: 'pk', apiSecret: 'sk', timeoutMs: 500 });
      const { outbox, delivered } = fastOutbox(client);
      try {
        await outbox.enqueue({ title: 'Half an answer' });
        expect(await outbox.drain({ signal: AbortSignal.timeout(10_000) })).toMatchObject({ delivered: 1, pending: 0 });
        await new Promise((r) => setTimeout(r, 300));
        expect(posts).toBe(1);
        expect(delivered[0]).toMatchObject({ releaseId: undefined, unconfirmed: expect.stringMatching(/HTTP 200/) });
      } finally {
        server.closeAllConnections();
        await new Promise((r) => server.close(r));
      }
    });
  }
});

import { afterEach, describe, expect, it } from 'vitest';
import type { DeliveredEvent } from '../../../src/outbox/events.js';
import { createReleaseOutbox, type ReleaseOutbox } from '../../../src/outbox/outbox.js';
import type { OutboxStore } from '../../../src/outbox/store.js';
import { mysqlTestStore, postgresTestStore, SERVERS, STORE_KINDS, type TestStore } from '../../support/four-stores.js';
import { type LossyProxy, lossyProxy } from '../../support/lossy-proxy.js';
import { enqueueTracks, gatedSender, PANEL } from '../../support/worker-fakes.js';

// An outcome whose commit succeeds but whose answer is lost (the connection drops after the
// commit) is recorded again by the worker; the store must then say it holds that very outcome,
// so the release's 'delivered' event is emitted, once, whichever statement's answer arrived.
const silent = { warn() {}, error() {} };
const RELEASES = 60;
const opened: { outbox: ReleaseOutbox; test: TestStore; proxy: LossyProxy | undefined }[] = [];
afterEach(async () => {
  for (const { outbox, test, proxy } of opened.splice(0)) {
    await outbox.close();
    await test.close();
    await proxy?.close();
  }
});

/** Delivers RELEASES releases at concurrency 4 (answers come together, so outcomes go in batches); what the mother and the listeners saw. */
async function deliverAll(test: TestStore, store: OutboxStore = test.store, proxy?: LossyProxy) {
  const gate = gatedSender();
  const ticker = setInterval(gate.answerWaiting, 2);
  const outbox = createReleaseOutbox({ client: gate.sender, store, concurrency: 4, autoStart: false, logger: silent });
  opened.push({ outbox, test, proxy });
  const delivered: DeliveredEvent[] = [];
  outbox.on('delivered', (event) => delivered.push(event));
  try {
    await enqueueTracks(outbox, RELEASES);
    outbox.start();
    await outbox.drain({ signal: AbortSignal.timeout(30_000) });
  } finally {
    clearInterval(ticker);
  }
  return { sent: gate.bodies, delivered, stats: await outbox.stats() };
}

function expectEveryDeliveryToldOnce({ sent, delivered, stats }: Awaited<ReturnType<typeof deliverAll>>): void {
  expect(stats).toMatchObject({ pending: 0, delivered: RELEASES, dead: 0 });
  // Nothing sent twice, and every delivery told once, with the release_id the mother gave.
  expect(sent).toHaveLength(RELEASES);
  expect(delivered).toHaveLength(RELEASES);
  expect(new Set(delivered.map((event) => event.id)).size).toBe(RELEASES);
  expect(new Set(delivered.map((event) => event.releaseId))).toEqual(new Set(sent.map((_, i) => i + 1)));
}

describe.each(STORE_KINDS)('the outbox on the %s store, when an answer to recording outcomes is lost after the commit', (_kind, create) => {
  it("still emits each release's 'delivered' event once", async () => {
    const test = create();
    const settleMany = test.store.settleMany?.bind(test.store);
    if (!settleMany) throw new Error('every built-in store has settleMany()');
    let batches = 0;
    // The first three batches are recorded for real, then answered with a dropped connection.
    const lossy: OutboxStore = Object.assign(Object.create(test.store) as OutboxStore, {
      async settleMany(...args: Parameters<typeof settleMany>) {
        const results = await settleMany(...args);
        if (batches++ < 3) throw Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' });
        return results;
      },
    });
    const outcome = await deliverAll(test, lossy);
    expect(batches).toBeGreaterThan(3);
    expectEveryDeliveryToldOnce(outcome);
  });
});

describe.each([
  // PostgreSQL: a batch of outcomes (one UPDATE, its own implicit transaction); the worker records
  // each again on its own with another statement, whose answer arrives.
  ['PostgreSQL', SERVERS.postgres, (sent: Buffer) => sent.includes('_settleMany'), postgresTestStore],
  // MySQL: each outcome's own UPDATE (a prepared statement); lost once per row, so the one recording it again arrives.
  ['MySQL', SERVERS.mysql, mysqlOnceEach(), mysqlTestStore],
] as const)('the outbox on %s behind a connection that breaks after a commit', (_kind, server, lose, create) => {
  it("emits each release's 'delivered' event once, and sends nothing twice", async () => {
    if (!STORE_KINDS.some(([kind]) => kind === _kind)) return;
    let picked = 0;
    // Three answers lost, early on (later ones would only slow the test down).
    const proxy = await lossyProxy(server.toString(), (sent) => lose(sent) && picked++ < 3);
    const outcome = await deliverAll(create(proxy.url), undefined, proxy);
    expect(proxy.lost()).toBe(3);
    expectEveryDeliveryToldOnce(outcome);
  });
});

/** Picks the fast-path UPDATE that records a delivery, the first time only for each row. */
function mysqlOnceEach() {
  const seen = new Set<string>();
  return (sent: Buffer): boolean => {
    // COM_STMT_EXECUTE: a 4-byte header, 0x17, the statement's id, then its values in binary,
    // text as it is: the state 'delivered' and the row's content hash (the statement as claimed).
    if (sent.length < 6 || sent[4] !== 0x17) return false;
    const values = sent.subarray(5).toString('latin1');
    const hash = values.includes('delivered') ? /[0-9a-f]{64}/.exec(values)?.[0] : undefined;
    if (hash === undefined || seen.has(hash)) return false;
    seen.add(hash);
    return true;
  };
}

describe.each(STORE_KINDS)('the outbox on the %s store, when the answer to recording a replaced payload’s delivery is lost', (_kind, create) => {
  /**
   * Sends v1 of one track; while it is in flight the artist uploads v2. The first record of an
   * outcome commits and then fails as a dropped connection would; `meanwhile` runs between the two.
   */
  async function replacedInFlight(meanwhile: (store: OutboxStore) => Promise<void>) {
    const test = create();
    let lost = false;
    const loseFirst =
      <A extends unknown[], R>(record: (...args: A) => Promise<R> | R) =>
      async (...args: A): Promise<R> => {
        const results = await record(...args);
        if (lost) return results;
        lost = true;
        await meanwhile(test.store);
        throw Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' });
      };
    const lossy: OutboxStore = Object.assign(Object.create(test.store) as OutboxStore, {
      settle: loseFirst(test.store.settle.bind(test.store)),
      settleMany: test.store.settleMany && loseFirst(test.store.settleMany.bind(test.store)),
    });
    const gate = gatedSender();
    const outbox = createReleaseOutbox({ client: gate.sender, store: lossy, concurrency: 1, autoStart: false, logger: silent });
    opened.push({ outbox, test, proxy: undefined });
    const delivered: DeliveredEvent[] = [];
    outbox.on('delivered', (event) => delivered.push(event));
    await outbox.enqueue({ title: 'v1', remote_track_id: 'song' });
    outbox.start();
    await expect.poll(gate.active, { timeout: 5000 }).toBe(1);
    expect((await outbox.enqueue({ title: 'v2', remote_track_id: 'song' })).deduplicated).toBe('replaced-pending');
    gate.open();
    return { outbox, lost: () => lost, sent: gate.bodies, delivered };
  }
  const titles = (bodies: string[]) => bodies.map((body) => (body.includes('"v1"') ? 'v1' : body.includes('"v2"') ? 'v2' : body));

  it('records the delivery once and tells it once, then sends the newer payload', async () => {
    const { outbox, lost, sent, delivered } = await replacedInFlight(async () => {});
    await outbox.drain({ signal: AbortSignal.timeout(10_000) });
    expect(lost()).toBe(true);
    expect(titles(sent)).toEqual(['v1', 'v2']);
    expect(delivered.map(({ releaseId, superseded }) => ({ releaseId, superseded }))).toEqual([
      { releaseId: 1, superseded: true },
      { releaseId: 2, superseded: false },
    ]);
    // Two deliveries of the track, not three: the history row of v1 is written once.
    expect((await outbox.list({ state: 'delivered' })).map((row) => row.releaseId).sort()).toEqual([1, 2]);
  });

  it('still tells that delivery when another worker delivered the newer payload in between', async () => {
    const { outbox, lost, sent, delivered } = await replacedInFlight(async (store) => {
      const now = Date.now();
      const [row] = await store.claimDue({ owner: 'another-worker', panel: PANEL, limit: 1, nowMs: now + 1, leaseMs: 30_000 });
      if (row === undefined) throw new Error('the newer payload was due at once');
      expect(await store.settle(row, 'another-worker', { kind: 'delivered', releaseId: 77 }, now + 1)).toBe('applied');
    });
    await outbox.drain({ signal: AbortSignal.timeout(10_000) });
    expect(lost()).toBe(true);
    expect(titles(sent)).toEqual(['v1']);
    expect(delivered.map(({ releaseId, superseded }) => ({ releaseId, superseded }))).toEqual([{ releaseId: 1, superseded: true }]);
    expect((await outbox.list({ state: 'delivered' })).map((row) => row.releaseId).sort()).toEqual([1, 77]);
  });
});

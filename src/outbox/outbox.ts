// createReleaseOutbox(): durable release delivery — store first, then a background worker pushes to the mother.

import { createHash, randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { shown } from '../options.js';
import { serializeRelease, validateRelease } from '../release.js';
import { isWellFormedText } from '../text.js';
import { tracedEnqueue } from '../tracing/outbox-spans.js';
import { motherName } from '../tracing/span-attributes.js';
import { createOutboxEmitter, OUTBOX_TELEMETRY, type OutboxTelemetry } from './events.js';
import { operatorApi } from './operations/operator-api.js';
import { Pauses } from './operations/pauses.js';
import { type ReleaseOutboxOptions, resolveOutboxOptions, type StoreSource } from './options.js';
import { entriesOf, type OutboxEntry, type OutboxStats, type ReleaseOutbox } from './outbox-api.js';
import { manyPanelsRouting, singlePanelRouting } from './panels/panel-routing.js';
import { panelScoping } from './panels/panel-scope.js';
import { PanelSenders } from './panels/panel-senders.js';
import { createRetentionRunner } from './retention.js';
import { type EnqueueOptions, type EnqueueResult, type NewOutboxRow, type OutboxStore, type PanelScope, type StoredRow, UNASSIGNED_PANEL } from './store.js';
import { memoryOutboxStore } from './stores/memory/memory-store.js';
import { sqliteOutboxStore } from './stores/sqlite/sqlite-store.js';
import { storeTroubleReporter } from './worker/failure.js';
import { rateLimited } from './worker/rated-claims.js';
import { createDeliveryWorker } from './worker/worker.js';

export type { OutboxEnqueueOptions, OutboxEntry, OutboxStats, PanelQuery, ReleaseOutbox } from './outbox-api.js';

const DEFAULT_LIST_LIMIT = 100;
const MAX_LIST_LIMIT = 1000;

function openStore(source: StoreSource): { store: OutboxStore; owned: boolean } {
  if (source.kind === 'given') return { store: source.store, owned: false };
  if (source.kind === 'memory') return { store: memoryOutboxStore(), owned: true };
  return { store: sqliteOutboxStore({ file: source.file }), owned: true };
}

export function createReleaseOutbox(options: ReleaseOutboxOptions): ReleaseOutbox {
  const config = resolveOutboxOptions(options);
  const { store, owned } = openStore(config.storeSource);
  const events = createOutboxEmitter(config.logger);
  const drainWaiters = new Set<{ resolve: (stats: OutboxStats) => void; reject: (error: unknown) => void }>();
  let checkingDrain = false;
  let checkDrainAgain = false;
  let closed: Promise<void> | undefined;

  const retention = config.retention === false ? undefined : createRetentionRunner(store, config.retention, config.now, events);
  const { panels } = config;
  const scoping = panelScoping(panels);
  const { routing, rate } = rateLimited(
    panels.kind === 'one'
      ? singlePanelRouting(store, panels.client, panels.panel)
      : manyPanelsRouting(store, new PanelSenders({ ...panels.senders, now: config.now })),
    config,
  );
  // A store that is down fails the pause reads every second: said once, then once a minute.
  const { report, recovered } = storeTroubleReporter(events, config.now);
  const pauses = new Pauses(store, () => worker.kick(), report, recovered);
  const worker = createDeliveryWorker({
    ...config,
    store,
    routing,
    rate,
    events,
    pauses,
    owner: `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
    onProgress: () => void checkDrained(),
  });

  const toEntries = (rows: StoredRow[]): OutboxEntry[] => entriesOf(rows, config.now());

  function assertOpen(method: string): void {
    if (closed) throw new Error(`panel-license-guard: outbox.${method}() was called after close().`);
  }

  async function stats(scope: PanelScope = scoping.scope('stats', undefined)): Promise<OutboxStats> {
    const [counts, oldestPendingAt] = await Promise.all([store.counts(scope), store.oldestPending?.(scope)]);
    const failingPanels = worker.failingPanels();
    // A running worker reads the pauses every second; without one (the CLI, the console's own outbox) read them now.
    if (!worker.isRunning()) await pauses.refresh();
    const paused = pauses.allPaused || (scope.panel !== undefined && pauses.isPaused(scope.panel));
    return { panel: scope.panel, ...counts, inFlight: worker.inFlight(), pausedUntil: worker.pausedUntil(), oldestPendingAt, failingPanels, paused };
  }

  /** Rows stored before rows recorded their panel wait for adoption: say so once, at start. */
  async function warnOfUnassigned(): Promise<void> {
    const { pending } = await store.counts({ panel: UNASSIGNED_PANEL });
    if (pending > 0)
      config.logger.warn(
        `panel-license-guard: release outbox: ${pending} pending release${pending === 1 ? ' was' : 's were'} stored before releases recorded their panel, and will not be sent until adopted: call outbox.adoptUnassigned() in the outbox of the panel that stored ${pending === 1 ? 'it' : 'them'} (see docs/outbox.md, "Upgrading").`,
        { event: 'outbox_unassigned' },
      );
  }

  function settleDrainWaiters(outcome: { stats: OutboxStats } | { error: unknown }): void {
    for (const waiter of drainWaiters) {
      if ('stats' in outcome) waiter.resolve(outcome.stats);
      else waiter.reject(outcome.error);
    }
    drainWaiters.clear();
    worker.setKeepAlive(false);
  }

  /** Counts rows only while someone waits, and one count at a time (progress meanwhile asks again). */
  async function checkDrained(): Promise<void> {
    if (drainWaiters.size === 0 || closed) return;
    // A row the worker holds (in flight, or claimed ahead) is a pending row: nothing to count yet.
    // Counting after every delivery would read the whole backlog each time (quadratic in its size).
    if (worker.holding() > 0) return;
    if (checkingDrain) {
      checkDrainAgain = true;
      return;
    }
    checkingDrain = true;
    try {
      do {
        checkDrainAgain = false;
        const current = await stats();
        if (current.pending === 0 && current.inFlight === 0) settleDrainWaiters({ stats: current });
      } while (checkDrainAgain && drainWaiters.size > 0);
    } catch (error) {
      settleDrainWaiters({ error });
    } finally {
      checkingDrain = false;
    }
  }

  /**
   * What an enqueue answers, after kicking the worker when a row waits (`mayHaveDue`: see kick),
   * and telling it of a replaced payload (a row it holds must not go out with the older one).
   */
  const kicked = (result: EnqueueResult, mayHaveDue = true): EnqueueResult => {
    if (result.deduplicated === 'replaced-pending') worker.replaced(result.id);
    if (result.state === 'pending') worker.kick(mayHaveDue);
    return result;
  };
  /** The mother a single panel's outbox sends to, as its `create` spans name it. */
  const mother = panels.kind === 'one' ? motherName(panels.client) : undefined;

  /** Stores the row (in the caller's transaction, or on its own and maybe leased straight to this worker), then kicks the worker. */
  async function storeRow(row: NewOutboxRow, storeOptions: EnqueueOptions | undefined): Promise<EnqueueResult> {
    if (storeOptions !== undefined) return kicked(await store.enqueue(row, config.now(), storeOptions));
    // Outside a caller's transaction the new row may go straight to this worker (no claim).
    const lease = worker.leaseFor(row.panel);
    if (lease === undefined) return kicked(await store.enqueue(row, config.now()));
    let leasedId: number | undefined;
    let result: EnqueueResult | undefined;
    try {
      const { owner, leaseMs } = lease;
      result = await store.enqueue(row, config.now(), undefined, { owner, leaseMs, taken: (id) => (leasedId = id) });
    } finally {
      // Answered whatever happened (close() waits for it); a row leased by a failed enqueue waits out its lease.
      worker.handedOff(lease, result !== undefined && leasedId !== undefined ? { ...row, id: leasedId, attempts: 0 } : undefined);
    }
    return kicked(result, leasedId === undefined);
  }

  const operations = operatorApi({ store, scoping, events, pauses, now: config.now, worker, assertOpen });
  const outbox: ReleaseOutbox = {
    ...operations,
    async enqueue(release, options) {
      assertOpen('enqueue');
      const { panel, storeOptions } = scoping.enqueueTarget('enqueue', options);
      if (storeOptions?.query !== undefined && storeOptions.transaction === undefined)
        throw new TypeError(
          'panel-license-guard: enqueue() got `query` without `transaction`: `query` runs statements in your transaction; pass both, `{ transaction: tx, query }`.',
        );
      // Validation throws InvalidReleaseError naming the field: a bad release is never stored.
      const valid = validateRelease(release);
      const body = serializeRelease(valid);
      const contentHash = createHash('sha256').update(body, 'utf8').digest('hex');
      const row: NewOutboxRow = { panel, remoteTrackId: valid.remote_track_id, body, contentHash };
      if (config.tracing === undefined) return storeRow(row, storeOptions);
      const target = { panel, remoteTrackId: row.remoteTrackId, mother };
      return tracedEnqueue(config.tracing, target, (traceContext) => storeRow(traceContext === undefined ? row : { ...row, traceContext }, storeOptions));
    },
    async stats(query = {}) {
      assertOpen('stats');
      return stats(scoping.scope('stats', query.panel));
    },
    async list(query = {}) {
      assertOpen('list');
      const limit = query.limit ?? DEFAULT_LIST_LIMIT;
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT)
        throw new RangeError(`panel-license-guard: list() \`limit\` must be an integer from 1 to ${MAX_LIST_LIMIT}.`);
      const { panel } = scoping.scope('list', query.panel);
      const { track, after } = query;
      // Ill-formed text would reach the store as U+FFFD and find another track's rows.
      if (track !== undefined && (typeof track !== 'string' || track.length === 0 || track.length > 500 || !isWellFormedText(track)))
        throw new TypeError(
          'panel-license-guard: list() `track` must be a remote_track_id (a non-empty string of at most 500 characters of well-formed Unicode).',
        );
      if (after !== undefined && (!Number.isSafeInteger(after) || after < 0))
        throw new RangeError('panel-license-guard: list() `after` must be an id (a non-negative integer): the last id of the previous page.');
      // A custom store that ignores `afterId` must not page round forever: rows at or before it are dropped.
      const rows = await store.list({ state: query.state, limit, panel, track, afterId: after });
      return toEntries(after === undefined ? rows : rows.filter((row) => row.id > after));
    },
    async get(id) {
      assertOpen('get');
      if (!Number.isInteger(id)) throw new TypeError(`panel-license-guard: get() needs a release id (an integer), received ${shown(id)}.`);
      // Checked, not trusted: a custom store written before `id` (or `panel`) existed would ignore it.
      const { panel } = scoping.scope('get', undefined);
      return toEntries(await store.list({ state: undefined, limit: 1, id, panel })).find(
        (entry) => entry.id === id && (panel === undefined || entry.panel === panel),
      );
    },
    async retry(id) {
      assertOpen('retry');
      if (!Number.isInteger(id)) throw new TypeError(`panel-license-guard: retry() needs a release id (an integer), received ${shown(id)}.`);
      const requeued = await store.requeueDead(id, config.now(), scoping.scope('retry', undefined));
      if (requeued > 0) worker.kick();
      return requeued > 0;
    },
    async retryAllDead(query = {}) {
      assertOpen('retryAllDead');
      const requeued = await store.requeueDead(undefined, config.now(), scoping.scope('retryAllDead', query.panel));
      if (requeued > 0) worker.kick();
      return requeued;
    },
    async panelStats(limit = DEFAULT_LIST_LIMIT) {
      assertOpen('panelStats');
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT)
        throw new RangeError(`panel-license-guard: panelStats() \`limit\` must be an integer from 1 to ${MAX_LIST_LIMIT}.`);
      if (!store.panelCounts) throw new TypeError('panel-license-guard: panelStats() needs a store with panelCounts() (every built-in store has it).');
      return store.panelCounts(limit);
    },
    async adoptUnassigned(panel) {
      assertOpen('adoptUnassigned');
      const target = scoping.adoptionTarget(panel);
      if (!store.adoptUnassigned)
        throw new TypeError('panel-license-guard: adoptUnassigned() needs a store with adoptUnassigned() (every built-in store has it).');
      const adopted = await store.adoptUnassigned(target, config.now());
      if (adopted > 0) worker.kick();
      return adopted;
    },
    async prune() {
      assertOpen('prune');
      return retention ? retention.runPass() : 0;
    },
    start() {
      assertOpen('start');
      startWorking();
    },
    drain({ signal } = {}) {
      if (closed) return Promise.reject(new Error('panel-license-guard: outbox.drain() was called after close().'));
      if (!worker.isRunning()) return Promise.reject(new Error('panel-license-guard: outbox.drain() needs the worker running; call outbox.start() first.'));
      if (signal?.aborted) return Promise.reject(signal.reason);
      return new Promise<OutboxStats>((resolve, reject) => {
        const waiter = { resolve, reject };
        drainWaiters.add(waiter);
        worker.setKeepAlive(true);
        signal?.addEventListener('abort', () => {
          if (!drainWaiters.delete(waiter)) return;
          if (drainWaiters.size === 0) worker.setKeepAlive(false);
          reject(signal.reason);
        });
        void checkDrained();
      });
    },
    close() {
      closed ??= (async () => {
        rate?.stop(); // rows waiting for a turn go back unsent at once
        await Promise.all([worker.stop(), retention?.stop()]);
        settleDrainWaiters({ error: new Error('panel-license-guard: the outbox was closed before it drained.') });
        if (owned) await store.close();
      })();
      return closed;
    },
    on(event, listener) {
      events.on(event, listener);
      return outbox;
    },
    off(event, listener) {
      events.off(event, listener);
      return outbox;
    },
  };
  // For the package's own instruments (metrics): events seen without being a listener.
  const telemetry: OutboxTelemetry = {
    observe: events.observe,
    manyPanels: routing.panel === undefined,
    failingPanels: (limit) => worker.failingPanelIds(limit),
  };
  Object.defineProperty(outbox, OUTBOX_TELEMETRY, { value: telemetry, enumerable: false });
  function startWorking(): void {
    if (worker.isRunning()) return;
    worker.start();
    retention?.start();
    warnOfUnassigned().catch(() => {}); // a failing store is reported by the worker
  }
  if (config.autoStart) startWorking();
  return outbox;
}

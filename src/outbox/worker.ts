// The delivery worker: leases due rows in small batches, pushes at most N at once, records each outcome.
import { retryDelayMs } from './backoff.js';
import type { OutboxEmitter } from './events.js';
import { asError, classifyFailure, type FailureAction } from './failure.js';
import type { ResolvedOutboxConfig } from './options.js';
import type { ClaimedRow, DeliveryOutcome, OutboxStore, SettleResult } from './store.js';
import { createTroubleReporter } from './trouble.js';

/** While claims keep failing, how often the same trouble is reported again. */
const STORE_TROUBLE_REPEAT_MS = 60_000;

/** The resolved outbox options the worker uses, plus what the outbox wires in. */
export type WorkerConfig = Pick<
  ResolvedOutboxConfig,
  'client' | 'concurrency' | 'baseDelayMs' | 'maxDelayMs' | 'authRetryDelayMs' | 'leaseMs' | 'pollIntervalMs' | 'now' | 'random'
> & {
  store: OutboxStore;
  events: OutboxEmitter;
  /** Lease owner name, unique per outbox instance. */
  owner: string;
  /** Called after every recorded attempt and every poll tick; drain() checks the counts there. */
  onProgress: () => void;
};

export interface DeliveryWorker {
  start(): void;
  /** Look for due rows now (after an enqueue or a requeue) instead of at the next poll. */
  kick(): void;
  /** Stops claiming rows; resolves once every push in flight has been recorded. */
  stop(): Promise<void>;
  /** While true, the poll timer keeps the process alive (someone awaits drain()). */
  setKeepAlive(on: boolean): void;
  isRunning(): boolean;
  inFlight(): number;
  /** Epoch ms until which the worker holds off after failures, if it does. */
  pausedUntil(): number | undefined;
}

interface Attempt {
  outcome: DeliveryOutcome;
  error: Error | undefined;
  delayMs: number;
  credentialsRejected: boolean;
}

export function createDeliveryWorker(config: WorkerConfig): DeliveryWorker {
  const { store, client, events, owner, now } = config;
  /** Deliveries under way: a push, then recording its outcome. */
  const inFlight = new Set<Promise<void>>();
  /** Of those, the ones whose push has not answered yet: what `concurrency` bounds. */
  let pushing = 0;
  /** Ids of the rows being sent by this worker: never claimed and sent a second time. */
  const sending = new Set<number>();
  let running = false;
  /** Claims under way, and the slots each has reserved: a freed slot never waits for another slot's claim. */
  const claiming = new Set<Promise<void>>();
  let reserved = 0;
  /** A kick found every free slot reserved by a claim under way: that claim looks once more. */
  let lookAgain = false;
  let timer: NodeJS.Timeout | undefined;
  let timerAt = Number.POSITIVE_INFINITY;
  let keepAlive = false;
  let holdUntil = 0;
  let consecutiveFailures = 0;
  // A store that is down fails every poll: say so once, then at most once a minute.
  const storeTrouble = createTroubleReporter(STORE_TROUBLE_REPEAT_MS, now, (error) => reportError(error, undefined));

  /** One timer for everything (poll, backoff, pause): unref'd, so it never keeps a process alive. */
  function wakeAt(atMs: number): void {
    if (!running || (timer !== undefined && timerAt <= atMs)) return;
    clearTimeout(timer);
    timerAt = atMs;
    timer = setTimeout(onTimer, Math.max(0, atMs - now()));
    if (!keepAlive) timer.unref();
  }

  function onTimer(): void {
    timer = undefined;
    timerAt = Number.POSITIVE_INFINITY;
    config.onProgress();
    kick();
  }

  function kick(): void {
    if (!running) return;
    const claim: Promise<void> = fillFreeSlots().finally(() => {
      claiming.delete(claim);
      // Poll even when idle: another process may enqueue into the same store, or crash and leave leases.
      wakeAt(now() + config.pollIntervalMs);
    });
    claiming.add(claim);
  }

  /**
   * Claims only as many rows as there are free slots, so memory stays flat whatever the backlog.
   * Slots that free up while a claim is under way start a claim of their own (the store keeps
   * two claims from taking one row).
   */
  async function fillFreeSlots(): Promise<void> {
    while (running) {
      const nowMs = now();
      if (nowMs < holdUntil) return wakeAt(holdUntil);
      // A slot is free once its push has answered: the next row is claimed while the outcome is
      // recorded (a round trip the slot would otherwise sit idle for). Outcomes being recorded are
      // bounded too, at `concurrency` more, so a slow store cannot pile them up.
      const open = Math.min(config.concurrency - pushing, 2 * config.concurrency - inFlight.size);
      const free = open - reserved;
      if (free <= 0) {
        // The claim under way may have read the store before the row this kick is about was
        // committed: it must look again rather than leave the slots idle until the next poll.
        if (open > 0) lookAgain = true;
        return;
      }
      reserved += free;
      let batch: ClaimedRow[];
      try {
        batch = await store.claimDue({ owner, limit: free, nowMs, leaseMs: config.leaseMs, exclude: [...sending] });
        storeTrouble.recovered();
      } catch (error) {
        return storeTrouble.report(error);
      } finally {
        reserved -= free;
      }
      // The store skips the rows we are sending; a custom store written before `exclude` existed
      // may lease one again (say, after the wall clock jumped forward), and we still skip it.
      // Rows claimed as stop() began are still sent: stop() waits for them rather than leave leases behind.
      const fresh = batch.filter((row) => !sending.has(row.id));
      for (const row of fresh) startDelivery(row);
      if (batch.length < free || fresh.length === 0) {
        if (!lookAgain) return;
        lookAgain = false;
      }
    }
  }

  function startDelivery(row: ClaimedRow): void {
    sending.add(row.id);
    pushing++;
    const delivery: Promise<void> = deliver(row).finally(() => {
      sending.delete(row.id);
      inFlight.delete(delivery);
      config.onProgress();
      kick();
    });
    inFlight.add(delivery);
  }

  function holdClaimsUntil(atMs: number): void {
    holdUntil = Math.max(holdUntil, atMs);
  }

  function afterFailure(action: Exclude<FailureAction, { action: 'accepted' }>, attempts: number, error: Error): Attempt {
    const nowMs = now();
    const reason = error.message;
    if (action.action === 'dead') {
      consecutiveFailures = 0; // the mother answered, so it is up
      return { outcome: { kind: 'dead', error: reason }, error, delayMs: 0, credentialsRejected: false };
    }
    if (action.action === 'auth') {
      // Every row would get the same 401: hold the whole queue, not just this row.
      holdClaimsUntil(nowMs + config.authRetryDelayMs);
      const delayMs = config.authRetryDelayMs;
      return { outcome: { kind: 'retry', nextAttemptAt: nowMs + delayMs, error: reason }, error, delayMs, credentialsRejected: true };
    }
    consecutiveFailures++;
    const backoff = { baseDelayMs: config.baseDelayMs, maxDelayMs: config.maxDelayMs, random: config.random, retryAfterMs: action.retryAfterMs };
    const delayMs = retryDelayMs({ ...backoff, attempt: attempts });
    // The mother is most likely failing for every row: back off the worker as well, so a large
    // backlog probes a dead mother a few times instead of once per row.
    holdClaimsUntil(nowMs + retryDelayMs({ ...backoff, attempt: consecutiveFailures }));
    return { outcome: { kind: 'retry', nextAttemptAt: nowMs + delayMs, error: reason }, error, delayMs, credentialsRejected: false };
  }

  async function attempt(row: ClaimedRow): Promise<Attempt> {
    const attempts = row.attempts + 1;
    let releaseId: unknown;
    try {
      const answer = await client.pushSerializedRelease(row.body);
      releaseId = (answer as { release_id?: unknown } | undefined)?.release_id;
    } catch (error) {
      const action = classifyFailure(error);
      if (action.action !== 'accepted') return afterFailure(action, attempts, asError(error));
      return accepted(undefined, `the mother accepted it, but its answer was unusable: ${asError(error).message.replace(/\.$/, '')}`);
    }
    // A custom client resolved, so the mother answered 2xx: accepted, whatever the id looks like.
    if (typeof releaseId === 'number' && Number.isInteger(releaseId)) return accepted(releaseId, undefined);
    return accepted(undefined, 'the client resolved without an integer release_id');
  }

  /** The mother took the release: recorded as delivered, never resent (with a note when unconfirmed). */
  function accepted(releaseId: number | undefined, note: string | undefined): Attempt {
    consecutiveFailures = 0;
    const outcome: DeliveryOutcome = note === undefined ? { kind: 'delivered', releaseId } : { kind: 'delivered', releaseId, note };
    return { outcome, error: undefined, delayMs: 0, credentialsRejected: false };
  }

  async function deliver(row: ClaimedRow): Promise<void> {
    let answered: Attempt;
    const began = performance.now();
    try {
      answered = await attempt(row);
    } finally {
      pushing--;
      kick();
    }
    const durationMs = performance.now() - began;
    const { outcome, error, delayMs, credentialsRejected } = answered;
    let result: SettleResult;
    try {
      result = await store.settle(row, owner, outcome, now());
    } catch (storeError) {
      // Not recorded: the lease runs out and the row is sent again (at-least-once).
      return reportError(storeError, row);
    }
    if (result === 'stale') return;
    const { id, remoteTrackId } = row;
    const attempts = row.attempts + 1;
    if (outcome.kind === 'delivered') {
      const unconfirmed = outcome.note;
      events.emit('delivered', { id, remoteTrackId, releaseId: outcome.releaseId, attempts, durationMs, superseded: result === 'superseded', unconfirmed });
      return;
    }
    const failure = error ?? new Error(outcome.error);
    if (credentialsRejected) events.emit('error', { error: failure, id, remoteTrackId });
    if (outcome.kind === 'dead' && result === 'applied') {
      events.emit('dead', { id, remoteTrackId, attempts, error: failure, message: outcome.error, durationMs });
      return;
    }
    // A retry, or a refused payload whose replacement is now due: either way the row goes round again.
    const nextAttemptAt = outcome.kind === 'retry' ? outcome.nextAttemptAt : now();
    events.emit('retrying', { id, remoteTrackId, attempts, delayMs: outcome.kind === 'retry' ? delayMs : 0, nextAttemptAt, error: failure, durationMs });
    wakeAt(nextAttemptAt);
  }

  function reportError(error: unknown, row: ClaimedRow | undefined): void {
    events.emit('error', { error: asError(error), id: row?.id, remoteTrackId: row?.remoteTrackId });
  }

  return {
    start() {
      if (running) return;
      running = true;
      kick();
    },
    kick,
    async stop() {
      running = false;
      clearTimeout(timer);
      timer = undefined;
      timerAt = Number.POSITIVE_INFINITY;
      while (claiming.size > 0) await Promise.allSettled([...claiming]);
      while (inFlight.size > 0) await Promise.allSettled([...inFlight]);
    },
    setKeepAlive(on) {
      keepAlive = on;
      if (on) timer?.ref();
      else timer?.unref();
    },
    isRunning: () => running,
    inFlight: () => inFlight.size,
    pausedUntil: () => (holdUntil > now() ? holdUntil : undefined),
  };
}

// The delivery worker: leases due rows in small batches, pushes at most N at once, records each outcome.
import { retryDelayMs } from './backoff.js';
import type { OutboxEmitter } from './events.js';
import { asError, classifyFailure, type FailureAction } from './failure.js';
import type { ResolvedOutboxConfig } from './options.js';
import { PanelHolds } from './panel-holds.js';
import type { PanelRouting } from './panel-routing.js';
import type { ClaimedRow, DeliveryOutcome, OutboxStore, SettleResult } from './store.js';
import { createTroubleReporter } from './trouble.js';

/** While claims keep failing, how often the same trouble is reported again. */
const STORE_TROUBLE_REPEAT_MS = 60_000;
/** Claims in a row that may come back short while panels were left unvisited, before waiting for the next poll. */
const MAX_PARTIAL_CLAIMS = 16;

/** The resolved outbox options the worker uses, plus what the outbox wires in. */
export type WorkerConfig = Pick<
  ResolvedOutboxConfig,
  'concurrency' | 'baseDelayMs' | 'maxDelayMs' | 'authRetryDelayMs' | 'leaseMs' | 'pollIntervalMs' | 'now' | 'random' | 'unresolvedRetryMs'
> & {
  store: OutboxStore;
  /** Which rows to claim, and whose credentials send each. */
  routing: PanelRouting;
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
  /** Epoch ms until which a single-panel worker holds off after failures, if it does. */
  pausedUntil(): number | undefined;
  /** Panels backing off after failures (with `panels`; 0 or 1 for a single panel). */
  failingPanels(): number;
  /** Up to `limit` of those panels' ids. */
  failingPanelIds(limit: number): string[];
}

interface Attempt {
  outcome: DeliveryOutcome;
  error: Error | undefined;
  delayMs: number;
  /** Credentials rejected (401) or missing for the panel: reported through 'error' too. */
  needsHuman: boolean;
}

/** Whether an attempt's row was sent, to which mother, and whether it was admitted as a probe. */
interface SentTo {
  sent: boolean;
  mother: string | undefined;
  probe: boolean;
}

/** The base URL of the mother a sender sends to (a client of your own may not say). */
const motherOf = (sender: unknown): string | undefined => {
  const baseUrl = (sender as { baseUrl?: unknown }).baseUrl;
  return typeof baseUrl === 'string' ? baseUrl : undefined;
};

export function createDeliveryWorker(config: WorkerConfig): DeliveryWorker {
  const { store, routing, events, owner, now } = config;
  // Back-off is per panel: one panel's failing mother never holds back another panel's releases.
  // Probes of failing panels and mothers may take a quarter of the slots at most: a mother that
  // hangs costs its probe's slot, never every slot.
  // With many panels, one panel's rows take half the slots at most: a tenant whose releases hang
  // (or who just has the biggest backlog) never holds every slot.
  const holds = new PanelHolds({
    ...config,
    maxProbes: Math.max(1, Math.floor(config.concurrency / 4)),
    maxPerPanel: routing.panel === undefined ? Math.max(1, Math.ceil(config.concurrency / 2)) : Number.POSITIVE_INFINITY,
  });
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
    let partialClaims = 0;
    // Panels at their share of slots are skipped first; if that leaves slots idle, claim again without.
    let capPerPanel = true;
    while (running) {
      const nowMs = now();
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
      let claimed: Awaited<ReturnType<PanelRouting['claim']>>;
      try {
        claimed = await routing.claim({ owner, limit: free, nowMs, leaseMs: config.leaseMs, exclude: [...sending] }, holds, capPerPanel);
        storeTrouble.recovered();
      } catch (error) {
        return storeTrouble.report(error);
      } finally {
        reserved -= free;
      }
      // A probe in flight holds its panel with no end: its answer kicks the worker, not a timer.
      if (claimed.heldUntil !== undefined && Number.isFinite(claimed.heldUntil)) wakeAt(claimed.heldUntil);
      const batch = claimed.rows;
      // The store skips the rows we are sending; a custom store written before `exclude` existed
      // may lease one again (say, after the wall clock jumped forward), and we still skip it.
      // Rows claimed as stop() began are still sent: stop() waits for them rather than leave leases behind.
      const fresh = batch.filter((row) => !sending.has(row.id));
      for (const row of fresh) startDelivery(row);
      if (batch.length < free || fresh.length === 0) {
        // Panels left unvisited may have due rows: go on, a bounded number of times.
        if (claimed.more && ++partialClaims <= MAX_PARTIAL_CLAIMS) continue;
        if (capPerPanel && holds.anyAtCap()) {
          capPerPanel = false;
          continue;
        }
        if (!lookAgain) return;
        lookAgain = false;
      }
    }
  }

  function startDelivery(row: ClaimedRow): void {
    sending.add(row.id);
    holds.claimed(row.panel);
    pushing++;
    const delivery: Promise<void> = deliver(row).finally(() => {
      sending.delete(row.id);
      holds.released(row.panel);
      inFlight.delete(delivery);
      config.onProgress();
      kick();
    });
    inFlight.add(delivery);
  }

  function afterFailure(row: ClaimedRow, action: Exclude<FailureAction, { action: 'accepted' }>, error: Error, mother: string | undefined): Attempt {
    const nowMs = now();
    const reason = error.message;
    const attempts = row.attempts + 1;
    if (action.action === 'dead') {
      holds.answered(row.panel, mother); // the mother answered, so it is up
      return { outcome: { kind: 'dead', error: reason }, error, delayMs: 0, needsHuman: false };
    }
    if (action.action === 'auth') {
      // Every row of this panel would get the same 401: hold the panel, not just this row. The
      // mother answered, so it is up.
      const delayMs = config.authRetryDelayMs;
      holds.holdFor(row.panel, delayMs);
      if (mother !== undefined) holds.motherAnswered(mother);
      return { outcome: { kind: 'retry', nextAttemptAt: nowMs + delayMs, error: reason }, error, delayMs, needsHuman: true };
    }
    const backoff = { baseDelayMs: config.baseDelayMs, maxDelayMs: config.maxDelayMs, random: config.random, retryAfterMs: action.retryAfterMs };
    const delayMs = retryDelayMs({ ...backoff, attempt: attempts });
    // The mother is most likely failing for every row: back off the panel as a whole, so a large
    // backlog probes a dead mother a few times instead of once per row. An outage, a timeout or a
    // 5xx counts against the mother too (held once two panels fail there); a 429 answers for
    // this panel's key only, and the mother is up.
    const status = (error as { status?: unknown }).status;
    if (status === 429) {
      holds.failed(row.panel, row.id, action.retryAfterMs);
      if (mother !== undefined) holds.motherAnswered(mother);
    } else holds.failed(row.panel, row.id, action.retryAfterMs, mother);
    return { outcome: { kind: 'retry', nextAttemptAt: nowMs + delayMs, error: reason }, error, delayMs, needsHuman: false };
  }

  /**
   * The row's mother is held after failures, or as many probes as may be are in flight: the row
   * is put back unsent (no attempt counted) until then.
   */
  function deferred(row: ClaimedRow, mother: string | undefined, until: number, wasProbe: boolean): Attempt {
    holds.deferred(row.panel, until, mother, wasProbe);
    const reason =
      mother === undefined || !holds.motherHeld(mother)
        ? 'not sent: its panel is failing and other probes are in flight; tried again shortly'
        : `not sent: the mother at ${mother} is failing (releases of several panels failed there); sent when it answers again`;
    const outcome: DeliveryOutcome = { kind: 'retry', nextAttemptAt: until, error: reason, notSent: true };
    return { outcome, error: new Error(reason), delayMs: Math.max(0, until - now()), needsHuman: false };
  }

  /** No credentials for the row's panel (unknown to the resolver, or not this worker's): nothing is sent. */
  function unsendable(row: ClaimedRow, error: Error): Attempt {
    const delayMs = config.unresolvedRetryMs;
    holds.holdFor(row.panel, delayMs);
    // Nothing was sent: not an attempt.
    return { outcome: { kind: 'retry', nextAttemptAt: now() + delayMs, error: error.message, notSent: true }, error, delayMs, needsHuman: true };
  }

  /** `sentTo` learns the mother the row went to, and whether it went as a probe (which ends with the attempt). */
  async function attempt(row: ClaimedRow, sentTo: SentTo): Promise<Attempt> {
    let releaseId: unknown;
    let mother: string | undefined;
    try {
      const sender = await routing.senderFor(row.panel);
      mother = motherOf(sender);
      const admission = holds.admit(row.panel, row.id, mother);
      if (!admission.send) return deferred(row, mother, admission.until, admission.wasProbe);
      sentTo.sent = true;
      sentTo.mother = mother;
      sentTo.probe = admission.probe;
      try {
        const answer = await sender.pushSerializedRelease(row.body);
        releaseId = (answer as { release_id?: unknown } | undefined)?.release_id;
      } catch (error) {
        const action = classifyFailure(error);
        if (action.action !== 'accepted') return afterFailure(row, action, asError(error), mother);
        return accepted(row, undefined, `the mother accepted it, but its answer was unusable: ${asError(error).message.replace(/\.$/, '')}`, mother);
      }
    } catch (error) {
      return unsendable(row, asError(error));
    }
    // A custom client resolved, so the mother answered 2xx: accepted, whatever the id looks like.
    if (typeof releaseId === 'number' && Number.isInteger(releaseId)) return accepted(row, releaseId, undefined, mother);
    return accepted(row, undefined, 'the client resolved without an integer release_id', mother);
  }

  /** The mother took the release: recorded as delivered, never resent (with a note when unconfirmed). */
  function accepted(row: ClaimedRow, releaseId: number | undefined, note: string | undefined, mother: string | undefined): Attempt {
    holds.answered(row.panel, mother);
    const outcome: DeliveryOutcome = note === undefined ? { kind: 'delivered', releaseId } : { kind: 'delivered', releaseId, note };
    return { outcome, error: undefined, delayMs: 0, needsHuman: false };
  }

  async function deliver(row: ClaimedRow): Promise<void> {
    let answered: Attempt;
    const began = performance.now();
    const sentTo: SentTo = { sent: false, mother: undefined, probe: false };
    try {
      answered = await attempt(row, sentTo);
    } finally {
      if (sentTo.sent) holds.ended(row.panel, row.id, sentTo.mother, sentTo.probe);
      pushing--;
      kick();
    }
    const durationMs = performance.now() - began;
    const { outcome, error, delayMs, needsHuman } = answered;
    // A row that is not this worker's to send is left alone: its lease runs out for its own worker.
    if ((error as { code?: unknown } | undefined)?.code === 'PANEL_MISMATCH') return reportError(error, row);
    let result: SettleResult;
    try {
      result = await store.settle(row, owner, outcome, now());
    } catch (storeError) {
      // Not recorded: the lease runs out and the row is sent again (at-least-once).
      return reportError(storeError, row);
    }
    if (result === 'stale') return;
    const { id, panel, remoteTrackId } = row;
    const attempts = outcome.kind === 'retry' && outcome.notSent === true ? row.attempts : row.attempts + 1;
    if (outcome.kind === 'delivered') {
      const unconfirmed = outcome.note;
      const superseded = result === 'superseded';
      events.emit('delivered', { id, panel, remoteTrackId, releaseId: outcome.releaseId, attempts, durationMs, superseded, unconfirmed });
      return;
    }
    const failure = error ?? new Error(outcome.error);
    if (needsHuman) events.emit('error', { error: failure, id, panel, remoteTrackId });
    if (outcome.kind === 'dead' && result === 'applied') {
      events.emit('dead', { id, panel, remoteTrackId, attempts, error: failure, message: outcome.error, durationMs });
      return;
    }
    // A retry, or a refused payload whose replacement is now due: either way the row goes round again.
    const nextAttemptAt = outcome.kind === 'retry' ? outcome.nextAttemptAt : now();
    const retryDelay = outcome.kind === 'retry' ? delayMs : 0;
    events.emit('retrying', { id, panel, remoteTrackId, attempts, delayMs: retryDelay, nextAttemptAt, error: failure, durationMs });
    wakeAt(nextAttemptAt);
  }

  function reportError(error: unknown, row: ClaimedRow | undefined): void {
    events.emit('error', { error: asError(error), id: row?.id, panel: row?.panel, remoteTrackId: row?.remoteTrackId });
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
    pausedUntil: () => {
      const until = routing.panel === undefined ? undefined : holds.heldUntil(routing.panel);
      return until !== undefined && Number.isFinite(until) ? until : undefined;
    },
    failingPanels: () => holds.size,
    failingPanelIds: (limit) => holds.failingPanels(limit),
  };
}

// The delivery worker: pushes at most N releases at once, claiming due rows a few ahead (so a
// slot that frees up starts its next push at once, without a round trip to the store) and
// recording outcomes in batches (settle-batcher.ts). What one attempt does is delivery-attempt.ts.

import type { PanelRouting } from '../panels/panel-routing.js';
import type { ClaimedRow } from '../store.js';
import { ClaimAhead, MIN_CLAIM_AHEAD, REFILL_BELOW } from './claim-ahead.js';
import { type Attempt, createAttempts, type SentTo } from './delivery-attempt.js';
import { reportError, storeTroubleReporter } from './failure.js';
import { createHandBack } from './hand-back.js';
import { HandOffs } from './hand-offs.js';
import { HeldRows, RECHECK_RETRY_MS } from './held-rows.js';
import { createOutcomeRecorder } from './record-outcome.js';
import { createSettleBatcher } from './settle-batcher.js';
import { holdsForWorker, Slots } from './slots.js';
import { WakeTimer } from './wake-timer.js';
import type { DeliveryWorker, WorkerConfig } from './worker-contract.js';

export type { DeliveryWorker, WorkerConfig, WorkerLease } from './worker-contract.js';

/** Claims in a row that may come back short while panels were left unvisited, before waiting for the next poll. */
const MAX_PARTIAL_CLAIMS = 16;

export function createDeliveryWorker(config: WorkerConfig): DeliveryWorker {
  const { store, routing, events, owner, now, concurrency, pauses } = config;
  // Back-off per panel, probes and per-panel shares of the slots (slots.ts).
  const holds = holdsForWorker(config, concurrency, routing.panel === undefined);
  const attempt = createAttempts(config, routing, holds);
  const slots = new Slots(concurrency, holds);
  const settle = createSettleBatcher(store, owner, {
    holdWhile: (waiting, inline) => slots.holdOutcome(waiting, inline),
  });
  // Rows claimed ahead of the free slots (claim-ahead.ts); with many panels, none.
  const ahead = new ClaimAhead(config, routing.panel !== undefined);
  /**
   * Rows claimed ahead (or handed off) waiting for a slot, oldest first, read again before they
   * go when they waited (held-rows.ts); waits are timed on a monotonic clock (a step cannot hide one).
   */
  const ready = new HeldRows({
    recheck: store.recheck?.bind(store),
    // Delivered or refused by another worker while it waited here: not ours to send.
    gone(row) {
      letGo(row);
      config.onProgress();
    },
    checked(error) {
      if (error === undefined) return kick(false);
      if (!running) return;
      storeTrouble.report(error);
      wakeAt(now() + RECHECK_RETRY_MS);
    },
  });
  const { sending } = slots;
  const hold = (row: ClaimedRow) => slots.hold(row);
  const letGo = (row: ClaimedRow) => slots.letGo(row);
  let running = false;
  /** Claims under way, and the rows they asked for: a freed slot never waits for another slot's claim. */
  const claiming = new Set<Promise<void>>();
  let reserved = 0;
  /** A kick found every free slot covered by a claim under way: that claim looks once more. */
  let lookAgain = false;
  /** A claim is queued for the end of this turn of the event loop (see kick). */
  let claimQueued = false;
  /** Rows this process enqueues, handed to this worker leased (leaseFor): see hand-offs.ts. */
  const handOffs = new HandOffs();
  const timer = new WakeTimer(now, () => {
    config.onProgress();
    handOffs.polled();
    kick(true);
  });
  const storeTrouble = storeTroubleReporter(events, now);

  /** Wakes the worker at `atMs` (the poll, a retry, a back-off's end), while it runs. */
  function wakeAt(atMs: number): void {
    if (running) timer.wakeAt(atMs);
  }

  /**
   * Starts rows claimed ahead in free slots at once, and claims for the slots still free. Kicks
   * in one turn of the event loop (a batch of enqueues resolving together, pushes answering
   * together) make one claim: each would otherwise read the store, and all but the first would
   * find nothing (7 of 8 claims came back empty with 8 callers enqueueing on SQLite).
   */
  function kick(mayHaveDue = true): void {
    if (!running) return;
    if (mayHaveDue) handOffs.announce();
    startReady();
    if (claimQueued) return;
    claimQueued = true;
    setImmediate(claimNow);
  }

  function claimNow(): void {
    claimQueued = false;
    if (!running) return;
    const claim: Promise<void> = fillFreeSlots().finally(() => {
      claiming.delete(claim);
      // Poll even when idle: another process may enqueue into the same store, or crash and leave leases.
      wakeAt(now() + config.pollIntervalMs);
    });
    claiming.add(claim);
  }

  /**
   * Starts rows claimed ahead in the free slots; a row whose lease ran short, or whose panel was
   * paused meanwhile, goes back unsent instead. A row that waited is first read again (with the
   * others waiting): it may have been replaced. Without claiming ahead a row never waits.
   */
  function startReady(): void {
    for (let first = ready.first(); first !== undefined && slots.open() > 0; first = ready.first()) {
      const goesBack = !running || ahead.waitedTooLong(first.claimedAt) || pauses.isPaused(first.row.panel);
      if (!goesBack && !ready.current(first)) return;
      ready.shift();
      if (goesBack) handBack(first.row);
      else startDelivery(first.row);
    }
  }

  /**
   * Claims rows for the free slots and `ahead` more, in batches: only once the rows claimed ahead
   * fall below a quarter of `ahead` (or a free slot has none), so most claims bring many rows. Memory
   * stays flat whatever the backlog. Slots that free up while a claim is under way start a claim
   * of their own (the store keeps two claims from taking one row).
   */
  async function fillFreeSlots(): Promise<void> {
    let partialClaims = 0;
    // Panels at their share of slots are skipped first; if that leaves slots idle, claim again without.
    let capPerPanel = true;
    // Nothing is claimed before the pauses were read: a restart must not send what is paused.
    if (!pauses.loaded) await pauses.refresh();
    if (!pauses.loaded) return;
    while (running) {
      if (handOffs.claimNeedless()) return;
      const nowMs = now();
      const wanted = ahead.count();
      const open = Math.max(0, slots.open());
      const covered = ready.length + reserved;
      const uncovered = open - covered;
      // News while rows are handed off is claimed at once (a full claim of it turns hand-offs off).
      const newsWaiting = handOffs.newsWaiting(covered < 2 * (open + wanted));
      if (uncovered <= 0 && covered - open >= wanted * REFILL_BELOW && !newsWaiting) {
        // The claim under way may have read the store before the row this kick is about was
        // committed: it must look again rather than leave the slots idle until the next poll.
        if (open > ready.length) lookAgain = true;
        return;
      }
      // Past the panels' shares (capPerPanel off), only slots that would sit idle are filled:
      // rows claimed ahead keep to the shares, so another panel's release never waits behind them.
      const limit = capPerPanel ? Math.max(open + wanted - covered, newsWaiting ? MIN_CLAIM_AHEAD : 0) : uncovered;
      if (limit <= 0) return;
      reserved += limit;
      const newsBefore = handOffs.claiming();
      // A back-off or a probe (one row) limits the claim: it says nothing of a backlog.
      const unheld = holds.size === 0;
      const seenAt = performance.now();
      let claimed: Awaited<ReturnType<PanelRouting['claim']>>;
      try {
        claimed = await routing.claim({ owner, limit, nowMs, leaseMs: config.leaseMs, exclude: [...sending] }, holds, capPerPanel, pauses);
        storeTrouble.recovered();
      } catch (error) {
        return storeTrouble.report(error);
      } finally {
        reserved -= limit;
      }
      // A probe in flight holds its panel with no end: its answer kicks the worker, not a timer.
      if (claimed.heldUntil !== undefined && Number.isFinite(claimed.heldUntil)) wakeAt(claimed.heldUntil);
      const batch = claimed.rows;
      // The store skips the rows we hold; a custom store written before `exclude` existed may
      // lease one again (say, after the wall clock jumped forward), and we still skip it.
      const fresh = batch.filter((row) => !sending.has(row.id));
      const claimedAt = performance.now();
      for (const row of fresh) {
        hold(row);
        ready.push(row, claimedAt, seenAt);
      }
      startReady();
      handOffs.claimed(newsBefore, ahead.enabled && unheld && batch.length < limit && !claimed.more);
      if (batch.length < limit || fresh.length === 0) {
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

  /** Rows claimed ahead going back unsent, due at once (hand-back.ts). */
  const backs = createHandBack({
    settle,
    now,
    reportError: (error, row) => reportError(events, error, row),
    done(row) {
      letGo(row);
      // Due at once: claim it again now (and let drain() look), not at the next poll.
      config.onProgress();
      kick();
    },
  });

  function startDelivery(row: ClaimedRow): void {
    slots.pushing++;
    let dueNow = false;
    const delivery: Promise<void> = deliver(row)
      .then((due) => {
        dueNow = due;
      })
      .finally(() => {
        letGo(row);
        slots.deliveries.delete(delivery);
        config.onProgress();
        kick(dueNow);
      });
    slots.deliveries.add(delivery);
  }

  function handBack(row: ClaimedRow): Promise<void> {
    holds.handedBack(row.panel);
    return backs.handBack(row);
  }

  const outcomes = createOutcomeRecorder({ settle, events, now, wakeAt, reportError: (error, row) => reportError(events, error, row) });

  /** Pushes the row, then records and tells what came of it (record-outcome.ts). */
  async function deliver(row: ClaimedRow): Promise<boolean> {
    let answered: Attempt;
    const began = performance.now();
    const sentTo: SentTo = { sent: false, mother: undefined, probe: false };
    try {
      answered = await attempt(row, sentTo);
    } finally {
      if (sentTo.sent) holds.ended(row.panel, row.id, sentTo.mother, sentTo.probe);
      slots.pushing--;
      // A slot is free; the row is still this worker's until its outcome is recorded.
      kick(false);
    }
    // A wait for the mother's turn (`maxPerSecond`) is not part of the push.
    const durationMs = performance.now() - began - (sentTo.waitedMs ?? 0);
    if (sentTo.sent) ahead.pushed(durationMs);
    return outcomes.record(row, answered, durationMs);
  }

  return {
    start() {
      if (running) return;
      running = true;
      void pauses.start();
      kick();
    },
    kick,
    takeBack: (id) => ready.take(id)?.row,
    handBack,
    leaseFor(panel) {
      if (!running || !handOffs.open() || panel !== routing.panel || holds.size > 0 || !pauses.loaded || pauses.isPaused(panel)) return undefined;
      // Claims under way are not counted: while rows are handed off they bring few or none.
      if (ready.length + handOffs.outstanding >= Math.max(0, slots.open()) + ahead.count()) return undefined;
      handOffs.leased();
      return { owner, leaseMs: config.leaseMs, since: performance.now() };
    },
    replaced(id) {
      // A row claimed or handed off meanwhile may bring the content it had before.
      if (ready.has(id) || claiming.size > 0 || handOffs.outstanding > 0) ready.replaced();
    },
    handedOff(lease, row) {
      // Already ours by a claim (its lease ran out while the insert waited for a lock): held once.
      const taken = row !== undefined && !sending.has(row.id);
      if (taken) {
        hold(row);
        // Stopped meanwhile (an enqueue slower than stop() waits for): back at once, not after its lease.
        if (running) ready.push(row, lease.since);
        else handBack(row);
      }
      handOffs.answered(taken);
    },
    async stop() {
      running = false;
      timer.stop();
      pauses.stop();
      while (claiming.size > 0) await Promise.allSettled([...claiming]);
      // An enqueue may be inserting a row leased to this worker: it is handed back once it is in.
      await handOffs.settled();
      await ready.settled();
      // Rows claimed ahead go back at once rather than wait for their leases to run out.
      for (const { row } of ready.takeAll()) handBack(row);
      while (slots.deliveries.size > 0 || backs.pending().length > 0) await Promise.allSettled([...slots.deliveries, ...backs.pending()]);
    },
    setKeepAlive: (on) => timer.setKeepAlive(on),
    isRunning: () => running,
    inFlight: () => slots.deliveries.size,
    holding: () => sending.size,
    pausedUntil: () => finite(routing.panel === undefined ? undefined : holds.heldUntil(routing.panel)),
    failingPanels: () => holds.size,
    failingPanelIds: (limit) => holds.failingPanels(limit),
  };
}

const finite = (at: number | undefined): number | undefined => (at !== undefined && Number.isFinite(at) ? at : undefined);

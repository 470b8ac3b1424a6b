// Applies check outcomes to the license state, keeps the verdict cache and reports changes.

import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import type { LicenseResponse } from '../client/license-response.js';
import { asGuardError, errorCodeOf, LocalStateError } from '../errors.js';
import { describeError, type LogFields } from '../logger.js';
import { type LicenseEvent, type LicenseState, transition } from '../serve/license-state.js';
import { buildSnapshot } from '../serve/snapshot.js';
import { BEFORE_ANY, type CheckOrder, isAfter } from './check-order.js';
import { type WarnedThrough, type WarningClaims, warnIfExpiring } from './expiry-warnings.js';
import { CLOCK_TOLERANCE_MS, GraceClock } from './grace-clock.js';
import type { GuardConfig } from './guard-options.js';
import type { LicenseStatus } from './license-status.js';
import { type ChangeEvent, emitSafely, type Listener, type MonitorEvent, type MonitorRelay, reportError, type VerdictEntry } from './monitor-events.js';
import { writeStateFile } from './state-file.js';

export type { ChangeEvent, MonitorRelay, VerdictEntry } from './monitor-events.js';

export class LicenseMonitor {
  /**
   * The host app's listeners (single-panel mode), made on the first `on()`: in `panels` mode a
   * panel's events go through its relay, and an emitter per panel would cost ~300 bytes each.
   */
  private emitter: EventEmitter | undefined;
  readonly config: GuardConfig;
  /**
   * The verdict the request path reads: one per monitor (a guard, or one panel of `panels` mode),
   * so guards never share or reset each other's state. A plain field, replaced whole on every
   * move: reading it is one property load, and it costs nothing per panel beyond the entry itself
   * (a cache per monitor cost ~2 KiB per panel at 100,000 panels).
   */
  private current: VerdictEntry;
  private graceTimer: NodeJS.Timeout | undefined;
  /** The state file writes in order (none until the first: `panels` mode never writes one). */
  private writes: Promise<void> | undefined;
  private closed = false;
  get isClosed(): boolean {
    return this.closed;
  }
  private rollbackReported = false;
  readonly clock: GraceClock;
  lastCheckAt: number | null = null;
  lastFailure: unknown = null;
  /** Who ran the last check: this instance, or (cluster mode) a peer whose record was applied. */
  lastCheckBy: 'self' | 'peer' | null = null;
  /** Failed checks in a row according to the last peer record applied (cluster mode). */
  peerFailures = 0;
  /** The expiry warnings fired for the verdict's `expires_at`, kept where the verdict is (expiry-warnings.ts). */
  warned: WarnedThrough | null = null;
  /** Cluster mode: the store's leases, so that one instance fires each warning. */
  claims: WarningClaims | undefined;

  constructor(config: GuardConfig) {
    this.config = config;
    this.clock = new GraceClock(config.now, config.client);
    this.current = this.entryFor('pending', undefined, null, null, null);
  }

  on(event: string, listener: Listener): void {
    this.emitter ??= new EventEmitter();
    this.emitter.on(event, listener);
  }

  off(event: string, listener: Listener): void {
    this.emitter?.off(event, listener);
  }

  get entry(): VerdictEntry {
    return this.current;
  }

  /** Grace left for the current verdict, in ms (≤ 0: run out); null outside `grace`. */
  private graceRemainingMs(): number | null {
    const { verdict, lastSuccessAt, state } = this.entry;
    if (state !== 'grace' || lastSuccessAt === null) return null;
    return this.remainingFor(verdict, lastSuccessAt);
  }

  remainingFor(verdict: LicenseResponse | undefined, lastSuccessAt: number): number {
    return this.clock.remainingMs({
      lastSuccessAt,
      gracePeriodMs: this.config.gracePeriodMs,
      serverTime: verdict?.server_time ?? null,
      expiresAt: verdict?.panel.expires_at,
    });
  }

  /** Time left before the panel locks if no check succeeds: grace or `expires_at`, whichever ends first; 0 when locked or pending. */
  graceLeftMs(): number {
    const { verdict, lastSuccessAt, state } = this.entry;
    if ((state !== 'active' && state !== 'grace') || lastSuccessAt === null) return 0;
    return Math.max(0, this.remainingFor(verdict, lastSuccessAt));
  }

  graceEndsAt(): number | null {
    const remaining = this.graceRemainingMs();
    return remaining === null ? null : this.config.now() + Math.max(0, remaining);
  }

  /**
   * A schema-valid answer arrived: the only thing that may unlock, and the only immediate lock.
   * In cluster mode `order` places it among the peers' checks: an answer to a check older than
   * one already applied is dropped (returns false).
   */
  verdictReceived(verdict: LicenseResponse, at: number, order?: CheckOrder, basis?: CheckOrder | null): boolean {
    if (this.closed || !this.takeOrder(order, true)) return false;
    this.heldBasis = basis ?? null;
    this.lastCheckAt = at;
    this.lastCheckBy = 'self';
    this.lastFailure = null;
    this.ownServerTime = verdict.server_time ?? this.ownServerTime;
    this.clock.anchor(at);
    const event: LicenseEvent = verdict.active ? 'verified-active' : 'verified-inactive';
    this.move(event, verdict, at, verdict.active ? null : (verdict.reason ?? 'The license is inactive.'));
    warnIfExpiring(this);
    this.persist();
    return true;
  }

  /** `attempt`: this failure's place in the run of failed checks (1 for the first), for the log. */
  checkFailed(error: unknown, at: number, order?: CheckOrder, attempt?: number): boolean {
    if (this.closed || !this.takeOrder(order, false)) return false;
    this.lastCheckAt = at;
    this.lastCheckBy = 'self';
    this.lastFailure = error;
    const { verdict, lastSuccessAt, reason } = this.entry;
    // State first, report second: nothing a listener or logger does can skip the transition.
    this.move('check-failed', verdict, lastSuccessAt, reason);
    this.checkGraceEnd();
    this.report(error, { event: 'check_failed', attempt });
    warnIfExpiring(this);
    // Keeps the file's clock high-water mark current during an outage, so a restart with the
    // clock set back is recognised.
    this.persist();
    return true;
  }

  /** Cluster mode: order of the newest check applied (own or a peer's), and of the verdict held. */
  lastOrder: CheckOrder = BEFORE_ANY;
  successOrder: CheckOrder = BEFORE_ANY;
  /**
   * The mother's `server_time` (s) of the last answer this instance got itself (0: none). A peer's
   * active verdict that the mother answered in an earlier second is never adopted over it: the
   * mother's clock orders the two, whatever the hosts' clocks say (a replayed record cannot undo
   * our own lock). A peer's lock is always adopted.
   */
  ownServerTime = 0;
  /**
   * Cluster mode: the verdict (its check's order) held by whoever ran the check behind the verdict
   * held now, when that check started (null: none, or unknown). Tells a lock that check already
   * replaced from one it never saw, where the mother's clock cannot (both in one second).
   */
  heldBasis: CheckOrder | null = null;

  /** The basis of a check starting now: the order of the verdict held (null before any). */
  checkBasis(): CheckOrder | null {
    return this.successOrder.stamp === 0 ? null : this.successOrder;
  }

  /** Monotonic time (ms) a check outcome was last applied, own or a peer's. */
  lastAppliedMono = Number.NEGATIVE_INFINITY;

  private takeOrder(order: CheckOrder | undefined, success: boolean): boolean {
    if (order !== undefined) {
      if (!isAfter(order, this.lastOrder)) return false;
      this.lastOrder = order;
      if (success) this.successOrder = order;
    }
    this.lastAppliedMono = performance.now();
    return true;
  }

  /**
   * Writes the current verdict in the background, one write after another: requests waiting
   * for the first verdict do not wait for the disk, and an older verdict never overwrites a
   * newer one.
   */
  private persist(): void {
    const { stateFile, stateMac, panelKey } = this.config;
    const { verdict, lastSuccessAt } = this.entry;
    if (!stateFile || !stateMac || verdict === undefined || lastSuccessAt === null) return;
    const stored = { verdict, lastSuccessAt: Math.floor(lastSuccessAt), savedAt: Math.floor(this.clock.latestSeen()), warned: this.warned };
    this.writes = (this.writes ?? Promise.resolve())
      .then(() => writeStateFile(stateFile, panelKey, stateMac, stored))
      .catch((e: unknown) =>
        this.report(new LocalStateError('STATE_FILE_WRITE_FAILED', `The state file could not be written (${describeError(e)}); the verdict in memory stands.`)),
      );
  }

  /** Locks when the grace period (or the license's expiry day) has passed while failing. */
  checkGraceEnd(): void {
    const remaining = this.graceRemainingMs();
    if (remaining === null || this.closed) return;
    this.reportRollback();
    const { verdict, lastSuccessAt } = this.entry;
    if (remaining <= 0) {
      const since = lastSuccessAt === null ? 'start-up' : new Date(lastSuccessAt).toISOString();
      this.move('grace-ended', verdict, lastSuccessAt, `The license could not be verified since ${since}.`);
      return;
    }
    if (this.graceTimer) clearTimeout(this.graceTimer);
    // The timer only triggers an evaluation; the decision above uses the grace clock.
    this.graceTimer = setTimeout(() => this.checkGraceEnd(), Math.min(remaining + 10, 2 ** 31 - 1));
    this.graceTimer.unref();
  }

  /** Says once that the wall clock went back: grace is unaffected, but an operator should know. */
  private reportRollback(): void {
    const back = this.clock.rolledBackMs();
    if (back <= CLOCK_TOLERANCE_MS || this.rollbackReported) return;
    this.rollbackReported = true;
    this.report(
      new LocalStateError(
        'CLOCK_ROLLBACK',
        `The system clock went back by ${Math.round(back / 1000)} s; grace is measured on the monotonic clock and is not extended.`,
      ),
    );
  }

  /**
   * After close() nothing changes state, starts a file write or fires an event any more. The
   * promise settles once a write already under way has finished, so a process that awaits it
   * before exiting keeps its last verdict.
   */
  close(): Promise<void> {
    this.closed = true;
    if (this.graceTimer) clearTimeout(this.graceTimer);
    return this.writes ?? Promise.resolve();
  }

  /** The status as `guard.status()` shows it: what the monitor knows, plus what the scheduler knows. */
  status(schedule: Pick<LicenseStatus, 'nextCheckAt' | 'consecutiveFailures' | 'store'>): LicenseStatus {
    const entry = this.entry;
    return {
      state: entry.state,
      reason: entry.snapshot.lock?.reason ?? entry.reason,
      lastCheckAt: this.lastCheckAt,
      lastSuccessAt: entry.lastSuccessAt,
      graceEndsAt: this.graceEndsAt(),
      clockOffsetMs: this.config.client.clockOffsetMs(),
      lastError: this.lastFailure === null ? null : errorCodeOf(this.lastFailure),
      lastCheckBy: this.lastCheckBy,
      ...schedule,
    };
  }

  /** Applies one event of the transition table with the verdict it concerns (also used by the restore paths). */
  move(event: LicenseEvent, verdict: LicenseResponse | undefined, lastSuccessAt: number | null, reason: string | null): void {
    const previous = this.entry.state;
    const state = transition(previous, event);
    const entryReason = state === 'locked' || state === 'pending' ? reason : null;
    // Rebuilt on every check (minutes apart), so daysLeft and the lock page never go stale.
    this.current = this.entryFor(state, verdict, lastSuccessAt, verdict?.server_time ?? null, entryReason);
    this.relay?.moved();
    if (state !== 'grace' && this.graceTimer) clearTimeout(this.graceTimer);
    if (state === previous) return;
    this.config.telemetry.transition({ panel: this.config.panelKey, state, previous });
    const change: ChangeEvent = { state, previous, reason: entryReason };
    this.emit('change', change);
    if (state === 'locked') this.emit('lock', change);
    if (previous === 'locked' && state === 'active') this.emit('unlock', change);
  }

  /**
   * `panels` mode: the panel's relay to the guard's listeners, set by its runtime (one object
   * per panel, no listener closures).
   */
  relay: MonitorRelay | undefined;

  private entryFor(
    state: LicenseState,
    verdict: LicenseResponse | undefined,
    lastSuccessAt: number | null,
    serverTime: number | null,
    reason: string | null,
  ): VerdictEntry {
    // Days left are counted on the mother's clock, as the warnings and the metric count them.
    const now = lastSuccessAt === null ? this.config.now() : this.clock.motherNow(serverTime, lastSuccessAt);
    return { state, verdict, lastSuccessAt, serverTime, reason, snapshot: buildSnapshot(this.config, state, verdict, reason, now) };
  }

  /** Calls each listener on its own (monitor-events.ts). */
  emit(event: MonitorEvent | 'error', payload: unknown): void {
    emitSafely(this.emitter, this.relay, this.config, event, payload);
  }

  /** Errors to 'error' listeners when there are any, else to the logger (monitor-events.ts): never an unhandled throw. */
  report(thrown: unknown, fields: Partial<LogFields> = {}): void {
    reportError(this.emitter, this.relay, this.config, this.entry.state, asGuardError(thrown), fields);
  }
}

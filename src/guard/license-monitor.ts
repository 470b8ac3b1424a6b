// Applies check outcomes to the license state, keeps the verdict cache and reports changes.
import { EventEmitter } from 'node:events';
import { LRUCache } from 'lru-cache';
import type { LicenseResponse } from '../client/license-response.js';
import type { GuardConfig } from './guard-options.js';
import { graceDeadline, type LicenseEvent, type LicenseState, transition } from './license-state.js';
import { buildSnapshot, type GuardSnapshot } from './snapshot.js';
import { readStateFile, type StoredVerdict, writeStateFile } from './state-file.js';

/** One cache entry per panel: the last verified verdict, when it came, and the derived view. */
export interface VerdictEntry {
  readonly state: LicenseState;
  readonly verdict: LicenseResponse | undefined;
  readonly lastSuccessAt: number | null;
  readonly serverTime: number | null;
  readonly reason: string | null;
  readonly snapshot: GuardSnapshot;
}

export interface ChangeEvent {
  state: LicenseState;
  previous: LicenseState;
  reason: string | null;
}

export interface CheckFailure {
  error: unknown;
  at: number;
}

/** Keyed by panel so that one process can guard several panels with one cache. */
export const verdictCache = new LRUCache<string, VerdictEntry>({ max: 1000 });

export class LicenseMonitor extends EventEmitter {
  private readonly config: GuardConfig;
  private graceTimer: NodeJS.Timeout | undefined;
  lastCheckAt: number | null = null;
  lastFailure: CheckFailure | null = null;

  constructor(config: GuardConfig) {
    super();
    this.config = config;
    verdictCache.set(config.panelKey, this.entryFor('pending', undefined, null, null, null));
  }

  get entry(): VerdictEntry {
    return verdictCache.get(this.config.panelKey) ?? this.entryFor('pending', undefined, null, null, null);
  }

  graceEndsAt(): number | null {
    const { verdict, lastSuccessAt, state } = this.entry;
    if (state !== 'grace' || lastSuccessAt === null) return null;
    return graceDeadline(lastSuccessAt, this.config.gracePeriodMs, verdict?.panel.expires_at);
  }

  /** Restores the last verified verdict from `stateFile`; a bad file is reported, never fatal. */
  async restore(): Promise<void> {
    const { stateFile } = this.config;
    if (!stateFile) return;
    let stored: StoredVerdict | null;
    try {
      stored = await readStateFile(stateFile, this.config.panelKey);
    } catch (error) {
      this.report(error);
      return;
    }
    if (stored && this.entry.state === 'pending') this.applyVerdict(stored.verdict, stored.lastSuccessAt);
  }

  /** A schema-valid answer arrived: the only thing that may unlock, and the only immediate lock. */
  async verdictReceived(verdict: LicenseResponse, at: number): Promise<void> {
    this.lastCheckAt = at;
    this.lastFailure = null;
    this.applyVerdict(verdict, at);
    if (this.config.stateFile) {
      await writeStateFile(this.config.stateFile, this.config.panelKey, { verdict, lastSuccessAt: at }).catch((error: unknown) => this.report(error));
    }
  }

  checkFailed(error: unknown, at: number): void {
    this.lastCheckAt = at;
    this.lastFailure = { error, at };
    this.report(error);
    const { verdict, lastSuccessAt, serverTime, reason } = this.entry;
    this.move('check-failed', verdict, lastSuccessAt, serverTime, reason);
    this.checkGraceEnd();
  }

  /** Locks when the grace period (or the license's expiry day) has passed while failing. */
  checkGraceEnd(): void {
    const deadline = this.graceEndsAt();
    if (deadline === null) return;
    const { verdict, lastSuccessAt, serverTime } = this.entry;
    const now = this.config.now();
    if (now >= deadline) {
      const since = lastSuccessAt === null ? 'start-up' : new Date(lastSuccessAt).toISOString();
      this.move('grace-ended', verdict, lastSuccessAt, serverTime, `The license could not be verified since ${since}.`);
      return;
    }
    if (this.graceTimer) clearTimeout(this.graceTimer);
    // The timer only fires an evaluation; the decision uses the injected clock above.
    this.graceTimer = setTimeout(() => this.checkGraceEnd(), Math.min(deadline - now + 10, 2 ** 31 - 1));
    this.graceTimer.unref();
  }

  close(): void {
    if (this.graceTimer) clearTimeout(this.graceTimer);
  }

  private applyVerdict(verdict: LicenseResponse, at: number): void {
    const event: LicenseEvent = verdict.active ? 'verified-active' : 'verified-inactive';
    const reason = verdict.active ? null : (verdict.reason ?? 'The license is inactive.');
    this.move(event, verdict, at, verdict.server_time ?? null, reason);
  }

  private move(
    event: LicenseEvent,
    verdict: LicenseResponse | undefined,
    lastSuccessAt: number | null,
    serverTime: number | null,
    reason: string | null,
  ): void {
    const previous = this.entry.state;
    const state = transition(previous, event);
    const entryReason = state === 'locked' || state === 'pending' ? reason : null;
    // A failed check changes nothing shown: keep the pre-rendered view instead of rebuilding it.
    const unchanged = state === previous && entryReason === this.entry.reason && verdict === this.entry.verdict;
    const entry = unchanged ? { ...this.entry, lastSuccessAt, serverTime } : this.entryFor(state, verdict, lastSuccessAt, serverTime, entryReason);
    verdictCache.set(this.config.panelKey, entry);
    if (state !== 'grace' && this.graceTimer) clearTimeout(this.graceTimer);
    if (state === previous) return;
    const change: ChangeEvent = { state, previous, reason: entryReason };
    this.emit('change', change);
    if (state === 'locked') this.emit('lock', change);
    if (previous === 'locked' && state === 'active') this.emit('unlock', change);
  }

  private entryFor(
    state: LicenseState,
    verdict: LicenseResponse | undefined,
    lastSuccessAt: number | null,
    serverTime: number | null,
    reason: string | null,
  ): VerdictEntry {
    return { state, verdict, lastSuccessAt, serverTime, reason, snapshot: buildSnapshot(this.config, state, verdict, reason, this.config.now()) };
  }

  /** Errors go to 'error' listeners when there are any, else to the logger: never an unhandled throw. */
  report(error: unknown): void {
    if (this.listenerCount('error') > 0) this.emit('error', error);
    else this.config.logger.warn(`panel-license-guard: ${error instanceof Error ? error.message : String(error)}`);
  }
}

// One panel of `panels` mode: its client, its verdict (a LicenseMonitor of its own, so nothing of
// one panel reaches another), its checks, and when a request last asked for it.
import type { EventEmitter } from 'node:events';
import type { Request } from 'express';
import type { LicenseResponse } from '../../client/license-response.js';
import type { LicenseState } from '../../serve/license-state.js';
import { type ServeHooks, warnUncheckedDomain } from '../../serve/serve-verdict.js';
import { tracedCheck } from '../../tracing/check-span.js';
import type { ClusterSync } from '../cluster/cluster-sync.js';
import { createPanelSync, sharedRecordOf } from '../cluster/cluster-wiring.js';
import { expiresInMs, motherNow } from '../expiry-warnings.js';
import type { GuardConfig } from '../guard-options.js';
import { type ChangeEvent, LicenseMonitor, type MonitorRelay } from '../license-monitor.js';
import type { LicenseStatus } from '../license-status.js';
import { retryDelay } from '../poller.js';
import { checkResult, type PanelReading } from '../telemetry.js';
import type { CheckSpreader } from './check-spreader.js';
import type { PanelCredentials } from './host-resolver.js';
import { relayError, reportMisdirected } from './panel-reports.js';
import { distrust, type Retired, restore, retire } from './panel-retirement.js';
import { isStale, servableUntil } from './panel-serving.js';

export type { Retired } from './panel-retirement.js';

/** What every panel of a guard shares: its check schedule, its events and the host lookup. */
export interface PanelContext {
  spreader: CheckSpreader;
  events: EventEmitter;
  /** The hosts known for a panel id (events name them). */
  hostsOf: (panel: string) => string[];
}

/** `servedTick` of a panel no route has served (its idle check goes by the full path's clock). */
const NEVER_SERVED = -(2 ** 30);

/**
 * One panel in memory. Kept lean, since a process may hold 100,000 of them: the guard's config is
 * this panel's prototype (three own fields), its hooks and relays are methods of this class
 * rather than closures, and what few panels need (refused hosts, a check's abort) is made on use.
 */
export class PanelRuntime implements ServeHooks, MonitorRelay {
  /**
   * Bumped whenever what a request gets may change (a new verdict, idling, closing): a route
   * made before it takes the full path. First of the fields, next to `servedTick`, so that the
   * request path touches one line of this object.
   */
  servingVersion = 0;
  /** The routes' tick in which a route last served this panel (a Smi, written per request). */
  servedTick = NEVER_SERVED;
  /** The guard's clock at the last request that took the full path. */
  lastRequestAt: number;
  readonly id: string;
  readonly config: GuardConfig;
  readonly monitor: LicenseMonitor;
  private idleNow: boolean = false;
  /** With a store: this panel's share of the cluster (one check per slot among the instances). */
  readonly sync: ClusterSync | undefined;
  private failures = 0;
  /** The next check scheduled is this instance's retry (it ran the failing check), not a regular slot. */
  private retrying = false;
  private checking: Promise<void> | undefined;
  /** The first check (or the first after idling) while it runs: requests may wait for it. */
  firstCheck: Promise<void> | undefined;

  /** Makes `check` the one requests wait for, until it settles (then nothing is kept). */
  awaitFirst(check: Promise<void>): void {
    const first = check
      .catch(() => {})
      .finally(() => {
        if (this.firstCheck === first) this.firstCheck = undefined;
      });
    this.firstCheck = first;
  }
  private reportedHosts: Set<string> | undefined;
  private warnedUnchecked = false;
  private closed = false;
  /** Aborts the check in flight on close(), so its timer cannot keep the process alive. */
  private inFlight: AbortController | undefined;

  constructor(
    shared: GuardConfig,
    credentials: PanelCredentials,
    /** Where the guard keeps it, and its name in the check spreader (key and secret). */
    readonly key: string,
    private readonly context: PanelContext,
  ) {
    const client = (shared.panels as NonNullable<GuardConfig['panels']>).clientFor(credentials);
    this.id = client.panelId;
    const config: GuardConfig = Object.create(shared);
    config.client = client;
    config.panelKey = client.panelId;
    if (shared.store !== undefined) config.storeMac = (data) => client.localMac('license-store', data);
    this.config = config;
    this.monitor = new LicenseMonitor(config);
    // The guard's listeners hear of this panel's changes and errors, with its id.
    this.monitor.relay = this;
    this.sync = createPanelSync(config, this.monitor, {
      onPeerRecord: (record) => this.peerChecked(record.failures),
      checkNow: () => void this.check(),
    });
    this.lastRequestAt = shared.now();
  }

  /** No request for `idleMs`: not checked until the next one, which checks first if needed. */
  get idle(): boolean {
    return this.idleNow;
  }

  set idle(idle: boolean) {
    this.idleNow = idle;
    this.servingVersion++;
  }

  /** The monitor moved to a new entry: what requests get has changed. */
  moved(): void {
    this.servingVersion++;
  }

  /** The monitor's change, lock and unlock, as the guard's events (with the panel id). */
  event(name: 'change' | 'lock' | 'unlock', change: ChangeEvent): void {
    this.context.events.emit(name, { ...change, panel: this.id, hosts: this.context.hostsOf(this.id) });
  }

  /** The guard's 'error' listeners hear of this panel's errors (panel-reports.ts); false when there are none. */
  error(error: unknown): boolean {
    return relayError(this.context, this.config.logger, this.id, error);
  }

  onUncheckedDomain(): void {
    if (this.warnedUnchecked) return;
    this.warnedUnchecked = true;
    warnUncheckedDomain(this.config, this.id);
  }

  onMisdirected(req: Request, licensed: string[]): void {
    this.reportedHosts ??= new Set();
    reportMisdirected(this.monitor, this.id, this.reportedHosts, req, licensed);
  }

  /** Checks now (concurrent calls share one check) and schedules the next: regular, or a retry. */
  check(): Promise<void> {
    this.checking ??= this.runCheck().finally(() => {
      this.checking = undefined;
    });
    return this.checking;
  }

  private async runCheck(): Promise<void> {
    const { client, now } = this.config;
    // With a store: this check's place among the instances' checks is fixed when it starts.
    const order = this.sync?.nextOrder();
    const basis = this.monitor.checkBasis();
    let failure: unknown = null;
    let applied: boolean;
    let answer: LicenseResponse | undefined;
    const began = performance.now();
    const abort = new AbortController();
    this.inFlight = abort;
    try {
      answer = await tracedCheck(this.config.tracing, this.id, client, { signal: abort.signal });
      this.config.telemetry.check({ panel: this.id, result: checkResult(answer, null), durationMs: performance.now() - began });
      applied = this.monitor.verdictReceived(answer, now(), order, basis);
    } catch (error) {
      failure = error;
      if (!this.closed) this.config.telemetry.check({ panel: this.id, result: checkResult(undefined, error), durationMs: performance.now() - began });
      applied = this.monitor.checkFailed(error, now(), order, this.failures + 1);
    } finally {
      this.inFlight = undefined;
    }
    if (this.closed) return;
    if (!applied) {
      // A peer's later check arrived meanwhile and stands; if it contradicts our answer (the
      // license changed while both ran), ask once more: a check starting now orders after both.
      // Either way this panel keeps its place in the schedule, as a regular slot.
      const held = this.monitor.entry.verdict;
      if (answer !== undefined && held !== undefined && held.active !== answer.active) setTimeout(() => void this.check(), 50).unref();
      this.retrying = false;
      this.context.spreader.scheduleRegular(this.key);
      return;
    }
    this.retrying = failure !== null;
    if (failure === null) this.context.spreader.scheduleRegular(this.key);
    else {
      const delay = retryDelay(this.failures + 1, this.config.retryBaseMs, this.config.retryMaxMs, this.config.random);
      this.context.spreader.scheduleAt(this.key, now() + delay);
    }
    this.sync?.share(
      sharedRecordOf(this.monitor, failure, { consecutiveFailures: () => this.failures, nextCheckAt: () => this.context.spreader.nextAt(this.key) ?? null }),
    );
    this.failures = failure === null ? 0 : this.failures + 1;
  }

  /**
   * The spreader's call. Alone, or for this instance's own retry: check. With a store, a regular
   * slot is checked by one instance (a sealed lease per panel and slot); the others re-read the
   * panel's record, and check themselves only if no result follows in time. `dueAtMs`: the time
   * the check was scheduled for; the slot is that time's, not the moment this instance's timer
   * fired, so instances whose timers fire a little apart (a loaded machine) contend for one
   * lease, never two.
   */
  scheduled(dueAtMs: number): void {
    const { sync } = this;
    if (!sync || this.retrying) {
      void this.check();
      return;
    }
    sync.ensureSubscribed();
    const slot = this.context.spreader.slotOf(this.key, dueAtMs);
    void sync.acquire(`slot:${slot}`, this.config.panels?.checkIntervalMs ?? 300_000).then((elected) => {
      if (this.closed) return;
      if (elected) return void this.check();
      this.context.spreader.scheduleRegular(this.key);
      sync.slotSkipped(String(slot));
    });
  }

  /**
   * The first check of a panel new to this instance. With a store, a current record of the
   * panel (a peer checked it lately) is adopted instead, and instances starting together make
   * one call between them.
   */
  async start(): Promise<void> {
    if (!this.sync) return this.check();
    const plan = await this.sync.start(this.config.startupTimeoutMs);
    if (this.closed) return;
    if (plan === 'check') return this.check();
    this.context.spreader.scheduleRegular(this.key);
  }

  /** A peer ran the newest check of this panel: it owns the retries, and its count of failures is ours. */
  private peerChecked(failures: number): void {
    this.failures = failures;
    if (!this.retrying) return;
    this.retrying = false;
    this.context.spreader.scheduleRegular(this.key);
  }

  /** What survives eviction (panel-retirement.ts). */
  retire(): Retired | undefined {
    return retire(this.monitor);
  }

  /** Resumes an evicted panel as a state file would (panel-retirement.ts); false when nothing could be resumed. */
  restore(retired: Retired): boolean {
    return restore(this.monitor, retired);
  }

  /** Back after idling past its grace: the old verdict is no longer trusted (panel-retirement.ts). */
  distrust(): void {
    distrust(this.monitor);
  }

  /** Until when (the guard's clock) a request may be served from the current verdict as it is; 0 when it may not (panel-serving.ts). */
  servableUntil(now: number): number {
    return this.idle || this.closed ? 0 : servableUntil(this.monitor, this.config.gracePeriodMs, now);
  }

  /** The verdict is too old to trust without asking again (idle past its grace). */
  stale(now: number): boolean {
    return isStale(this.monitor, this.config.gracePeriodMs, now);
  }

  status(): LicenseStatus {
    const status = this.monitor.status({
      nextCheckAt: this.context.spreader.nextAt(this.key) ?? null,
      consecutiveFailures: this.monitor.lastCheckBy === 'peer' ? this.monitor.peerFailures : this.failures,
      store: this.sync?.health ?? 'none',
    });
    return { ...status, panel: this.id };
  }

  /** The license state, as a scrape's counts read it (no status computed). */
  get state(): LicenseState {
    return this.monitor.entry.state;
  }

  /** Its last check failed (its own or a peer's), or its shared store is failing. */
  get failing(): boolean {
    const failures = this.monitor.lastCheckBy === 'peer' ? this.monitor.peerFailures : this.failures;
    return failures > 0 || this.sync?.health === 'unavailable';
  }

  reading(): PanelReading {
    const { monitor } = this;
    return { panel: this.id, status: this.status(), graceLeftMs: monitor.graceLeftMs(), expiresInMs: expiresInMs(monitor.entry.verdict, motherNow(monitor)) };
  }

  /** Stops at once; the promise settles when the store's last write and unsubscribe have (bounded). */
  close(): Promise<void> {
    this.closed = true;
    this.servingVersion++;
    this.inFlight?.abort();
    this.context.spreader.cancel(this.key);
    void this.monitor.close();
    return this.sync?.close() ?? Promise.resolve();
  }
}

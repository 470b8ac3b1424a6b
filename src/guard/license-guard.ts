// licenseGuard(): the Express middleware with start/refresh/close, state, status and events.

import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { LicenseGuardError } from '../errors.js';
import type { StoreHealth } from '../store/license-store.js';
import { createClusterSync, sharedRecordOf } from './cluster-wiring.js';
import { type GuardConfig, type LicenseGuardOptions, resolveGuardOptions } from './guard-options.js';
import { createHealthHandler, type HealthHandlerOptions } from './health-handler.js';
import { type ChangeEvent, LicenseMonitor } from './license-monitor.js';
import type { LicenseState } from './license-state.js';
import { multiPanelGuard } from './multi-panel-guard.js';
import { createPoller } from './poller.js';
import { serveVerdict, uncheckedDomainWarning } from './serve-verdict.js';
import { restoreStateFile } from './state-restore.js';
import { createStatusHandler, type StatusHandlerOptions } from './status-handler.js';
import { attachInstruments, checkResult } from './telemetry.js';

export interface LicenseStatus {
  state: LicenseState;
  reason: string | null;
  /** Local time (ms) of the last check, successful or not. */
  lastCheckAt: number | null;
  /** Local time (ms) of the last verified verdict. */
  lastSuccessAt: number | null;
  /** When the next check is due (schedule or retry), before jitter. */
  nextCheckAt: number | null;
  consecutiveFailures: number;
  /** While in `grace`: when the panel locks unless a check succeeds. */
  graceEndsAt: number | null;
  /** The mother's clock minus ours, in ms. */
  clockOffsetMs: number;
  /** Code of the last failure (e.g. 'TIMEOUT'), null after a success. */
  lastError: string | null;
  /**
   * Cluster mode: `'ok'` while the shared store answers, `'unavailable'` while it fails (this
   * instance then checks the mother on its own); `'none'` without a store.
   */
  store: StoreHealth;
  /** Who ran the last check: this instance, a peer through the store (cluster mode), or nobody yet. */
  lastCheckBy: 'self' | 'peer' | null;
  /** `panels` mode: the panel's id (derived from its key, never the key itself), as events name it. */
  panel?: string;
}

export interface GuardEvents {
  change: (event: ChangeEvent) => void;
  lock: (event: ChangeEvent) => void;
  unlock: (event: ChangeEvent) => void;
  /** Everything the guard reports: switch on `error.code` (see LicenseGuardError). */
  error: (error: LicenseGuardError) => void;
}

export interface LicenseGuard extends RequestHandler {
  /** Restores `stateFile`, runs the first check and starts the schedule. Resolves with the state. */
  start(): Promise<LicenseState>;
  /** Checks now; concurrent calls share one request. Resolves with the state afterwards. With `panels`: the panel at `host`. */
  refresh(host?: string): Promise<LicenseState>;
  /**
   * Stops the schedule and all timers so the process can exit, at once. The promise resolves when
   * a `stateFile` write already under way has finished (await it before `process.exit()`).
   */
  close(): Promise<void>;
  readonly state: LicenseState;
  /** With `panels`: the status of the panel at `host` (undefined for a host not known yet). */
  status(host?: string): LicenseStatus;
  /**
   * A handler answering the status as JSON: 200 while the panel serves (active, grace), 503 while
   * it does not (locked, pending), for load balancers and operator pages. With `panels`: the panel
   * of the request's host (404 for an unknown host).
   */
  statusHandler(options?: StatusHandlerOptions): RequestHandler;
  /**
   * A handler for the load balancer: 200 while this instance runs, whatever any panel's license
   * says (a locked panel is the instance doing its job), 503 once closed; the body counts the
   * panels in memory by state. It reads no host: with `panels`, mount it before the guard (an IP
   * or an internal name is no panel's host).
   */
  healthHandler(options?: HealthHandlerOptions): RequestHandler;
  /**
   * With `panels`: the hosts this instance knows for a panel, by its id (as events and status
   * name it) or by your id from the resolver; at most 100. Always empty for a single panel.
   */
  hostsOf(panel: string): string[];
  on<E extends keyof GuardEvents>(event: E, listener: GuardEvents[E]): LicenseGuard;
  off<E extends keyof GuardEvents>(event: E, listener: GuardEvents[E]): LicenseGuard;
}

export function licenseGuard(options: LicenseGuardOptions): LicenseGuard {
  const config: GuardConfig = resolveGuardOptions(options);
  if (config.panels) return multiPanelGuard(config);
  const monitor = new LicenseMonitor(config);
  // Aborts a check in flight on close(), so its timer cannot keep the process alive.
  const closing = new AbortController();
  const sync = createClusterSync(config, monitor, () => poller);
  const poller = createPoller({
    schedule: config.schedule,
    jitterMs: config.jitterMs,
    retryBaseMs: config.retryBaseMs,
    retryMaxMs: config.retryMaxMs,
    random: config.random,
    now: config.now,
    check: async () => {
      // Cluster mode: the check's place among the peers' checks is fixed when it starts.
      const order = sync?.nextOrder();
      let failure: unknown = null;
      let applied: boolean;
      let lastAnswer: { active: boolean } | undefined;
      const began = performance.now();
      try {
        const verdict = await config.client.checkLicense({ signal: closing.signal });
        lastAnswer = verdict;
        config.telemetry.check({ panel: config.panelKey, result: checkResult(verdict, null), durationMs: performance.now() - began });
        applied = monitor.verdictReceived(verdict, config.now(), order);
      } catch (error) {
        failure = error;
        if (!closing.signal.aborted)
          config.telemetry.check({ panel: config.panelKey, result: checkResult(undefined, error), durationMs: performance.now() - began });
        applied = monitor.checkFailed(error, config.now(), order, poller.consecutiveFailures() + 1);
      }
      if (!applied) {
        // A peer's later check arrived meanwhile and stands. If its verdict contradicts our answer
        // (two checks overlapped while the license changed), ask once more: a check that starts
        // now orders after both, so its answer settles it.
        const held = monitor.entry.verdict;
        if (failure === null && held !== undefined && held.active !== lastAnswer?.active && !closing.signal.aborted)
          setTimeout(() => void poller.refresh(), 50).unref();
        return true;
      }
      sync?.share(sharedRecordOf(monitor, failure, poller));
      return failure === null;
    },
    ...(sync && {
      coordinator: {
        runCoordinator: sync.runCoordinator,
        // Per slot (the key names the slot): long enough that every instance has fired by then,
        // even one whose clock is minutes behind.
        leaseMs: config.jitterMs + config.client.timeoutMs + 600_000,
        // Not elected: the winner's record arrives by subscription; a read catches a lost
        // message, and if no result follows in time this instance checks itself.
        onSkipped: (slot) => sync.slotSkipped(slot),
      },
    }),
  });

  let started: Promise<LicenseState> | undefined;
  let firstVerdictBy = 0;
  let warnedNotStarted = false;
  const serveHooks = { onUncheckedDomain: uncheckedDomainWarning(config, undefined) };

  function start(): Promise<LicenseState> {
    if (closing.signal.aborted) return Promise.resolve(monitor.entry.state);
    started ??= (async () => {
      firstVerdictBy = config.now() + config.startupTimeoutMs;
      await restoreStateFile(monitor, config);
      const plan = sync ? await sync.start(config.startupTimeoutMs) : 'check';
      const first = plan === 'check' ? poller.refresh() : undefined;
      poller.start();
      await first;
      return monitor.entry.state;
    })();
    return started;
  }

  /** Waits for the first check (bounded by startupTimeoutMs): a timer, never I/O of its own. */
  function waitForFirstVerdict(): Promise<void> {
    const remaining = firstVerdictBy - config.now();
    if (!started || remaining <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, remaining);
      void started
        ?.finally(() => {
          clearTimeout(timer);
          resolve();
        })
        .catch(() => {});
    });
  }

  function handle(req: Request, res: Response, next: NextFunction, waited: boolean): void {
    const { snapshot } = monitor.entry;
    if (snapshot.state === 'pending' && !waited && !config.isAllowed(req)) {
      res.locals.branding = snapshot.branding;
      res.locals.license = snapshot.license;
      if (!started) {
        if (!warnedNotStarted)
          config.logger.warn(
            'panel-license-guard: a request arrived before guard.start(); starting the license check now. Call `await guard.start()` at boot.',
            { event: 'not_started', panel: config.panelKey || undefined },
          );
        warnedNotStarted = true;
        void start();
      }
      waitForFirstVerdict().then(() => handle(req, res, next, true), next);
      return;
    }
    serveVerdict(req, res, next, config, snapshot, serveHooks);
  }

  const guard = ((req: Request, res: Response, next: NextFunction) => handle(req, res, next, false)) as LicenseGuard;
  Object.defineProperties(guard, {
    name: { value: 'licenseGuard' },
    state: { get: () => monitor.entry.state, enumerable: true },
  });
  guard.start = start;
  guard.refresh = async () => {
    await poller.refresh();
    return monitor.entry.state;
  };
  guard.close = () => {
    const writes = monitor.close();
    poller.close();
    closing.abort();
    return Promise.all([writes, sync?.close()]).then(() => {});
  };
  guard.status = () =>
    monitor.status({
      nextCheckAt: poller.nextCheckAt(),
      consecutiveFailures: monitor.lastCheckBy === 'peer' ? monitor.peerFailures : poller.consecutiveFailures(),
      store: sync?.health ?? 'none',
    });
  guard.statusHandler = (options) => createStatusHandler(() => guard.status(), options);
  guard.healthHandler = (options) =>
    createHealthHandler({ closed: () => closing.signal.aborted, panels: () => [{ state: monitor.entry.state, store: sync?.health ?? 'none' }] }, options);
  guard.hostsOf = () => [];
  attachInstruments(guard, {
    telemetry: config.telemetry,
    multiPanel: false,
    hasStore: config.store !== undefined,
    readings: () => [{ panel: config.panelKey, status: guard.status(), graceLeftMs: monitor.graceLeftMs() }],
  });
  guard.on = (event, listener) => {
    monitor.on(event, listener as (...args: unknown[]) => void);
    return guard;
  };
  guard.off = (event, listener) => {
    monitor.off(event, listener as (...args: unknown[]) => void);
    return guard;
  };
  return guard;
}

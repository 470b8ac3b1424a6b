// licenseGuard(): the Express middleware with start/refresh/close, state, status and events.

import type { NextFunction, Request, Response } from 'express';
import { isExpressResponse, notExpressError } from '../serve/express-only.js';
import type { LicenseState } from '../serve/license-state.js';
import { serveVerdict, uncheckedDomainWarning } from '../serve/serve-verdict.js';
import { tracedCheck } from '../tracing/check-span.js';
import { createClusterSync, sharedRecordOf } from './cluster/cluster-wiring.js';
import { expiresInMs, motherNow } from './expiry-warnings.js';
import type { LicenseGuard } from './guard-api.js';
import { type GuardConfig, type LicenseGuardOptions, resolveGuardOptions } from './guard-options.js';
import { createHealthHandler } from './health-handler.js';
import { LicenseMonitor } from './license-monitor.js';
import { multiPanelGuard } from './panels/multi-panel-guard.js';
import { createPoller } from './poller.js';
import { restoreStateFile } from './state-restore.js';
import { createStatusHandler } from './status-handler.js';
import { attachInstruments, checkResult } from './telemetry.js';

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
      const basis = monitor.checkBasis();
      let failure: unknown = null;
      let applied: boolean;
      let lastAnswer: { active: boolean } | undefined;
      const began = performance.now();
      try {
        const verdict = await tracedCheck(config.tracing, config.panelKey, config.client, { signal: closing.signal });
        lastAnswer = verdict;
        config.telemetry.check({ panel: config.panelKey, result: checkResult(verdict, null), durationMs: performance.now() - began });
        applied = monitor.verdictReceived(verdict, config.now(), order, basis);
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
    if (!isExpressResponse(res)) throw notExpressError('licenseGuard', req, res);
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
    readings: () => [
      {
        panel: config.panelKey,
        status: guard.status(),
        graceLeftMs: monitor.graceLeftMs(),
        expiresInMs: expiresInMs(monitor.entry.verdict, motherNow(monitor)),
      },
    ],
    view: () => ({ snapshot: monitor.entry.snapshot, domains: config.domains }),
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

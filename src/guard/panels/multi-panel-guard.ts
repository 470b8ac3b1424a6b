// `panels` mode: one guard, any number of panels, each chosen per request by its host. The
// request path of a known host is one map read (its route) and the panel's ready-made verdict;
// resolving a new host and its first check are the only waits, bounded as at start-up.
import { EventEmitter } from 'node:events';
import type { NextFunction, Request, Response } from 'express';
import { LRUCache } from 'lru-cache';
import { callStore } from '../../license-store/store-calls.js';
import { isExpressResponse, notExpressError } from '../../serve/express-only.js';
import { sendBusyHost, sendUnknownHost } from '../../serve/host-responses.js';
import { HostRoutes } from '../../serve/host-routes.js';
import { hostKey, requestHost } from '../../serve/request-host.js';
import { serveVerdict } from '../../serve/serve-verdict.js';
import type { LicenseGuard } from '../guard-api.js';
import type { GuardConfig } from '../guard-options.js';
import { createHealthHandler } from '../health-handler.js';
import { createStatusHandler } from '../status-handler.js';
import { attachInstruments } from '../telemetry.js';
import { createCheckSpreader } from './check-spreader.js';
import { createHostResolver, type PanelResolution } from './host-resolver.js';
import { KnownHosts } from './known-hosts.js';
import { NewHostGate } from './new-host-gate.js';
import { selectReadings, summarize } from './panel-readings.js';
import { PanelRuntime, type Retired } from './panel-runtime.js';
import { ResolverReports } from './resolver-reports.js';

/**
 * How long a host's route serves requests on its own before the full path runs again for it
 * (which refreshes the caches' recency and starts the resolver's background refresh when due):
 * at 1,000 hosts, one request in ~1,000 takes the full path.
 */
const ROUTE_MS = 60_000;

export function multiPanelGuard(config: GuardConfig): LicenseGuard {
  const panels = config.panels as NonNullable<GuardConfig['panels']>;
  const events = new EventEmitter();
  let closed = false;
  const gate = new NewHostGate({ perSecond: panels.resolvePerSecond, burst: panels.resolveBurst, concurrency: panels.resolveConcurrency });
  const reports = new ResolverReports({
    logger: config.logger,
    perSecond: panels.resolvePerSecond,
    emit: (error) => events.listenerCount('error') > 0 && events.emit('error', error),
  });
  // With a store, the hosts served before a restart are not new hosts after it (known-hosts.ts).
  const knownHosts = config.store === undefined ? undefined : new KnownHosts({ store: config.store, call: callStore });
  const resolver = createHostResolver({
    ...(knownHosts === undefined ? {} : { listed: knownHosts, listedConcurrency: panels.resolveConcurrency }),
    resolve: panels.resolve,
    max: panels.max * 4,
    unknownMax: panels.max,
    resolveTtlMs: panels.resolveTtlMs,
    unknownTtlMs: panels.unknownTtlMs,
    timeoutMs: panels.resolveTimeoutMs,
    runtimeKeyOf: panels.runtimeKeyOf,
    now: config.now,
    gate,
    onFailure: (kind, error, detail) => reports.failed(kind, error, detail),
    // A rotated secret: once no host uses the old runtime, it stops checking at once. It is
    // retired, as on eviction, so a host that comes back to it resumes from its verdict, unwaited.
    onMoved: (runtimeKey) => {
      const panel = running.peek(runtimeKey);
      if (panel === undefined || resolver.inUse(runtimeKey)) return;
      const last = panel.retire();
      running.delete(runtimeKey);
      if (last) retired.set(runtimeKey, last);
    },
  });
  /** Evicted panels' last verdicts: a panel that comes back resumes from it, within its grace. */
  const retired = new LRUCache<string, Retired>({ max: panels.max });
  // The panels in memory again, in a Set: its iterator stays valid while panels come and go, so
  // the console can read it a slice at a time (an LRU's may revisit or skip what moves meanwhile).
  const inMemory = new Set<PanelRuntime>();
  const running = new LRUCache<string, PanelRuntime>({
    max: panels.max,
    dispose: (panel, key, reason) => {
      inMemory.delete(panel);
      const last = reason === 'evict' ? panel.retire() : undefined;
      if (last) retired.set(key, last);
      void panel.close();
    },
  });
  const spreader = createCheckSpreader({
    intervalMs: panels.checkIntervalMs,
    now: config.now,
    count: () => running.size,
    run: (id, dueAtMs) => {
      const panel = running.peek(id);
      if (!panel) return;
      // No request for `idleMs`: stop checking until the next one (which checks first if needed).
      if (config.now() - panel.lastRequestAt > panels.idleMs && routes.unservedFor(panel.servedTick, panels.idleMs)) panel.idle = true;
      else panel.scheduled(dueAtMs);
    },
  });

  const context = { spreader, events, hostsOf: (panel: string) => resolver.hostsOf(panel) };

  /** Routes by the host as received, bounded like the resolver's hosts. */
  const routes = new HostRoutes<PanelRuntime>(panels.max * 4);
  function setRoute(req: Request, host: string, panel: PanelRuntime, known: PanelResolution, now: number): void {
    if (closed) return;
    // Never past the resolver's answer (a host due to be asked again takes the full path), nor
    // past the time the verdict stops serving as it is.
    const lifeMs = Math.min(ROUTE_MS, known.freshUntil - now, panel.servableUntil(now) - now);
    routes.set(req, hostKey(req), host, panel, config, known.credentials.panel, lifeMs);
  }

  /**
   * The panel of a known host. A new one checks at once (its first requests wait for it); one
   * evicted before resumes from its last verdict and is checked in its turn under the per-second
   * cap, so eviction churn never bypasses the bound on mother traffic.
   */
  function panelFor(known: PanelResolution): PanelRuntime {
    let panel = running.get(known.runtimeKey);
    if (!panel) {
      panel = new PanelRuntime(config, known.credentials, known.runtimeKey, context);
      running.set(known.runtimeKey, panel);
      inMemory.add(panel);
      const last = retired.get(known.runtimeKey);
      retired.delete(known.runtimeKey);
      if (last && panel.restore(last)) {
        panel.sync?.resume();
        spreader.scheduleAt(panel.key, config.now());
      } else panel.awaitFirst(panel.start());
    }
    return panel;
  }

  /** Waits for a panel's first check, at most `startupTimeoutMs`: a timer, never I/O of its own. */
  function waitFor(check: Promise<void> | undefined): Promise<void> {
    if (!check) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, config.startupTimeoutMs);
      timer.unref();
      void check.finally(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /**
   * A request for a host routed lately, whose panel's verdict serves as it is (no first check,
   * not idle, not stale): one map read and the route's ready-made locals. Everything else takes
   * the full path.
   */
  function handleRouted(req: Request, res: Response, next: NextFunction): void {
    if (!isExpressResponse(res)) throw notExpressError('licenseGuard', req, res);
    const route = routes.serving(hostKey(req));
    if (route === undefined) {
      handle(req, res, next, false, false);
      return;
    }
    const { locals } = res;
    locals.panel = route.tenant;
    if (route.pass) {
      locals.branding = route.branding;
      locals.license = route.license;
      next();
    } else serveVerdict(req, res, next, route.config, route.snapshot, route.panel);
  }

  /** `resolved`: the host's resolver call is over; `waited`: so is the wait for the panel's verdict. */
  function handle(req: Request, res: Response, next: NextFunction, resolved: boolean, waited: boolean): void {
    const host = requestHost(req);
    const known = host === undefined ? undefined : resolver.cached(host);
    if (host !== undefined && known === undefined && !resolved && !closed) {
      resolver
        .resolve(host)
        .then((resolution) => {
          if (resolution.kind !== 'busy') return handle(req, res, next, true, false);
          reports.busy();
          sendBusyHost(req, res, config, gate.retryAfterSeconds());
        })
        .catch(next);
      return;
    }
    // A malformed host never reaches the resolver; an unknown one never causes a mother call.
    if (known?.kind !== 'panel') {
      sendUnknownHost(req, res, config);
      return;
    }
    // After close(): the last verdicts still stand (as in single-panel mode); nothing new starts.
    const panel = closed ? running.peek(known.runtimeKey) : panelFor(known);
    if (!panel) {
      sendUnknownHost(req, res, config);
      return;
    }
    const now = config.now();
    panel.lastRequestAt = now;
    if (panel.idle && !closed) {
      // Back after idling: checked again, and not trusted beyond its grace meanwhile.
      panel.idle = false;
      if (panel.stale(now)) panel.distrust();
      panel.awaitFirst(panel.check());
    }
    const { snapshot } = panel.monitor.entry;
    const mustWait = snapshot.state === 'pending' || panel.stale(now);
    if (mustWait && !waited && !closed && !config.isAllowed(req)) {
      waitFor(panel.firstCheck)
        .then(() => handle(req, res, next, true, true))
        .catch(next);
      return;
    }
    // Your id of the panel (from the resolver), so an upload route can enqueue without a lookup.
    res.locals.panel = known.credentials.panel;
    setRoute(req, host as string, panel, known, now);
    serveVerdict(req, res, next, panel.config, snapshot, panel);
  }

  // The middleware is the routed handler itself: no wrapper call per request.
  const guard = handleRouted as LicenseGuard;
  Object.defineProperties(guard, {
    name: { value: 'licenseGuard' },
    // One state per panel: see status(host).
    state: { get: () => 'pending', enumerable: true },
  });
  async function panelAt(host: string | undefined): Promise<PanelRuntime | undefined> {
    if (host === undefined) throw new TypeError('panel-license-guard: with `panels`, pass the host: guard.refresh(host), guard.status(host).');
    const canonical = requestHost({ hostname: host } as Request);
    if (canonical === undefined) return undefined;
    const known = resolver.cached(canonical) ?? (closed ? undefined : await resolver.resolve(canonical));
    if (known?.kind !== 'panel') return undefined;
    return closed ? running.peek(known.runtimeKey) : panelFor(known);
  }
  guard.start = async () => 'pending';
  guard.refresh = async (host?: string) => {
    const panel = await panelAt(host);
    if (!panel) return 'pending';
    if (!closed) await panel.check();
    return panel.monitor.entry.state;
  };
  guard.close = async () => {
    closed = true;
    routes.close();
    resolver.close();
    await knownHosts?.close();
    reports.close();
    spreader.close();
    // Runtimes stop checking but keep their last verdict, which requests still get.
    await Promise.all(Array.from(running.values(), (panel) => panel.close()));
  };
  /** The panel in memory at `host`, without resolving anything. */
  const panelAtHost = (host: string) => {
    const canonical = requestHost({ hostname: host } as Request);
    const known = canonical === undefined ? undefined : resolver.cached(canonical);
    return known?.kind === 'panel' ? running.peek(known.runtimeKey) : undefined;
  };
  guard.status = ((host?: string) => {
    if (host === undefined) throw new TypeError('panel-license-guard: with `panels`, pass the host: guard.status(host).');
    return panelAtHost(host)?.status();
  }) as LicenseGuard['status'];
  guard.healthHandler = (options) =>
    createHealthHandler(
      {
        closed: () => closed,
        panels: () => Array.from(running.values(), (panel) => ({ state: panel.monitor.entry.state, store: panel.sync?.health ?? 'none' })),
      },
      options,
    );
  guard.hostsOf = (panel) => resolver.hostsOf(panel);
  guard.statusHandler = (options) =>
    createStatusHandler((req) => {
      const host = requestHost(req);
      return host === undefined ? undefined : guard.status(host);
    }, options);
  attachInstruments(guard, {
    telemetry: config.telemetry,
    multiPanel: true,
    hasStore: config.store !== undefined,
    // Panels in memory (at most `max`); an evicted panel is no longer served from memory, nor shown.
    readings: (limit) => selectReadings(running.values(), limit),
    summary: () => summarize(running.values()),
    panels: () => inMemory.values(),
    view: (host) => {
      const panel = host === undefined ? undefined : panelAtHost(host);
      return panel && { snapshot: panel.monitor.entry.snapshot, domains: panel.config.domains };
    },
  });
  guard.on = (event, listener) => {
    events.on(event, listener as (...args: unknown[]) => void);
    return guard;
  };
  guard.off = (event, listener) => {
    events.off(event, listener as (...args: unknown[]) => void);
    return guard;
  };
  return guard;
}

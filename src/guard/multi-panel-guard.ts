// `panels` mode: one guard, any number of panels, each chosen per request by its host. The
// request path of a known host is two cache reads; resolving a new host and its first check are
// the only waits, bounded as at start-up.
import { EventEmitter } from 'node:events';
import type { NextFunction, Request, Response } from 'express';
import { LRUCache } from 'lru-cache';
import { errorCodeOf } from '../errors.js';
import { withPrefix } from '../logger.js';
import { createCheckSpreader } from './check-spreader.js';
import type { GuardConfig } from './guard-options.js';
import { createHostResolver, type Resolution } from './host-resolver.js';
import type { LicenseGuard } from './license-guard.js';
import { wantsJson } from './lock-response.js';
import { PanelRuntime, type Retired } from './panel-runtime.js';
import { requestHost } from './request-host.js';
import { serveVerdict } from './serve-verdict.js';
import { createStatusHandler } from './status-handler.js';
import { attachInstruments } from './telemetry.js';

const UNKNOWN_MESSAGE = 'There is no panel at this address.';
const UNKNOWN_JSON = Buffer.from(`${JSON.stringify({ ok: false, error: 'UNKNOWN_HOST', message: UNKNOWN_MESSAGE })}\n`, 'utf8');
const UNKNOWN_HTML = Buffer.from(
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="robots" content="noindex"><title>Not found</title></head><body><p>${UNKNOWN_MESSAGE}</p></body></html>\n`,
  'utf8',
);

function sendUnknownHost(req: Request, res: Response, config: GuardConfig): void {
  const json = wantsJson(req, config.apiPrefix);
  const body = json ? UNKNOWN_JSON : UNKNOWN_HTML;
  res.status(404);
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Content-Type', json ? 'application/json; charset=utf-8' : 'text/html; charset=utf-8');
  if (!json) res.setHeader('Content-Security-Policy', "default-src 'none'");
  res.setHeader('Content-Length', String(body.byteLength));
  res.end(req.method === 'HEAD' ? undefined : body);
}

export function multiPanelGuard(config: GuardConfig): LicenseGuard {
  const panels = config.panels as NonNullable<GuardConfig['panels']>;
  const events = new EventEmitter();
  let closed = false;
  const report = (error: Error) => {
    if (events.listenerCount('error') > 0) events.emit('error', error);
    else config.logger.warn(withPrefix(error.message), { event: 'resolve_failed', code: errorCodeOf(error) === 'UNKNOWN' ? undefined : errorCodeOf(error) });
  };
  const resolver = createHostResolver({
    resolve: panels.resolve,
    max: panels.max * 4,
    resolveTtlMs: panels.resolveTtlMs,
    unknownTtlMs: panels.unknownTtlMs,
    timeoutMs: panels.resolveTimeoutMs,
    idsOf: panels.idsOf,
    now: config.now,
    onError: report,
  });
  /** Evicted panels' last verdicts: a panel that comes back resumes from it, within its grace. */
  const retired = new LRUCache<string, Retired>({ max: panels.max });
  const running = new LRUCache<string, PanelRuntime>({
    max: panels.max,
    dispose: (panel, key, reason) => {
      const last = reason === 'evict' ? panel.retire() : undefined;
      if (last) retired.set(key, last);
      void panel.close();
    },
  });
  const spreader = createCheckSpreader({
    intervalMs: panels.checkIntervalMs,
    now: config.now,
    count: () => running.size,
    run: (id) => {
      const panel = running.peek(id);
      if (!panel) return;
      // No request for `idleMs`: stop checking until the next one (which checks first if needed).
      if (config.now() - panel.lastRequestAt > panels.idleMs) panel.idle = true;
      else panel.scheduled();
    },
  });

  /**
   * The panel of a known host. A new one checks at once (its first requests wait for it); one
   * evicted before resumes from its last verdict and is checked in its turn under the per-second
   * cap, so eviction churn never bypasses the bound on mother traffic.
   */
  function panelFor(host: string, known: Extract<Resolution, { kind: 'panel' }>): PanelRuntime {
    let panel = running.get(known.runtimeKey);
    if (!panel) {
      panel = new PanelRuntime(config, known.credentials, known.runtimeKey, spreader, events);
      running.set(known.runtimeKey, panel);
      const last = retired.get(known.runtimeKey);
      retired.delete(known.runtimeKey);
      if (last && panel.restore(last)) {
        panel.sync?.resume();
        spreader.scheduleAt(panel.key, config.now());
      } else panel.firstCheck = panel.start();
    }
    followHost(host, known.runtimeKey);
    return panel;
  }

  /**
   * Which runtime each host uses. When a host's answer moves it to another runtime (a rotated
   * secret) and no other host uses the old one, the old one goes at once: otherwise it would
   * keep checking with the old secret, and lock, under the same panel id.
   */
  const runtimeOfHost = new Map<string, string>();
  const hostsOfRuntime = new Map<string, number>();
  function followHost(host: string, key: string): void {
    const previous = runtimeOfHost.get(host);
    if (previous === key) return;
    runtimeOfHost.set(host, key);
    hostsOfRuntime.set(key, (hostsOfRuntime.get(key) ?? 0) + 1);
    if (previous === undefined) return;
    const left = (hostsOfRuntime.get(previous) ?? 1) - 1;
    if (left > 0) hostsOfRuntime.set(previous, left);
    else {
      hostsOfRuntime.delete(previous);
      retired.delete(previous);
      running.delete(previous);
    }
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

  /** `resolved`: the host's resolver call is over; `waited`: so is the wait for the panel's verdict. */
  function handle(req: Request, res: Response, next: NextFunction, resolved: boolean, waited: boolean): void {
    const host = requestHost(req);
    const known = host === undefined ? undefined : resolver.cached(host);
    if (host !== undefined && known === undefined && !resolved && !closed) {
      resolver
        .resolve(host)
        .then(() => handle(req, res, next, true, false))
        .catch(next);
      return;
    }
    // A malformed host never reaches the resolver; an unknown one never causes a mother call.
    if (known?.kind !== 'panel') {
      sendUnknownHost(req, res, config);
      return;
    }
    // After close(): the last verdicts still stand (as in single-panel mode); nothing new starts.
    const panel = closed ? running.peek(known.runtimeKey) : panelFor(host as string, known);
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
      panel.firstCheck = panel.check();
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
    serveVerdict(req, res, next, panel.config, snapshot, panel.hooks);
  }

  const guard = ((req: Request, res: Response, next: NextFunction) => handle(req, res, next, false, false)) as LicenseGuard;
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
    return closed ? running.peek(known.runtimeKey) : panelFor(canonical, known);
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
    resolver.close();
    spreader.close();
    // Runtimes stop checking but keep their last verdict, which requests still get.
    await Promise.all(Array.from(running.values(), (panel) => panel.close()));
  };
  guard.status = ((host?: string) => {
    if (host === undefined) throw new TypeError('panel-license-guard: with `panels`, pass the host: guard.status(host).');
    const canonical = requestHost({ hostname: host } as Request);
    const known = canonical === undefined ? undefined : resolver.cached(canonical);
    return known?.kind === 'panel' ? running.peek(known.runtimeKey)?.status() : undefined;
  }) as LicenseGuard['status'];
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
    readings: () => Array.from(running.values(), (panel) => panel.reading()),
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

// `panels` mode: one guard, any number of panels, each chosen per request by its host. The
// request path of a known host is two cache reads; resolving a new host and its first check are
// the only waits, bounded as at start-up.
import { EventEmitter } from 'node:events';
import type { NextFunction, Request, Response } from 'express';
import { LRUCache } from 'lru-cache';
import { createCheckSpreader } from './check-spreader.js';
import type { GuardConfig } from './guard-options.js';
import { createHostResolver, type Resolution } from './host-resolver.js';
import type { LicenseGuard } from './license-guard.js';
import { wantsJson } from './lock-response.js';
import { PanelRuntime } from './panel-runtime.js';
import { requestHost } from './request-host.js';
import { serveVerdict } from './serve-verdict.js';

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
    else config.logger.warn(error.message);
  };
  const resolver = createHostResolver({
    resolve: panels.resolve,
    max: panels.max * 4,
    resolveTtlMs: panels.resolveTtlMs,
    unknownTtlMs: panels.unknownTtlMs,
    timeoutMs: panels.resolveTimeoutMs,
    idOf: panels.idOf,
    onError: report,
  });
  const running = new LRUCache<string, PanelRuntime>({ max: panels.max, dispose: (panel) => panel.close() });
  const spreader = createCheckSpreader({
    intervalMs: panels.checkIntervalMs,
    now: config.now,
    count: () => running.size,
    run: (id) => {
      const panel = running.peek(id);
      if (!panel) return;
      // No request for `idleMs`: stop checking until the next one (which checks first if needed).
      if (config.now() - panel.lastRequestAt > panels.idleMs) panel.idle = true;
      else void panel.check();
    },
  });

  /** The panel of a known host, started (first check) when new or evicted since. */
  function panelFor(known: Extract<Resolution, { kind: 'panel' }>): PanelRuntime {
    let panel = running.get(known.panelId);
    if (!panel) {
      panel = new PanelRuntime(config, known.credentials, spreader, events);
      running.set(panel.id, panel);
      panel.firstCheck = panel.check();
    }
    return panel;
  }

  /** Waits for a panel's first check, at most `startupTimeoutMs`: a timer, never I/O of its own. */
  function waitFor(check: Promise<void> | undefined): Promise<void> {
    if (!check) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, config.startupTimeoutMs);
      void check.finally(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** `resolved`: the host's resolver call is over; `waited`: so is the wait for the panel's verdict. */
  function handle(req: Request, res: Response, next: NextFunction, resolved: boolean, waited: boolean): void {
    if (closed) {
      next();
      return;
    }
    const host = requestHost(req);
    const known = host === undefined ? undefined : resolver.cached(host);
    if (host !== undefined && known === undefined && !resolved) {
      resolver.resolve(host).then(() => handle(req, res, next, true, false), next);
      return;
    }
    // A malformed host never reaches the resolver; an unknown one never causes a mother call.
    if (known?.kind !== 'panel') {
      sendUnknownHost(req, res, config);
      return;
    }
    const panel = panelFor(known);
    const now = config.now();
    panel.lastRequestAt = now;
    if (panel.idle) {
      // Back after idling: checked again; trusted meanwhile only within its grace.
      panel.idle = false;
      panel.firstCheck = panel.check();
    }
    const { snapshot } = panel.monitor.entry;
    const mustWait = snapshot.state === 'pending' || panel.stale(now);
    if (mustWait && !waited && !config.isAllowed(req)) {
      waitFor(panel.firstCheck).then(() => handle(req, res, next, true, true), next);
      return;
    }
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
    const known = resolver.cached(canonical) ?? (await resolver.resolve(canonical));
    return known.kind === 'panel' ? panelFor(known) : undefined;
  }
  guard.start = async () => 'pending';
  guard.refresh = async (host?: string) => {
    const panel = await panelAt(host);
    if (!panel) return 'pending';
    await panel.check();
    return panel.monitor.entry.state;
  };
  guard.close = async () => {
    closed = true;
    spreader.close();
    running.clear();
  };
  guard.status = ((host?: string) => {
    if (host === undefined) throw new TypeError('panel-license-guard: with `panels`, pass the host: guard.status(host).');
    const canonical = requestHost({ hostname: host } as Request);
    const known = canonical === undefined ? undefined : resolver.cached(canonical);
    return known?.kind === 'panel' ? running.peek(known.panelId)?.status() : undefined;
  }) as LicenseGuard['status'];
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

// licenseConsole(): the operator's pages, mounted in the panel's own app. It reads the guard and
// the outbox through their public API and the package's own instruments (as the metrics do), and
// acts only through them: check now, retry a dead release, retry a panel's dead releases.
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import { ConsoleBusyError } from '../errors.js';
import type { LicenseGuard } from '../guard/guard-api.js';
import { type GuardInstruments, TELEMETRY } from '../guard/telemetry.js';
import { OptionProblems, optionError, optionNames, rejectUnknownOptions } from '../options.js';
import { OUTBOX_TELEMETRY, type OutboxTelemetry } from '../outbox/events.js';
import type { ReleaseOutbox } from '../outbox/outbox.js';
import { isExpressResponse, notExpressError } from '../serve/express-only.js';
import { ConsoleActivity } from './activity.js';
import { onlyOnHosts } from './host-check.js';
import { escapeHtml, type PageContext, page } from './layout.js';
import { type PanelsSource, panelPage, panelsList, panelsQuery, statusOf } from './panels-page.js';
import { releasePage, releasesList, releasesQuery } from './releases-page.js';
import { type Authorize, authorizing, csrfToken, pageHeaders, validAction } from './security.js';
import { MAX_SEARCHES } from './slices.js';

export interface LicenseConsoleOptions {
  /** The guard whose panels the console shows (one panel, or `panels` by host). @default none: no panels pages */
  guard?: LicenseGuard;
  /** The outbox whose releases the console shows and retries. @default none: no releases pages */
  outbox?: ReleaseOutbox;
  /**
   * Required: who may use the console, asked on every request. Return true to let the request in;
   * false answers 401, and 403 answers 403 (a signed-in user who may not). Nothing else is said.
   */
  authorize: Authorize;
  /**
   * The hosts the console answers on (e.g. your platform's own admin host); on any other host it
   * answers 404 before `authorize` is asked. With `panels` by host, set it: the console shows
   * every tenant, so it must not answer on a tenant's own host. Every host a request names must
   * be one of these: its `Host` and each `X-Forwarded-Host` value, whatever `trust proxy` says
   * (behind a proxy that rewrites `Host`, list the name it rewrites to as well). @default every host
   */
  hosts?: string[];
}

/** The console's router; `close()` stops it listening to the guard and the outbox. */
export interface LicenseConsole extends Router {
  close(): void;
}

/** What an action did, said on the page it leads back to (fixed texts: nothing from the URL is shown). */
const NOTICES: Record<string, string> = {
  checked: 'Checked now.',
  retried: 'The release is pending again: the worker sends it at its next poll.',
  'not-dead': 'That release is not dead (any more): nothing to retry.',
  'retried-all': 'Every dead release (of the panel shown, or of every panel) is pending again, but those whose track has a newer release.',
  cancelled: 'Cancelled: this release will never be sent.',
  'cancel-delivered': 'Too late to cancel: the mother accepted this release (withdraw it there).',
  'not-pending': 'That release is not pending (any more): nothing to cancel.',
  paused: 'Delivery paused: every process stops claiming within a second, and a restart stays paused.',
  resumed: 'Delivery resumed.',
};

export function licenseConsole(options: LicenseConsoleOptions): LicenseConsole {
  if (typeof options !== 'object' || options === null)
    throw optionError('options', 'must be an object', 'Pass { guard, outbox, authorize: (req) => req.user?.isAdmin === true }.');
  const problems = new OptionProblems();
  rejectUnknownOptions('licenseConsole', options, optionNames<LicenseConsoleOptions>({ guard: true, outbox: true, authorize: true, hosts: true }), problems);
  const hosts = options.hosts;
  if (
    hosts !== undefined &&
    (!Array.isArray(hosts) || hosts.length === 0 || hosts.some((host) => typeof host !== 'string' || !/^[a-z0-9.-]{1,253}$/i.test(host)))
  )
    problems.add(
      optionError('hosts', 'must be a non-empty list of host names', 'Pass e.g. ["ops.platform.example"], or leave it out to answer on every host.'),
    );
  if (typeof options.authorize !== 'function')
    problems.add(
      optionError('authorize', 'is required: the console shows releases and can retry them', 'Pass e.g. authorize: (req) => req.user?.isAdmin === true.'),
    );
  const instruments = (options.guard as { [TELEMETRY]?: GuardInstruments } | undefined)?.[TELEMETRY];
  if (options.guard !== undefined && instruments === undefined)
    problems.add(optionError('guard', 'is not a guard made by licenseGuard()', 'Pass the guard you mount in the app.'));
  const outboxTelemetry = (options.outbox as { [OUTBOX_TELEMETRY]?: OutboxTelemetry } | undefined)?.[OUTBOX_TELEMETRY];
  if (options.outbox !== undefined && outboxTelemetry === undefined)
    problems.add(optionError('outbox', 'is not an outbox made by createReleaseOutbox()', 'Pass the outbox your upload route enqueues to.'));
  if (options.guard === undefined && options.outbox === undefined)
    problems.add(optionError('guard', 'and `outbox` are both missing: nothing to show', 'Pass at least one of them.'));
  problems.throwIfAny('licenseConsole');

  const { guard, outbox, authorize } = options;
  const activity = new ConsoleActivity(Date.now);
  const stops = [instruments?.telemetry.onCheck((record) => activity.check(record)), outboxTelemetry?.observe((event) => activity.outbox(event))];
  const panels: PanelsSource | undefined = guard && instruments && { guard, instruments, activity };

  const router = express.Router() as LicenseConsole;
  router.use((req, res, next) => {
    if (!isExpressResponse(res)) throw notExpressError('licenseConsole', req, res);
    next();
  });
  if (hosts !== undefined) router.use(onlyOnHosts(hosts));
  router.use(authorizing(authorize));
  router.use(express.urlencoded({ extended: false, limit: '4kb', parameterLimit: 10 }));
  const sections = { panels: panels !== undefined, releases: outbox !== undefined };
  const contextOf = (req: Request, res: Response): PageContext => ({
    base: req.baseUrl,
    csrf: csrfToken(req, res),
    nonce: pageHeaders(res),
    now: Date.now(),
    sections,
  });
  const show = (req: Request, res: Response, title: string, here: 'panels' | 'releases', body: (ctx: PageContext) => string | Promise<string>) => {
    const ctx = contextOf(req, res);
    return Promise.resolve(body(ctx)).then((html) => res.type('html').send(page(ctx, title, here, html)));
  };
  const notice = (req: Request) => {
    const done = String(req.query.done);
    return Object.hasOwn(NOTICES, done) ? NOTICES[done] : undefined;
  };
  const back = (req: Request, res: Response, path: string, done: string) =>
    res.redirect(303, `${req.baseUrl}${path}${path.includes('?') ? '&' : '?'}done=${done}`);
  const refuse = (res: Response) => res.status(403).type('text/plain').send('This action needs the console’s own form (its token was missing or wrong).');
  const busy = (req: Request, res: Response) =>
    show(req, res.status(503).set('Retry-After', '5'), 'Busy', 'releases', () => {
      const what = `${MAX_SEARCHES} title searches are running on this instance already: try again in a few seconds.`;
      return `<h1>Busy</h1><p class="muted">${escapeHtml(what)}</p>`;
    });
  const missing = (req: Request, res: Response, what: string) =>
    show(req, res.status(404), 'Not here', 'panels', () => `<h1>Not here</h1><p class="muted">${escapeHtml(what)}</p>`).then(() => undefined);

  router.get('/', (req, res, next) => {
    if (!panels) return res.redirect(303, `${req.baseUrl}/releases`);
    const reading = readingFor(res);
    show(req, res, 'Panels', 'panels', (ctx) => panelsList(ctx, panels, panelsQuery(req.query), reading.signal)).catch((error: unknown) =>
      reading.signal.aborted ? undefined : next(error),
    );
  });
  router.get('/panels/:panel', (req, res, next) => {
    if (!panels) return void missing(req, res, 'This console shows no guard.').catch(next);
    const panel = String(req.params.panel);
    if (!statusOf(panels, panel)) return void missing(req, res, 'This instance has no such panel in memory.').catch(next);
    show(req, res, `Panel ${panel}`, 'panels', (ctx) => panelPage(ctx, panels, panel, notice(req))).catch(next);
  });
  router.post('/panels/:panel/refresh', (req, res, next) => {
    if (!validAction(req)) return void refuse(res);
    const panel = String(req.params.panel);
    const found = panels && statusOf(panels, panel);
    if (!panels || !found) return void missing(req, res, 'This instance has no such panel in memory.').catch(next);
    const checked = found.host === undefined ? panels.guard.refresh() : panels.guard.refresh(found.host);
    checked.then(() => back(req, res, `/panels/${encodeURIComponent(panel)}`, 'checked'), next);
  });
  router.get('/releases', (req, res, next) => {
    if (!outbox) return void missing(req, res, 'This console shows no outbox.').catch(next);
    const query = releasesQuery(req.query);
    const reading = readingFor(res);
    show(req, res, 'Releases', 'releases', (ctx) => releasesList(ctx, outbox, activity, query, notice(req), reading.signal))
      .then(
        () => undefined,
        async (error: unknown) => {
          if (reading.signal.aborted) return; // nobody waits for the page any more
          if (error instanceof ConsoleBusyError) await busy(req, res);
          else if (unknownPanel(error, query.panel)) await missing(req, res, 'This outbox serves no such panel.');
          else next(error);
        },
      )
      .catch(next);
  });
  router.get('/releases/:id', (req, res, next) => {
    const id = idOf(req.params.id);
    if (!outbox || id === undefined) return void missing(req, res, 'No such release.').catch(next);
    outbox
      .get(id)
      .then((entry) =>
        entry
          ? show(req, res, `Release #${id}`, 'releases', (ctx) => releasePage(ctx, entry, notice(req)))
          : missing(req, res, 'No such release (it may have been pruned).'),
      )
      .catch(next);
  });
  router.post('/releases/retry-dead', (req, res, next) => {
    if (!validAction(req)) return void refuse(res);
    if (!outbox) return void missing(req, res, 'This console shows no outbox.').catch(next);
    const panel = typeof req.body?.panel === 'string' && req.body.panel !== '' ? req.body.panel : undefined;
    const scope = panel === undefined ? undefined : { panel };
    outbox.retryAllDead(scope).then(
      () => back(req, res, `/releases?${new URLSearchParams({ state: 'dead', ...(panel ? { panel } : {}) })}`, 'retried-all'),
      (error: unknown) => (unknownPanel(error, panel) ? missing(req, res, 'This outbox serves no such panel.') : next(error)),
    );
  });
  for (const [path, act] of [
    ['pause', 'pause'],
    ['resume', 'resume'],
  ] as const)
    router.post(`/releases/${path}`, (req, res, next) => {
      if (!validAction(req)) return void refuse(res);
      if (!outbox) return void missing(req, res, 'This console shows no outbox.').catch(next);
      const panel = typeof req.body?.panel === 'string' && req.body.panel !== '' ? req.body.panel : undefined;
      outbox[act](panel === undefined ? {} : { panel }).then(
        () => back(req, res, panel ? `/releases?${new URLSearchParams({ panel })}` : '/releases', act === 'pause' ? 'paused' : 'resumed'),
        (error: unknown) => (unknownPanel(error, panel) ? missing(req, res, 'This outbox serves no such panel.') : next(error)),
      );
    });
  router.post('/releases/:id/cancel', (req, res, next) => {
    if (!validAction(req)) return void refuse(res);
    const id = idOf(req.params.id);
    if (!outbox || id === undefined) return void missing(req, res, 'No such release.').catch(next);
    outbox.cancel(id, { reason: 'cancelled from the console' }).then(({ outcome }) => {
      if (outcome === 'not-found') return missing(req, res, 'No such release.');
      const said = outcome === 'cancelled' ? 'cancelled' : outcome === 'delivered' ? 'cancel-delivered' : 'not-pending';
      return back(req, res, `/releases/${id}`, said);
    }, next);
  });
  router.post('/releases/:id/retry', (req, res, next) => {
    if (!validAction(req)) return void refuse(res);
    const id = idOf(req.params.id);
    if (!outbox || id === undefined) return void missing(req, res, 'No such release.').catch(next);
    outbox.retry(id).then((retried) => back(req, res, `/releases/${id}`, retried ? 'retried' : 'not-dead'), next);
  });
  // Express's own error page shows stacks outside production: the console says only what went wrong.
  router.use((error: unknown, _req: Request, res: Response, next: NextFunction) => {
    // Outside Express (the first middleware's error): the framework's own error handling says it.
    if (!isExpressResponse(res)) return next(error);
    const status = Number((error as { status?: unknown } | null)?.status);
    const known = status >= 400 && status < 500;
    res
      .status(known ? status : 500)
      .type('text/plain')
      .send(known ? 'The console cannot take this request.' : 'The console could not answer this request.');
  });
  router.close = () => {
    for (const stop of stops) stop?.();
  };
  return router;
}

/** Aborted when the response closes before it was sent (the browser went away): its reading stops. */
function readingFor(res: Response): AbortController {
  const reading = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) reading.abort(new Error('panel-license-guard: the console page was closed before it was sent.'));
  });
  return reading;
}

function idOf(text: unknown): number | undefined {
  const id = Number(text);
  return typeof text === 'string' && /^\d{1,15}$/.test(text) && Number.isSafeInteger(id) ? id : undefined;
}

/** The outbox refuses a panel it does not serve with a TypeError (a single panel's outbox, any other id). */
function unknownPanel(error: unknown, panel: string | undefined): boolean {
  return panel !== undefined && error instanceof TypeError;
}

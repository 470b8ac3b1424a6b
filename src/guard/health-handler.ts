// guard.healthHandler(): is this instance up, for a load balancer. Unlike statusHandler() it does
// not depend on the request's host or on any panel's license: a locked panel is this instance
// doing its job. 200 while the guard runs, 503 once it is closed (drain this instance).
import type { RequestHandler } from 'express';
import { OptionProblems, optionError, optionNames, rejectUnknownOptions } from '../options.js';
import type { ReleaseOutbox } from '../outbox/outbox.js';
import type { LicenseState } from '../serve/license-state.js';
import { sendJson } from './status-handler.js';

export interface HealthHandlerOptions {
  /** Adds `outbox: outbox.stats()` to the answer (it does not change the status code). @default undefined */
  outbox?: ReleaseOutbox;
}

/** What the handler answers. */
export interface HealthBody {
  ok: boolean;
  /** Panels in memory on this instance, by state (one in single-panel mode). */
  panels: Record<LicenseState, number> & { total: number };
  /** The shared store (cluster mode): how many panels see it failing; `none` without a store. */
  store: 'ok' | 'unavailable' | 'none';
  outbox?: unknown;
}

export interface HealthSource {
  closed(): boolean;
  /** Each panel in memory: its state and whether its store answers. */
  panels(): Iterable<{ state: LicenseState; store: 'ok' | 'unavailable' | 'none' }>;
}

export function createHealthHandler(source: HealthSource, options: HealthHandlerOptions = {}): RequestHandler {
  if (typeof options !== 'object' || options === null) throw optionError('healthHandler(options)', 'must be an object', 'Pass { outbox }.');
  const problems = new OptionProblems();
  rejectUnknownOptions('healthHandler', options, optionNames<HealthHandlerOptions>({ outbox: true }), problems);
  if (options.outbox !== undefined && typeof options.outbox?.stats !== 'function')
    problems.add(optionError('outbox', 'is not an outbox', 'Pass the value createReleaseOutbox() returned.'));
  problems.throwIfAny('healthHandler');
  const { outbox } = options;

  return function licenseHealth(req, res, next) {
    const panels = { total: 0, active: 0, grace: 0, locked: 0, pending: 0 };
    let store: HealthBody['store'] = 'none';
    for (const panel of source.panels()) {
      panels.total++;
      panels[panel.state]++;
      if (panel.store === 'unavailable') store = 'unavailable';
      else if (panel.store === 'ok' && store === 'none') store = 'ok';
    }
    const ok = !source.closed();
    const body: HealthBody = { ok, panels, store };
    if (!outbox) return sendJson(req, res, ok ? 200 : 503, body);
    outbox
      .stats()
      .then(
        (stats) => sendJson(req, res, ok ? 200 : 503, { ...body, outbox: stats }),
        () => sendJson(req, res, ok ? 200 : 503, { ...body, outbox: { error: 'unavailable' } }),
      )
      .catch(next);
  };
}

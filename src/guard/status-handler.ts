// guard.statusHandler(): the guard's status as JSON for health checks and operator pages —
// 200 while the panel serves (active, grace), 503 while it does not (locked, pending).
import type { Request, RequestHandler, Response } from 'express';
import { OptionProblems, optionError, optionNames, rejectUnknownOptions } from '../options.js';
import type { OutboxStats, ReleaseOutbox } from '../outbox/outbox.js';
import type { LicenseStatus } from './license-status.js';

export interface StatusHandlerOptions {
  /** Adds `outbox: outbox.stats()` to the answer (it does not change the status code). @default undefined */
  outbox?: ReleaseOutbox;
  /**
   * Shows the mother's `reason` for a lock. It often concerns the operator's billing, so it is
   * left out unless the endpoint is only reachable by operators. @default false
   */
  reason?: boolean;
}

/** What the endpoint answers: `status()` without the reason unless asked, and whether the panel serves. */
export type StatusBody = Omit<LicenseStatus, 'reason'> & {
  serving: boolean;
  reason?: string | null;
  outbox?: (Omit<OutboxStats, 'pausedUntil' | 'oldestPendingAt'> & { pausedUntil: number | null; oldestPendingAt: number | null }) | { error: 'unavailable' };
};

export function createStatusHandler(statusOf: (req: Request) => LicenseStatus | undefined, options: StatusHandlerOptions = {}): RequestHandler {
  if (typeof options !== 'object' || options === null) throw optionError('statusHandler(options)', 'must be an object', 'Pass { outbox, reason }.');
  const problems = new OptionProblems();
  rejectUnknownOptions('statusHandler', options, optionNames<StatusHandlerOptions>({ outbox: true, reason: true }), problems);
  if (options.outbox !== undefined && typeof options.outbox?.stats !== 'function')
    problems.add(optionError('outbox', 'is not an outbox', 'Pass the value createReleaseOutbox() returned.'));
  if (options.reason !== undefined && typeof options.reason !== 'boolean') problems.add(optionError('reason', 'must be true or false', 'Pass reason: true.'));
  problems.throwIfAny('statusHandler');
  const { outbox, reason: showReason = false } = options;

  return function licenseStatus(req, res, next) {
    const status = statusOf(req);
    if (status === undefined) {
      sendJson(req, res, 404, { ok: false, error: 'UNKNOWN_HOST', message: 'There is no panel at this address.' });
      return;
    }
    const { reason, ...rest } = status;
    const serving = status.state === 'active' || status.state === 'grace';
    const body: StatusBody = { serving, ...rest, ...(showReason ? { reason } : {}) };
    if (!outbox) {
      sendJson(req, res, serving ? 200 : 503, body);
      return;
    }
    outbox
      .stats()
      .then(
        (stats) =>
          sendJson(req, res, serving ? 200 : 503, {
            ...body,
            outbox: { ...stats, pausedUntil: stats.pausedUntil ?? null, oldestPendingAt: stats.oldestPendingAt ?? null },
          }),
        () => sendJson(req, res, serving ? 200 : 503, { ...body, outbox: { error: 'unavailable' } }),
      )
      .catch(next);
  };
}

/** Sends `body` as JSON, never cached; no body for HEAD. */
export function sendJson(req: Request, res: Response, code: number, body: unknown): void {
  const bytes = Buffer.from(`${JSON.stringify(body)}\n`, 'utf8');
  res.status(code);
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', String(bytes.byteLength));
  res.end(req.method === 'HEAD' ? undefined : bytes);
}

// Fault switches of the mother emulator: outages, slowness, broken bodies, skewed clocks.
import type { Response } from 'express';
import type { EmulatorFaults } from './state.js';

const HTML_PAGE = (title: string) => `<!doctype html><html><head><title>${title}</title></head><body><h1>${title}</h1></body></html>`;

/**
 * Answers with the configured failure, if any applies to this endpoint. Returns true when the
 * response has been handled.
 */
export function applyFailureFault(res: Response, faults: EmulatorFaults, endpoint: string): boolean {
  if (faults.endpoint && faults.endpoint !== endpoint) return false;
  if (faults.retryAfterSeconds !== undefined) res.setHeader('Retry-After', String(faults.retryAfterSeconds));
  if (faults.redirectTo) {
    res.redirect(302, faults.redirectTo);
    return true;
  }
  if (faults.down) {
    res.status(503).type('html').send(HTML_PAGE('503 Service Unavailable'));
    return true;
  }
  if (faults.htmlError) {
    res.status(500).type('html').send(HTML_PAGE('500 Internal Server Error'));
    return true;
  }
  if (faults.status !== undefined) {
    res.status(faults.status).json({ ok: false, error: `Injected failure (HTTP ${faults.status}).` });
    return true;
  }
  res.removeHeader('Retry-After');
  return false;
}

/** Sends a successful JSON answer, truncated if that fault is on. */
export function sendJson(res: Response, faults: EmulatorFaults, endpoint: string, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  const truncate = faults.truncateJson && (!faults.endpoint || faults.endpoint === endpoint);
  res
    .status(status)
    .type('json')
    .send(truncate ? text.slice(0, Math.floor(text.length / 2)) : text);
}

export function appliesDelay(faults: EmulatorFaults, endpoint: string): number {
  if (faults.endpoint && faults.endpoint !== endpoint) return 0;
  return faults.delayMs ?? 0;
}

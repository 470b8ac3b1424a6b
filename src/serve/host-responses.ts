// What `panels` mode answers for a host it cannot serve: unknown (404, kept by nobody) or, for a
// new host over the bound on resolver calls, busy (503 with Retry-After: never a 404 that a
// crawler would keep). Both bodies are made once.
import type { Request, Response } from 'express';
import { wantsJson } from './lock-response.js';
import type { ServeConfig } from './serve-config.js';

interface FixedAnswer {
  status: number;
  json: Buffer;
  html: Buffer;
}

function fixedAnswer(status: number, error: string, title: string, message: string): FixedAnswer {
  return {
    status,
    json: Buffer.from(`${JSON.stringify({ ok: false, error, message })}\n`, 'utf8'),
    html: Buffer.from(
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="robots" content="noindex"><title>${title}</title></head><body><p>${message}</p></body></html>\n`,
      'utf8',
    ),
  };
}

const UNKNOWN = fixedAnswer(404, 'UNKNOWN_HOST', 'Not found', 'There is no panel at this address.');
const BUSY = fixedAnswer(503, 'RESOLVER_BUSY', 'Try again shortly', 'This address is being set up; try again in a moment.');

function send(req: Request, res: Response, config: ServeConfig, answer: FixedAnswer): void {
  const json = wantsJson(req, config.apiPrefix);
  const body = json ? answer.json : answer.html;
  res.status(answer.status);
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Content-Type', json ? 'application/json; charset=utf-8' : 'text/html; charset=utf-8');
  if (!json) res.setHeader('Content-Security-Policy', "default-src 'none'");
  res.setHeader('Content-Length', String(body.byteLength));
  res.end(req.method === 'HEAD' ? undefined : body);
}

/** A host with no panel (the resolver said null, failed, or gave unusable credentials): 404. */
export function sendUnknownHost(req: Request, res: Response, config: ServeConfig): void {
  send(req, res, config, UNKNOWN);
}

/** A new host over the process-wide bound on resolver calls: 503, worth trying again in `retryAfterSeconds`. */
export function sendBusyHost(req: Request, res: Response, config: ServeConfig, retryAfterSeconds: number): void {
  res.setHeader('Retry-After', String(retryAfterSeconds));
  send(req, res, config, BUSY);
}

// The guard and the console are Express middleware. Mounted elsewhere — Fastify (through
// @fastify/express or @fastify/middie), Nest's Fastify adapter, Koa, Hono — they would get a bare
// Node response (or a context and a `next`) and fail deep inside with a TypeError on every
// request. Instead the first request throws one error that says what is missing and what to do.
import type { Response } from 'express';

/** Whether `res` is an Express response: Express gives every one `locals`, and `status()` on its prototype. */
export const isExpressResponse = (res: unknown): res is Response =>
  typeof res === 'object' && res !== null && typeof (res as Partial<Response>).locals === 'object' && typeof (res as Partial<Response>).status === 'function';

/** What a non-Express framework handed over, in words. */
function received(req: unknown, res: unknown): string {
  if (typeof res === 'function') return 'a context and a `next` function (Koa, Hono or another `(ctx, next)` framework)';
  if (typeof res !== 'object' || res === null) return `a response that is ${res === null ? 'null' : typeof res}`;
  const raw = typeof (res as { writeHead?: unknown }).writeHead === 'function';
  const fastify = typeof (req as { raw?: unknown } | null)?.raw === 'object';
  if (fastify) return "Fastify's request and reply";
  return raw
    ? "Node's bare http response, without Express's `res.locals` and `res.status()` (Fastify through @fastify/express or @fastify/middie, Nest's Fastify adapter, or plain http.createServer)"
    : 'a response without `res.locals`';
}

/** The error for `what` (licenseGuard, licenseConsole) mounted outside Express. */
export function notExpressError(what: 'licenseGuard' | 'licenseConsole', req: unknown, res: unknown): TypeError {
  return new TypeError(
    `panel-license-guard: ${what}() is Express middleware (req, res, next), and got ${received(req, res)}. ` +
      'Mount it in an Express 4.21+/5 app — with NestJS, on its default Express adapter (docs/nestjs.md). ' +
      'On Fastify, Koa or Hono, run the guard in an Express app in front, or see docs/guard.md ("Other frameworks").',
  );
}

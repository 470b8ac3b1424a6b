// Serves a lock response: HTML page, host view, JSON for API clients, headers only for HEAD.

import type { NextFunction, Request, Response } from 'express';
import { LRUCache } from 'lru-cache';
import { describeError } from '../logger.js';
import { resolvedPath, underPrefix } from './allow-list.js';
import type { ServeConfig } from './serve-config.js';
import type { GuardSnapshot, LockBodies } from './snapshot.js';

const acceptPrefersJson = new LRUCache<string, boolean>({ max: 64 });

export function wantsJson(req: Request, apiPrefix: string | undefined): boolean {
  // Only picks the response format, so the lenient resolution is fine here (`//api/x` is API).
  if (apiPrefix !== undefined && underPrefix(resolvedPath(req.originalUrl), apiPrefix)) return true;
  if (req.xhr) return true;
  const accept = req.headers.accept;
  if (accept === undefined) return false;
  // Negotiation re-parses the header each time; clients send a handful of distinct Accept
  // strings, so the answer per string is remembered (a pure function of the header).
  let json = acceptPrefersJson.get(accept);
  if (json === undefined) {
    json = req.accepts(['html', 'json']) === 'json';
    if (accept.length <= 512) acceptPrefersJson.set(accept, json);
  }
  return json;
}

function renderView(req: Request, config: ServeConfig, snapshot: GuardSnapshot, lock: LockBodies): Promise<string> {
  if (lock.renderedView !== undefined) return Promise.resolve(lock.renderedView);
  // app.render uses app.locals plus what we pass, never per-request res.locals, so the
  // result is the same for every request of this verdict and can be reused.
  const locals = {
    branding: snapshot.branding,
    license: snapshot.license,
    message: lock.message,
    supportContact: config.supportContact ?? null,
    reason: lock.reason,
    retryAfterSeconds: config.retryAfterSeconds,
  };
  return new Promise((resolve, reject) => {
    req.app.render(config.lockView as string, locals, (error: Error | null, html?: string) => {
      if (error || html === undefined) reject(error ?? new Error('lockView rendered nothing'));
      else {
        lock.renderedView = html;
        resolve(html);
      }
    });
  });
}

export function sendLockResponse(req: Request, res: Response, next: NextFunction, config: ServeConfig, snapshot: GuardSnapshot): void {
  const lock = snapshot.lock;
  if (!lock) {
    next();
    return;
  }
  res.status(config.lockStatus);
  res.setHeader('Retry-After', String(config.retryAfterSeconds));
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('X-License-Status', snapshot.state);
  res.setHeader('Vary', 'Accept');
  const json = wantsJson(req, config.apiPrefix);
  res.setHeader('Content-Type', json ? 'application/json; charset=utf-8' : 'text/html; charset=utf-8');
  if (json) {
    res.setHeader('Content-Length', String(lock.jsonBytes.byteLength));
    res.end(req.method === 'HEAD' ? undefined : lock.jsonBytes);
    return;
  }
  if (config.lockView === undefined || lock.viewFailed) {
    sendBuiltInPage(req, res, lock);
    return;
  }
  renderView(req, config, snapshot, lock).then(
    (html) => {
      const bytes = Buffer.from(html, 'utf8');
      res.setHeader('Content-Length', String(bytes.byteLength));
      res.end(req.method === 'HEAD' ? undefined : bytes);
    },
    (error: unknown) => {
      // The host's view is user code: if it fails, people still get a lock page (never the
      // protected content, never an error page), and the failure is logged once per verdict.
      if (!lock.viewFailed)
        config.logger.error(`panel-license-guard: lockView '${config.lockView}' failed to render; serving the built-in lock page: ${describeError(error)}`, {
          event: 'lock_view_failed',
          panel: config.panelKey || undefined,
        });
      lock.viewFailed = true;
      sendBuiltInPage(req, res, lock);
    },
  );
}

function sendBuiltInPage(req: Request, res: Response, lock: LockBodies): void {
  res.setHeader('Content-Security-Policy', lock.csp);
  res.setHeader('Content-Length', String(lock.htmlBytes.byteLength));
  res.end(req.method === 'HEAD' ? undefined : lock.htmlBytes);
}

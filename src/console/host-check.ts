// Which hosts a request to the console names, and whether all of them are the console's own. The
// console does not take Express's `req.hostname`: with `trust proxy` set too broadly that is the
// client's own `X-Forwarded-Host`, and a request for a tenant's host could name the ops host.
import type { NextFunction, Request, Response } from 'express';
import { canonicalHost } from '../serve/request-host.js';

/** `host[:port]` or `[v6]:port` without its port; undefined when it is not a host. */
function withoutPort(value: string): string | undefined {
  const trimmed = value.trim();
  const bracket = trimmed.startsWith('[') ? trimmed.indexOf(']') : -1;
  const name = bracket > 0 ? trimmed.slice(0, bracket + 1) : trimmed.replace(/:\d{1,5}$/, '');
  return canonicalHost(name);
}

/**
 * Every host the request names: its `Host` header and each `X-Forwarded-Host` value (a proxy
 * may append a client's own to its list). Undefined when one of them is not a host, or when the
 * request has no `Host` at all.
 */
export function namedHosts(req: Request): string[] | undefined {
  const host = req.headers.host;
  if (typeof host !== 'string' || host === '') return undefined;
  const forwarded = req.headers['x-forwarded-host'];
  const values = [host, ...(forwarded === undefined ? [] : String(forwarded).split(','))];
  const hosts: string[] = [];
  for (const value of values) {
    const canonical = withoutPort(value);
    if (canonical === undefined) return undefined;
    hosts.push(canonical);
  }
  return hosts;
}

/** Answers 404 (before `authorize` is asked) unless every host the request names is in `hosts`. */
export function onlyOnHosts(hosts: readonly string[]) {
  const allowed = new Set(hosts.map((host) => canonicalHost(host) ?? host.toLowerCase()));
  return (req: Request, res: Response, next: NextFunction) => {
    const named = namedHosts(req);
    if (named?.every((host) => allowed.has(host))) return next();
    res.status(404).type('text/plain').send('Not Found');
  };
}

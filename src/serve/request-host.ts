// The host a request was made for, as one canonical spelling, or undefined when it is not a host.
import type { Request } from 'express';

const LABELS = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;
const IPV4 = /^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;
const IPV6 = /^\[[0-9a-f:.]{2,45}\]$/;

/**
 * Lower-cased, one trailing dot dropped (`Panel.Example.` is `panel.example`); a DNS name, an IPv4
 * address or a bracketed IPv6 literal. Anything else (spaces, `_`, `@`, empty labels, a port) is
 * not a host: undefined.
 */
export function canonicalHost(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  // The very string given when it is lower case already (a panel's host is kept, not a copy).
  const lower = value.toLowerCase();
  let host = lower === value ? value : lower;
  if (host.endsWith('.') && !host.endsWith('..')) host = host.slice(0, -1);
  if (IPV4.test(host) || IPV6.test(host)) return host;
  // A dotted name whose last label is all digits is a malformed address, not a name.
  return LABELS.test(host) && !/(?:^|\.)\d+$/.test(host) ? host : undefined;
}

/**
 * The host of `req` without its port. Express decides where it comes from: the `Host` header, or
 * `X-Forwarded-Host` only when the app's `trust proxy` setting trusts the peer that sent it.
 */
export function requestHost(req: Request): string | undefined {
  const raw = req.hostname;
  // 253 characters of name, or an IPv6 literal: anything longer is not a host (and is not kept).
  if (typeof raw !== 'string' || raw.length > MAX_HOST_LENGTH) return undefined;
  // A few spellings of a few hosts arrive over and over: valid ones are parsed once each
  // (bounded, then reset); invalid ones are parsed each time and never kept.
  const known = seen.get(raw);
  if (known !== undefined) return known;
  const host = canonicalHost(raw);
  if (host !== undefined) {
    if (seen.size >= MAX_SEEN) seen.clear();
    seen.set(raw, host);
  }
  return host;
}

/**
 * A string that names the request's host as `req.hostname` would, without Express's getter (which
 * reads the app's settings and two headers): the `Host` header as sent, port included, when no
 * `X-Forwarded-Host` is present (Express then uses `Host` whatever `trust proxy` says), else
 * `req.hostname` itself. Two requests with the same key have the same `req.hostname`; `panels`
 * mode keys its routes by it.
 *
 * It reads `req.rawHeaders`, not `req.headers`: Node builds the headers object on first access,
 * and a key read per request should not be what pays for that (the app builds it when it needs it).
 */
export function hostKey(req: Request): string | undefined {
  const raw = req.rawHeaders;
  // A request made up in code (a test double) may have headers and no raw ones.
  if (raw === undefined) return keyFromHeaders(req);
  let host: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    if (name.length === 4) {
      // Node keeps the first of repeated Host headers; so does this.
      if (host === undefined && (name === 'Host' || name === 'host' || name.toLowerCase() === 'host')) host = raw[i + 1];
    } else if (name.length === 16 && name.toLowerCase() === 'x-forwarded-host') return keyFromHeaders(req);
  }
  return host;
}

/** `hostKey` where an `X-Forwarded-Host` was sent: decided from `req.headers`, as Express does. */
function keyFromHeaders(req: Request): string | undefined {
  const { headers } = req;
  const forwarded = headers['x-forwarded-host'];
  const key = forwarded === undefined || forwarded === '' ? headers.host : req.hostname;
  return typeof key === 'string' ? key : undefined;
}

const MAX_HOST_LENGTH = 254;

const MAX_SEEN = 10_000;
const seen = new Map<string, string>();

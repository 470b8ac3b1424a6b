// Paths served while locked. Matching works on the raw path the router sees, at segment boundaries only.
import type { IncomingMessage } from 'node:http';
import { optionError } from '../options.js';

/** A path prefix such as `/healthz`, or a predicate over the request. */
export type AllowRule = string | ((req: IncomingMessage & { path?: string }) => boolean);

export type AllowMatcher = (req: IncomingMessage & { path?: string; originalUrl?: string }) => boolean;

/**
 * The raw path of a request (never decoded), if it is canonical: absolute, no `.`/`..` or empty
 * segments, no backslash, and no encoded `/`, `.`, `\` or NUL. Returns null otherwise.
 *
 * Express routes on the raw path: `app.use('/static', …)` does not match `/%73tatic/x`, and
 * `/admin/../healthz` reaches the admin router. So the guard compares exactly what the router
 * compares: a prefix `/static` allows a request only when its raw path starts with the bytes
 * `/static` at a segment boundary. Percent-decoding here (as an earlier version did) let
 * `/%73tatic/dashboard` pass the guard and fall through to `/:lang/dashboard`.
 */
export function canonicalPath(rawUrl: string): string | null {
  const pathname = rawUrl.split('?', 1)[0] ?? '';
  if (!pathname.startsWith('/') || /%(?:2f|2e|5c|00)/i.test(pathname) || /[\\\0]/.test(pathname)) return null;
  const segments = pathname.split('/').slice(1);
  // A trailing slash (`/healthz/`) is the one empty segment allowed.
  for (const [index, segment] of segments.entries()) {
    if (segment === '.' || segment === '..' || (segment === '' && index !== segments.length - 1)) return null;
  }
  return pathname;
}

/** Decodes and resolves dot and empty segments; for presentation choices only, never for access. */
export function resolvedPath(rawUrl: string): string {
  let pathname = rawUrl.split('?', 1)[0] ?? '';
  try {
    pathname = decodeURIComponent(pathname);
  } catch {
    // keep it raw
  }
  const segments: string[] = [];
  for (const segment of pathname.split('/')) {
    if (segment === '..') segments.pop();
    else if (segment !== '' && segment !== '.') segments.push(segment);
  }
  return `/${segments.join('/')}`;
}

/** Segment-bounded prefix match: `/healthz` matches `/healthz` and `/healthz/x`, never `/healthzz`. */
export function underPrefix(path: string, prefix: string): boolean {
  return path === prefix || path.startsWith(`${prefix}/`);
}

// Characters a raw path carries unencoded (RFC 3986 pchar without `%`): a prefix with anything
// else could never equal a raw path, so it is refused rather than silently never matching.
const RAW_PREFIX = /^(?:\/[A-Za-z0-9\-._~!$&'()*+,;=:@]+)+$/;

function validatePrefix(prefix: string): string {
  const trimmed = prefix.replace(/\/+$/, '');
  if (!RAW_PREFIX.test(trimmed) || canonicalPath(trimmed) !== trimmed) {
    throw optionError(
      'allow',
      `has an invalid path prefix ${JSON.stringify(prefix)}`,
      'Use absolute, unencoded, already-normalized prefixes such as "/healthz" or "/static".',
    );
  }
  return trimmed;
}

/**
 * Builds the allow matcher. A predicate that throws counts as "not allowed" (the safe side) and
 * is reported through `onPredicateError`, so user code can never open the panel or escape.
 */
export function createAllowMatcher(rules: AllowRule | readonly AllowRule[] | undefined, onPredicateError: (error: unknown) => void = () => {}): AllowMatcher {
  const list = rules === undefined ? [] : Array.isArray(rules) ? rules : [rules];
  const prefixes: string[] = [];
  const predicates: Exclude<AllowRule, string>[] = [];
  for (const rule of list as AllowRule[]) {
    if (typeof rule === 'string') prefixes.push(validatePrefix(rule));
    else if (typeof rule === 'function') predicates.push(rule);
    else throw optionError('allow', `must hold path prefixes or predicates, received ${typeof rule}`, 'Pass e.g. ["/healthz", "/static"] or (req) => boolean.');
  }
  if (prefixes.length === 0 && predicates.length === 0) return () => false;
  const predicateAllows = (req: Parameters<AllowMatcher>[0], predicate: Exclude<AllowRule, string>): boolean => {
    try {
      return predicate(req) === true;
    } catch (error) {
      onPredicateError(error);
      return false;
    }
  };
  return (req) => {
    // originalUrl: a guard mounted under a sub-path must still judge the full path.
    const path = canonicalPath(req.originalUrl ?? req.url ?? '/');
    // Case-sensitive although Express routes case-insensitively: `/STATIC/x` is locked, which
    // over-locks (the safe side) and never lets a request reach a mount it does not match.
    if (path !== null && prefixes.some((prefix) => underPrefix(path, prefix))) return true;
    return predicates.some((predicate) => predicateAllows(req, predicate));
  };
}

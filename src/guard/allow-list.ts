// Paths served while locked. Matching works on the normalized path, at segment boundaries only.
import type { IncomingMessage } from 'node:http';
import { optionError } from '../options.js';

/** A path prefix such as `/healthz`, or a predicate over the request. */
export type AllowRule = string | ((req: IncomingMessage & { path?: string }) => boolean);

export type AllowMatcher = (req: IncomingMessage & { path?: string; originalUrl?: string }) => boolean;

/**
 * The path a request names, decoded once, if it is canonical: no `.`/`..` or empty segments and
 * no encoded `/`, `.` or `\`. Express routes on the raw path, so a path such as
 * `/admin/../healthz` reaches the admin router even though it "normalizes" to `/healthz`: only a
 * path that means the same thing raw and normalized may be allowed. Returns null otherwise.
 */
export function canonicalPath(rawUrl: string): string | null {
  const pathname = rawUrl.split('?', 1)[0] ?? '';
  if (!pathname.startsWith('/') || /%(?:2f|2e|5c|00)/i.test(pathname)) return null;
  let decoded: string;
  try {
    decoded = decodeURIComponent(pathname);
  } catch {
    return null;
  }
  if (decoded.includes('\\') || decoded.includes('\0')) return null;
  const segments = decoded.split('/').slice(1);
  // A trailing slash (`/healthz/`) is the one empty segment allowed.
  for (const [index, segment] of segments.entries()) {
    if (segment === '.' || segment === '..' || (segment === '' && index !== segments.length - 1)) return null;
  }
  return decoded;
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

function validatePrefix(prefix: string): string {
  const trimmed = prefix.replace(/\/+$/, '');
  if (!prefix.startsWith('/') || trimmed === '' || canonicalPath(trimmed) !== trimmed || /[%?#]/.test(trimmed)) {
    throw optionError('allow', `has an invalid path prefix "${prefix}"`, 'Use absolute, already-normalized prefixes such as "/healthz" or "/static".');
  }
  return trimmed;
}

export function createAllowMatcher(rules: AllowRule | readonly AllowRule[] | undefined): AllowMatcher {
  const list = rules === undefined ? [] : Array.isArray(rules) ? rules : [rules];
  const prefixes: string[] = [];
  const predicates: Exclude<AllowRule, string>[] = [];
  for (const rule of list as AllowRule[]) {
    if (typeof rule === 'string') prefixes.push(validatePrefix(rule));
    else if (typeof rule === 'function') predicates.push(rule);
    else throw optionError('allow', `must hold path prefixes or predicates, received ${typeof rule}`, 'Pass e.g. ["/healthz", "/static"] or (req) => boolean.');
  }
  if (prefixes.length === 0 && predicates.length === 0) return () => false;
  return (req) => {
    // originalUrl: a guard mounted under a sub-path must still judge the full path.
    const path = canonicalPath(req.originalUrl ?? req.url ?? '/');
    // Case-sensitive like the file system behind a static handler; over-locking is the safe side.
    if (path !== null && prefixes.some((prefix) => underPrefix(path, prefix))) return true;
    return predicates.some((predicate) => predicate(req));
  };
}

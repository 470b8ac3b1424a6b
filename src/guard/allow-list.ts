// Paths served while locked. Matching works on the normalized path, at segment boundaries only.
import type { IncomingMessage } from 'node:http';
import { optionError } from '../options.js';

/** A path prefix such as `/healthz`, or a predicate over the request. */
export type AllowRule = string | ((req: IncomingMessage & { path?: string }) => boolean);

export type AllowMatcher = (req: IncomingMessage & { path?: string; originalUrl?: string }) => boolean;

/**
 * Decodes once and resolves `.`/`..` and empty segments, as a file server or proxy behind us
 * might. Returns null for what no legitimate client sends (bad escapes, NUL, backslashes).
 */
export function normalizePath(rawUrl: string): string | null {
  const pathname = rawUrl.split('?', 1)[0] ?? '';
  let decoded: string;
  try {
    decoded = decodeURIComponent(pathname);
  } catch {
    return null;
  }
  if (decoded.includes('\0') || decoded.includes('\\') || !decoded.startsWith('/')) return null;
  const segments: string[] = [];
  for (const segment of decoded.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') segments.pop();
    else segments.push(segment);
  }
  return `/${segments.join('/')}`;
}

function validatePrefix(prefix: string): string {
  const trimmed = prefix.replace(/\/+$/, '');
  if (!prefix.startsWith('/') || trimmed === '' || normalizePath(trimmed) !== trimmed) {
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
    const path = normalizePath(req.originalUrl ?? req.url ?? '/');
    if (path !== null) {
      for (const prefix of prefixes) {
        // Case-sensitive, segment-bounded: `/healthz` allows `/healthz` and `/healthz/x`, never `/healthzz`.
        if (path === prefix || path.startsWith(`${prefix}/`)) return true;
      }
    }
    return predicates.some((predicate) => predicate(req));
  };
}

// Paths served while locked. Matching works on the raw path the router sees, at segment boundaries only.
import type { IncomingMessage } from 'node:http';
import { OptionProblems, optionError } from '../options.js';

/** A path (`/healthz`), everything under a path (`/static/*`), or a predicate over the request. */
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

// Characters a raw path carries unencoded (RFC 3986 pchar without `%`): a rule with anything
// else could never equal a raw path, so it is refused rather than silently never matching.
const RAW_PATH = /^(?:\/[A-Za-z0-9\-._~!$&'()*+,;=:@]+)+$/;

/** A string rule: one path (`/healthz`), or everything under one (`/static/*`), for some methods. */
interface PathRule {
  path: string;
  subtree: boolean;
  /** Upper-case methods, or null for any method (`* /path`). */
  methods: readonly string[] | null;
}

// Reads are allowed by default; a path that takes writes while locked must say so (`POST /hook`),
// so that a POST cannot fall through an allowed path into a catch-all route.
const DEFAULT_METHODS = ['GET', 'HEAD'];
const METHOD_RULE = /^([A-Z]+(?:,[A-Z]+)*|\*) (.*)$/;

function parsePathRule(text: string): PathRule {
  const withMethod = METHOD_RULE.exec(text);
  const methods = withMethod ? (withMethod[1] === '*' ? null : (withMethod[1] ?? '').split(',')) : DEFAULT_METHODS;
  const rule = withMethod ? (withMethod[2] ?? '') : text;
  const subtree = rule.endsWith('/*');
  const path = subtree ? rule.slice(0, -2) : rule;
  if (!subtree && rule.length > 1 && rule.endsWith('/')) {
    const bare = rule.replace(/\/+$/, '');
    throw optionError('allow', `has an ambiguous rule ${JSON.stringify(text)}`, `Write "${bare}" for that path only, or "${bare}/*" for everything under it.`);
  }
  if (!RAW_PATH.test(path) || path.includes('*') || canonicalPath(path) !== path) {
    throw optionError(
      'allow',
      `has an invalid path rule ${JSON.stringify(text)}`,
      'Use absolute, unencoded, already-normalized paths such as "/healthz", "/static/*" for everything under /static, or "POST /hooks/pay" for other methods.',
    );
  }
  return { path, subtree, methods };
}

/**
 * `/healthz` allows `/healthz` and `/healthz/` only: an allowed path must not open the routes
 * that happen to sit below it (`/healthz/dashboard` reaching `/:section/dashboard`, or a
 * catch-all). `/static/*` allows everything under `/static`, whichever handler answers it.
 */
function matchesRule(method: string, path: string, rule: PathRule): boolean {
  if (rule.methods !== null && !rule.methods.includes(method)) return false;
  if (path === rule.path || path === `${rule.path}/`) return true;
  return rule.subtree && path.startsWith(`${rule.path}/`);
}

/**
 * Builds the allow matcher. A predicate that throws counts as "not allowed" (the safe side) and
 * is reported through `onPredicateError`, so user code can never open the panel or escape.
 */
export function createAllowMatcher(rules: AllowRule | readonly AllowRule[] | undefined, onPredicateError: (error: unknown) => void = () => {}): AllowMatcher {
  const list = rules === undefined ? [] : Array.isArray(rules) ? rules : [rules];
  const paths: PathRule[] = [];
  const predicates: Exclude<AllowRule, string>[] = [];
  // Every bad rule is reported, not just the first (licenseGuard lists them all in one error).
  const problems = new OptionProblems();
  for (const rule of list as AllowRule[]) {
    if (typeof rule === 'string') {
      const parsed = problems.check(() => parsePathRule(rule), undefined);
      if (parsed) paths.push(parsed);
    } else if (typeof rule === 'function') predicates.push(rule);
    else
      problems.add(optionError('allow', `must hold paths or predicates, received ${typeof rule}`, 'Pass e.g. ["/healthz", "/static/*"] or (req) => boolean.'));
  }
  problems.throwIfAny('licenseGuard');
  if (paths.length === 0 && predicates.length === 0) return () => false;
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
    const method = req.method ?? 'GET';
    if (path !== null && paths.some((rule) => matchesRule(method, path, rule))) return true;
    return predicates.some((predicate) => predicateAllows(req, predicate));
  };
}

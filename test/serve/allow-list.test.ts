import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { canonicalPath, createAllowMatcher, resolvedPath } from '../../src/serve/allow-list.js';

const req = (url: string, method = 'GET') => ({ url, originalUrl: url, method }) as unknown as IncomingMessage & { originalUrl: string };

describe('createAllowMatcher()', () => {
  const allowed = createAllowMatcher(['/healthz', '/static/*']);

  it('allows a path exactly and a /* rule with what is below it', () => {
    for (const url of [
      '/healthz',
      '/healthz/',
      '/healthz?full=1',
      '/static/app.css',
      '/static/img/logo.svg',
      '/static/my%20logo.svg',
      '/static/%C3%A9t%C3%A9.png',
    ]) {
      expect(allowed(req(url)), url).toBe(true);
    }
  });

  it('cannot be bypassed and does not over-match', () => {
    for (const url of [
      '/Admin',
      '/admin/',
      '//admin',
      '/%61dmin',
      '/healthz/../admin',
      '/healthz/..%2fadmin',
      '/healthz%2f..%2fadmin',
      '/healthzz',
      '/HEALTHZ',
      '/staticx/a',
      '/%zz',
      '/healthz\\..\\admin',
      '/',
      // Express routes on the raw path: these reach /admin or /dash handlers, not /healthz.
      '/admin/../healthz',
      '/admin/%2e%2e/healthz',
      '/admin/..%2Fhealthz',
      '/dash/%2e%2e/healthz',
      '/static/../static/a.css',
      '//healthz',
      '/./healthz',
      // Express does not route these to the /healthz or /static mounts (it matches the raw path).
      '/%68ealthz',
      '/%68ealthz/x/y/z',
      '/%73tatic/dashboard',
      '/%2573tatic/dashboard',
      '/st%61tic/app.css',
      '/st%41tic/app.css',
      '/%73%74%61%74%69%63/a',
      '/STATIC/app.css',
      'http://host/healthz',
      // An exact rule does not open what sits below it (parameter routes, catch-alls).
      '/healthz/dashboard',
      '/healthz/x/y/z',
      '/healthz/;/dashboard',
    ]) {
      expect(allowed(req(url)), url).toBe(false);
    }
  });

  it('allows reads by default and other methods only when a rule names them', () => {
    expect(allowed(req('/healthz', 'HEAD'))).toBe(true);
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) expect(allowed(req('/healthz', method)), method).toBe(false);
    const hooks = createAllowMatcher(['POST /hooks/pay', 'GET,POST /api/ping', '* /public/*']);
    expect(hooks(req('/hooks/pay', 'POST'))).toBe(true);
    expect(hooks(req('/hooks/pay', 'GET'))).toBe(false);
    expect(hooks(req('/api/ping', 'POST'))).toBe(true);
    expect(hooks(req('/api/ping', 'DELETE'))).toBe(false);
    expect(hooks(req('/public/a/b', 'DELETE'))).toBe(true);
    expect(() => createAllowMatcher(['post /x'])).toThrow(/invalid path rule "post \/x"/);
  });

  it('accepts predicates', () => {
    const matcher = createAllowMatcher([(r) => r.url === '/special']);
    expect(matcher(req('/special'))).toBe(true);
    expect(matcher(req('/other'))).toBe(false);
  });

  it('treats a throwing predicate as "not allowed" and reports it', () => {
    const errors: unknown[] = [];
    const matcher = createAllowMatcher(
      [
        () => {
          throw new Error('boom');
        },
      ],
      (error) => errors.push(error),
    );
    expect(matcher(req('/x'))).toBe(false);
    expect(errors).toHaveLength(1);
  });

  it('refuses prefixes a raw path can never carry', () => {
    for (const bad of ['healthz', '/a b', '/%73tatic', '/a/../b', '/caf\u00e9', '/a?b', '//a', '/*', '/a/*/b', '/a*']) {
      expect(() => createAllowMatcher([bad]), bad).toThrow(/`allow` has an invalid path rule/);
    }
    expect(() => createAllowMatcher(['/ok', '/static/', 5 as never, 'healthz'])).toThrow(
      /received 3 invalid options:\n {2}1\. `allow` has an ambiguous rule "\/static\/".*\n {2}2\. `allow` must hold paths or predicates, received number.*\n {2}3\. `allow` has an invalid path rule "healthz"/,
    );
    expect(() => createAllowMatcher(['/static/'])).toThrow(/ambiguous rule "\/static\/". Write "\/static" for that path only, or "\/static\/\*"/);
  });
});

describe('canonicalPath()', () => {
  it('keeps the raw path and refuses dot segments, empty segments and encoded separators', () => {
    expect(canonicalPath('/static/my%20logo.svg?x=1')).toBe('/static/my%20logo.svg');
    expect(canonicalPath('/healthz/')).toBe('/healthz/');
    for (const bad of ['/a/./b', '/a/../b', '/a//b', '/%2e%2e/etc', '/a%2fb', '/%00', 'relative', '/a\\b']) expect(canonicalPath(bad), bad).toBeNull();
  });
});

describe('resolvedPath()', () => {
  it('resolves dot and empty segments (format choice only)', () => {
    expect(resolvedPath('//api/./x/../y?z')).toBe('/api/y');
  });
});

import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { canonicalPath, createAllowMatcher, resolvedPath } from '../src/guard/allow-list.js';

const req = (url: string) => ({ url, originalUrl: url }) as unknown as IncomingMessage & { originalUrl: string };

describe('createAllowMatcher()', () => {
  const allowed = createAllowMatcher(['/healthz', '/static/']);

  it('allows the prefixes and what is below them', () => {
    for (const url of ['/healthz', '/healthz/', '/healthz?full=1', '/static/app.css', '/static/img/logo.svg', '/static/my%20logo.svg']) {
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
    ]) {
      expect(allowed(req(url)), url).toBe(false);
    }
  });

  it('accepts predicates', () => {
    const matcher = createAllowMatcher([(r) => r.url === '/special']);
    expect(matcher(req('/special'))).toBe(true);
    expect(matcher(req('/other'))).toBe(false);
  });
});

describe('canonicalPath()', () => {
  it('decodes once and refuses dot segments, empty segments and encoded separators', () => {
    expect(canonicalPath('/static/my%20logo.svg?x=1')).toBe('/static/my logo.svg');
    expect(canonicalPath('/healthz/')).toBe('/healthz/');
    for (const bad of ['/a/./b', '/a/../b', '/a//b', '/%2e%2e/etc', '/a%2fb', '/%00', '/%zz', 'relative']) expect(canonicalPath(bad), bad).toBeNull();
  });
});

describe('resolvedPath()', () => {
  it('resolves dot and empty segments (format choice only)', () => {
    expect(resolvedPath('//api/./x/../y?z')).toBe('/api/y');
  });
});

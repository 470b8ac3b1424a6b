import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { createAllowMatcher, normalizePath } from '../src/guard/allow-list.js';

const req = (url: string) => ({ url, originalUrl: url }) as unknown as IncomingMessage & { originalUrl: string };

describe('createAllowMatcher()', () => {
  const allowed = createAllowMatcher(['/healthz', '/static/']);

  it('allows the prefixes and what is below them', () => {
    for (const url of ['/healthz', '/healthz/', '/healthz?full=1', '/static/app.css', '/static/img/logo.svg', '/static/../static/a.css']) {
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

describe('normalizePath()', () => {
  it('decodes once and resolves dot segments', () => {
    expect(normalizePath('/a/./b/../c//d?x=1')).toBe('/a/c/d');
    expect(normalizePath('/%2e%2e/etc')).toBe('/etc');
    expect(normalizePath('/%00')).toBeNull();
  });
});

import { describe, expect, it } from 'vitest';
import {
  AuthenticationError,
  HttpStatusError,
  InvalidReleaseError,
  MalformedResponseError,
  MethodNotAllowedError,
  NetworkError,
  RedirectRefusedError,
  ResponseTooLargeError,
  ServerValidationError,
  TimeoutError,
} from '../../src/errors.js';
import { asError, classifyFailure } from '../../src/outbox/worker/failure.js';

describe('classifyFailure()', () => {
  const cases: [string, unknown, ReturnType<typeof classifyFailure>][] = [
    ['a network error', new NetworkError('ECONNREFUSED'), { action: 'retry', retryAfterMs: undefined }],
    ['a timeout', new TimeoutError(100), { action: 'retry', retryAfterMs: undefined }],
    ['a 408', new HttpStatusError(408, 'x'), { action: 'retry', retryAfterMs: undefined }],
    ['a 429 with Retry-After', new HttpStatusError(429, 'x', 3000), { action: 'retry', retryAfterMs: 3000 }],
    ['a 503', new HttpStatusError(503, 'x'), { action: 'retry', retryAfterMs: undefined }],
    ['a malformed 502 answer', new MalformedResponseError('x', 502), { action: 'retry', retryAfterMs: undefined }],
    ['an oversized 500 answer', new ResponseTooLargeError(10, 500), { action: 'retry', retryAfterMs: undefined }],
    // A 2xx means the mother stored the release: resending it would duplicate it.
    ['a malformed 2xx answer', new MalformedResponseError('x', 200), { action: 'accepted' }],
    ['an oversized 201 answer', new ResponseTooLargeError(10, 201), { action: 'accepted' }],
    ['a 401', new AuthenticationError('x'), { action: 'auth' }],
    ['a 422', new ServerValidationError('Missing release title.'), { action: 'dead' }],
    ['a 405', new MethodNotAllowedError('x'), { action: 'dead' }],
    ['a 400', new HttpStatusError(400, 'x'), { action: 'dead' }],
    ['a 404', new HttpStatusError(404, 'x'), { action: 'dead' }],
    ['a redirect', new RedirectRefusedError(302), { action: 'dead' }],
    ['a local validation error', new InvalidReleaseError('title', 'Missing release title.'), { action: 'dead' }],
    ['an error of a custom client, by code', Object.assign(new Error('x'), { code: 'AUTH_REJECTED' }), { action: 'auth' }],
    ['an unknown error', new TypeError('boom'), { action: 'retry', retryAfterMs: undefined }],
    ['a thrown string', 'boom', { action: 'retry', retryAfterMs: undefined }],
  ];
  for (const [what, error, expected] of cases) {
    it(`classifies ${what}`, () => {
      expect(classifyFailure(error)).toEqual(expected);
    });
  }
});

describe('asError()', () => {
  it('keeps errors and wraps anything else', () => {
    const error = new Error('x');
    expect(asError(error)).toBe(error);
    expect(asError('boom').message).toBe('boom');
    expect(asError(42).message).toMatch(/42/);
  });
});

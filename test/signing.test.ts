import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { signRequest, verifySignature } from '../src/signing.js';

// Golden vectors computed outside the code with:
//   printf '%s' 'pk_live_demo|1700000000|<body>' | openssl dgst -sha256 -hmac 'sk_test_secret'
const apiKey = 'pk_live_demo';
const apiSecret = 'sk_test_secret';
const timestamp = 1700000000;
const GOLDEN: [string, string, string][] = [
  ['the empty body', '', 'b838027ff0d3bd5fd302a222818f367a5ae0a045001f5fa5cdf4491e9d1eeb57'],
  ['an ASCII JSON body', '{"release":{"title":"Hello"}}', 'f3f5eb4b4bea9bf7e0edef309bc9b477bee6a427977da7daedc6915524953752'],
  ['a non-ASCII body', '{"release":{"title":"Café 🎵"}}', '0b5db481eb62a32a72bb8b9fa6883e2147ad601ba3b8339c379f9b100b85e78b'],
  ['whitespace-significant JSON', '{ "release" : { "title" : "Hello" } }', 'bdab1a910e575665e38833c648f1177a24352e892b33155bfb51adc316c7bc7f'],
];

describe('signRequest()', () => {
  for (const [what, body, expected] of GOLDEN) {
    it(`matches openssl for ${what}`, () => {
      const headers = signRequest({ apiKey, apiSecret, body, timestamp });
      expect(headers).toEqual({ 'X-Api-Key': apiKey, 'X-Timestamp': '1700000000', 'X-Signature': expected });
      expect(signRequest({ apiKey, apiSecret, body: Buffer.from(body, 'utf8'), timestamp })['X-Signature']).toBe(expected);
    });
  }

  it('signs the empty string when no body is given', () => {
    expect(signRequest({ apiKey, apiSecret, timestamp })['X-Signature']).toBe(GOLDEN[0]?.[2]);
  });

  describe('with bad credentials', () => {
    it('rejects an empty key or secret, naming the option', () => {
      expect(() => signRequest({ apiKey: '', apiSecret, timestamp })).toThrow(/`apiKey` must be a non-empty string/);
      expect(() => signRequest({ apiKey, apiSecret: '', timestamp })).toThrow(/`apiSecret` must be a non-empty string/);
    });
    it('rejects a key containing | or whitespace', () => {
      expect(() => signRequest({ apiKey: 'a|b', apiSecret, timestamp })).toThrow(/`apiKey` must not contain `\|` or whitespace/);
      expect(() => signRequest({ apiKey: 'key\n', apiSecret, timestamp })).toThrow(TypeError);
    });
    it('rejects a timestamp that is not whole seconds', () => {
      expect(() => signRequest({ apiKey, apiSecret, timestamp: 1.5 })).toThrow(/`timestamp` must be whole Unix seconds/);
      expect(() => signRequest({ apiKey, apiSecret, timestamp: Date.now() * 1000 * 1000 })).toThrow(TypeError);
    });
  });
});

describe('verifySignature()', () => {
  const sign = (body: string, ts = timestamp) => signRequest({ apiKey, apiSecret, body, timestamp: ts })['X-Signature'];

  it('accepts a signature made by signRequest within the window', () => {
    expect(verifySignature({ apiKey, apiSecret, body: 'x', timestamp: '1700000000', signature: sign('x'), now: timestamp + 299 })).toEqual({ ok: true });
    expect(verifySignature({ apiKey, apiSecret, body: 'x', timestamp: '1700000000', signature: sign('x'), now: timestamp - 300 })).toEqual({ ok: true });
  });

  it('rejects a stale timestamp in either direction', () => {
    const signature = sign('');
    expect(verifySignature({ apiKey, apiSecret, timestamp: '1700000000', signature, now: timestamp + 301 })).toEqual({ ok: false, reason: 'stale_timestamp' });
    expect(verifySignature({ apiKey, apiSecret, timestamp: '1700000000', signature, now: timestamp - 301 })).toEqual({ ok: false, reason: 'stale_timestamp' });
    expect(verifySignature({ apiKey, apiSecret, timestamp: '1700000000', signature, now: timestamp + 30, windowSeconds: 10 }).ok).toBe(false);
  });

  it('accepts only digits as a timestamp', () => {
    for (const bad of ['1700000000.0', '-1', ' 1700000000', '1e9', '', undefined, '0x10']) {
      expect(verifySignature({ apiKey, apiSecret, timestamp: bad, signature: sign(''), now: timestamp })).toEqual({ ok: false, reason: 'bad_timestamp' });
    }
  });

  it('never throws on garbage input', () => {
    const garbage = [undefined, '', 'zz', 'a'.repeat(10_000), '💥'];
    for (const signature of garbage) {
      expect(verifySignature({ apiKey, apiSecret, timestamp: '1700000000', signature, now: timestamp }).ok).toBe(false);
    }
    expect(verifySignature({ apiKey, apiSecret: '', timestamp: '1700000000', signature: sign(''), now: timestamp }).ok).toBe(false);
  });

  it('fails when any byte of body, key or timestamp changes (property)', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 1, maxLength: 64 }),
        fc.nat(),
        fc.integer({ min: 1, max: 255 }),
        fc.constantFrom('body', 'key', 'timestamp'),
        (body, index, flip, part) => {
          const ts = String(timestamp);
          const signature = signRequest({ apiKey, apiSecret, body, timestamp })['X-Signature'];
          const tampered = Uint8Array.from(body);
          let key = apiKey;
          let stamp = ts;
          if (part === 'body') tampered[index % body.length] = (tampered[index % body.length] ?? 0) ^ flip;
          if (part === 'key')
            key = `${apiKey.slice(0, index % apiKey.length)}${String.fromCharCode(apiKey.charCodeAt(index % apiKey.length) ^ (flip & 0x1f || 1))}${apiKey.slice((index % apiKey.length) + 1)}`;
          if (part === 'timestamp') stamp = String(timestamp + 1 + (index % 100));
          const result = verifySignature({ apiKey: key, apiSecret, body: tampered, timestamp: stamp, signature, now: timestamp });
          expect(result.ok).toBe(false);
        },
      ),
      { numRuns: 500 },
    );
  });
});

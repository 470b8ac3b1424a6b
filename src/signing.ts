// Request signing of the partner API: HMAC-SHA256 over `apiKey|timestamp|rawBody`, hex encoded.
import { createHmac, createSecretKey, type KeyObject, timingSafeEqual } from 'node:crypto';

/** The three authentication headers of the partner API (docs/partner-api.md). */
export type SignedHeaders = {
  'X-Api-Key': string;
  'X-Timestamp': string;
  'X-Signature': string;
};

export interface SignRequestInput {
  /** The panel's API key, sent in `X-Api-Key`. */
  apiKey: string;
  /** The panel's API secret; the HMAC key, never sent. */
  apiSecret: string;
  /**
   * The raw body exactly as it will be sent. A string is signed as its UTF-8 bytes.
   * @default '' (the license check has an empty body)
   */
  body?: string | Uint8Array;
  /** Whole Unix seconds, sent in `X-Timestamp`. */
  timestamp: number;
}

/**
 * Throws a TypeError naming the option when a credential cannot produce a valid request.
 * A `|` or whitespace in the key would make the signed message ambiguous or the header invalid.
 */
export function assertCredentials(apiKey: unknown, apiSecret: unknown): void {
  assertApiKey(apiKey);
  assertApiSecret(apiSecret);
}

export function assertApiKey(apiKey: unknown): void {
  if (typeof apiKey !== 'string' || apiKey.length === 0) {
    throw new TypeError('panel-license-guard: `apiKey` must be a non-empty string. Pass the API key the mother platform issued to this panel.');
  }
  if (/[|\s]/.test(apiKey)) {
    throw new TypeError('panel-license-guard: `apiKey` must not contain `|` or whitespace. Check for a stray newline or a pasted key/secret pair.');
  }
}

export function assertApiSecret(apiSecret: unknown): void {
  if (typeof apiSecret !== 'string' || apiSecret.length === 0) {
    throw new TypeError('panel-license-guard: `apiSecret` must be a non-empty string. Pass the API secret the mother platform issued to this panel.');
  }
}

function assertTimestamp(timestamp: unknown): asserts timestamp is number {
  if (typeof timestamp !== 'number' || !Number.isSafeInteger(timestamp) || timestamp < 0) {
    throw new TypeError('panel-license-guard: `timestamp` must be whole Unix seconds (a non-negative integer). Use Math.floor(Date.now() / 1000).');
  }
}

/** Computes the lower-case hex HMAC-SHA256 of `apiKey|timestamp|body` with the secret as key. */
export function computeSignature(apiKey: string, apiSecret: string | KeyObject, timestamp: number | string, body: string | Uint8Array = ''): string {
  const hmac = createHmac('sha256', apiSecret);
  return hmac.update(`${apiKey}|${timestamp}|`).update(body).digest('hex');
}

/** Returns the `X-Api-Key`, `X-Timestamp` and `X-Signature` headers for one request. */
// The last credentials that passed assertCredentials(): a client signs every request with the
// same pair, so re-running the checks per request would be pure overhead on the signing path.
// The secret is kept as a KeyObject too, so each signature skips re-encoding the key string.
let checkedKey: string | undefined;
let checkedSecret: string | undefined;
let secretKey: KeyObject | undefined;

export function signRequest(input: SignRequestInput): SignedHeaders {
  const { apiKey, apiSecret, body = '', timestamp } = input;
  if (apiKey !== checkedKey || apiSecret !== checkedSecret) {
    assertCredentials(apiKey, apiSecret);
    // Build the key first: the cache only ever names a pair whose KeyObject exists.
    const key = createSecretKey(Buffer.from(apiSecret, 'utf8'));
    secretKey = key;
    checkedKey = apiKey;
    checkedSecret = apiSecret;
  }
  assertTimestamp(timestamp);
  const stamp = String(timestamp);
  return { 'X-Api-Key': apiKey, 'X-Timestamp': stamp, 'X-Signature': computeSignature(apiKey, secretKey ?? apiSecret, stamp, body) };
}

export interface VerifySignatureInput {
  apiKey: string;
  apiSecret: string;
  /** The raw body bytes as received. @default '' */
  body?: string | Uint8Array;
  /** The `X-Timestamp` header as received. */
  timestamp: string | undefined;
  /** The `X-Signature` header as received. */
  signature: string | undefined;
  /** Seconds a timestamp may differ from `now`, in either direction. @default 300 */
  windowSeconds?: number;
  /** The verifier's clock, in whole Unix seconds. @default Math.floor(Date.now() / 1000) */
  now?: number;
}

export type VerifyResult = { ok: true } | { ok: false; reason: 'bad_timestamp' | 'stale_timestamp' | 'bad_signature' };

/**
 * Checks a request's signature in constant time. Never throws on bad input: anything
 * malformed is simply not valid. Only digits are accepted as a timestamp.
 */
export function verifySignature(input: VerifySignatureInput): VerifyResult {
  const { apiKey, apiSecret, body = '', timestamp, signature, windowSeconds = 300 } = input;
  const now = input.now ?? Math.floor(Date.now() / 1000);
  if (typeof timestamp !== 'string' || !/^\d{1,15}$/.test(timestamp)) return { ok: false, reason: 'bad_timestamp' };
  if (Math.abs(now - Number(timestamp)) > windowSeconds) return { ok: false, reason: 'stale_timestamp' };
  if (typeof signature !== 'string' || typeof apiKey !== 'string' || typeof apiSecret !== 'string' || apiSecret === '') {
    return { ok: false, reason: 'bad_signature' };
  }
  const expected = Buffer.from(computeSignature(apiKey, apiSecret, timestamp, body), 'utf8');
  const given = Buffer.from(signature.toLowerCase(), 'utf8');
  if (given.length !== expected.length) return { ok: false, reason: 'bad_signature' };
  return timingSafeEqual(given, expected) ? { ok: true } : { ok: false, reason: 'bad_signature' };
}

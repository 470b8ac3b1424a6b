// Where and how a mother is called: its endpoints, time limits and fetch. Everything in it is the
// same for every panel at that mother, so `panels` mode builds it once per base URL and each
// panel's client holds only its key, secret and clock offset.
import { performance } from 'node:perf_hooks';
import { TimeoutError } from '../errors.js';
import { endpointUrl, type OptionProblems, optionalFunction, optionError, parseBaseUrl, positiveInteger, timerMs } from '../options.js';
import { signRequest } from '../signing.js';
import type { SkewClock } from './clock.js';
import { type FetchLike, postOnce, type RawResponse } from './http.js';

/** The options of a mother client that are not the panel's own (its key and secret). */
export interface MotherEndpointOptions {
  baseUrl: string;
  timeoutMs?: number | undefined;
  maxResponseBytes?: number | undefined;
  allowInsecureHttp?: boolean | undefined;
  fetch?: FetchLike | undefined;
  now?: (() => number) | undefined;
}

export interface MotherEndpoint {
  /** The normalised base address (no credentials in it). */
  readonly baseUrl: string;
  readonly licenseUrl: string;
  readonly releaseUrl: string;
  readonly timeoutMs: number;
  readonly maxResponseBytes: number;
  readonly fetch: FetchLike;
  readonly now: () => number;
}

const EMPTY = new Uint8Array(0);
const USER_AGENT = 'panel-license-guard/1';
const globalFetch: FetchLike = (url, init) => globalThis.fetch(url, init);

/** Validates the endpoint options into `problems` (each message names its option). */
export function resolveEndpoint(options: MotherEndpointOptions, problems: OptionProblems): MotherEndpoint {
  problems.check(() => {
    if (options.allowInsecureHttp !== undefined && typeof options.allowInsecureHttp !== 'boolean')
      throw optionError('allowInsecureHttp', `must be true or false, received ${JSON.stringify(options.allowInsecureHttp)}`, 'Leave it out to require https.');
  }, undefined);
  const base = problems.check(() => parseBaseUrl(options.baseUrl, options.allowInsecureHttp === true), new URL('https://invalid.invalid/'));
  return {
    baseUrl: base.toString(),
    licenseUrl: endpointUrl(base, 'license.php'),
    releaseUrl: endpointUrl(base, 'release.php'),
    timeoutMs: problems.check(() => timerMs('timeoutMs', options.timeoutMs, 10_000), 10_000),
    maxResponseBytes: problems.check(() => positiveInteger('maxResponseBytes', options.maxResponseBytes, 1024 * 1024), 0),
    fetch: problems.check(() => optionalFunction<FetchLike>('fetch', options.fetch), undefined) ?? globalFetch,
    now: problems.check(() => optionalFunction<() => number>('now', options.now), undefined) ?? Date.now,
  };
}

export interface SignedCall {
  endpoint: MotherEndpoint;
  apiKey: string;
  apiSecret: string;
  clock: SkewClock;
  url: string;
  body: string;
  signal: AbortSignal | undefined;
}

/**
 * Signs and sends; on a 401 whose Date shows our clock far off, corrects it and retries once.
 * Both attempts share one `timeoutMs` budget (measured on the monotonic clock), so a call never
 * outlives `timeoutMs`: the outbox relies on that to keep every push inside its lease. Resolves
 * with any answer that is not a corrected-and-retried 401; the caller judges the status.
 */
export async function sendSigned({ endpoint, apiKey, apiSecret, clock, url, body, signal }: SignedCall): Promise<RawResponse> {
  const bytes = body === '' ? EMPTY : Buffer.from(body, 'utf8');
  const deadline = performance.now() + endpoint.timeoutMs;
  for (let attempt = 0; ; attempt++) {
    const budgetMs = Math.ceil(deadline - performance.now());
    if (budgetMs <= 0) throw new TimeoutError(endpoint.timeoutMs);
    const headers: Record<string, string> = {
      ...signRequest({ apiKey, apiSecret, body: bytes, timestamp: clock.nowSeconds() }),
      Accept: 'application/json',
      'User-Agent': USER_AGENT,
    };
    if (bytes.byteLength > 0) headers['Content-Type'] = 'application/json';
    const raw = await postOnce({
      fetch: endpoint.fetch,
      url,
      headers,
      body: bytes,
      timeoutMs: budgetMs,
      timeoutLabelMs: endpoint.timeoutMs,
      maxResponseBytes: endpoint.maxResponseBytes,
      nowMs: endpoint.now,
      signal,
    });
    if (raw.status === 401 && attempt === 0 && clock.fromDateHeader(raw.headers.get('date'), raw.sentAtMs, raw.receivedAtMs)) continue;
    return raw;
  }
}

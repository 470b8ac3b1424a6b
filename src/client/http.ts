// One signed POST to the mother: no redirects, a hard timeout, a size-capped body read.
import { MotherError, NetworkError, RedirectRefusedError, ResponseTooLargeError, TimeoutError } from '../errors.js';

export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

export interface RawResponse {
  status: number;
  headers: Headers;
  text: string;
  sentAtMs: number;
  receivedAtMs: number;
}

export interface PostOptions {
  fetch: FetchLike;
  url: string;
  headers: Record<string, string>;
  /** Exact bytes to send; the same bytes were signed. */
  body: Uint8Array;
  timeoutMs: number;
  /** The timeout to name in errors: the whole call's, when this request got only what was left of it. */
  timeoutLabelMs?: number;
  maxResponseBytes: number;
  nowMs: () => number;
  /** Aborts the request from outside (e.g. a guard being closed). */
  signal?: AbortSignal | undefined;
}

async function readCapped(response: Response, limit: number, status: number): Promise<string> {
  const declared = Number(response.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > limit) {
    await response.body?.cancel().catch(() => {});
    throw new ResponseTooLargeError(limit, status);
  }
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      throw new ResponseTooLargeError(limit, status);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Sends one POST and returns the raw answer. Throws only MotherError subclasses. */
export async function postOnce(options: PostOptions): Promise<RawResponse> {
  const { timeoutMs } = options;
  const label = options.timeoutLabelMs ?? timeoutMs;
  const controller = new AbortController();
  // The timer covers the whole exchange, body read included: a mother that trickles bytes
  // forever is as dead as one that never answers.
  const timer = setTimeout(() => controller.abort(new TimeoutError(label)), timeoutMs);
  const abortFromOutside = () => controller.abort(new NetworkError('The request was aborted by the caller.'));
  if (options.signal?.aborted) abortFromOutside();
  options.signal?.addEventListener('abort', abortFromOutside, { once: true });
  const sentAtMs = options.nowMs();
  // Known once the status line is in: an error while reading the body then keeps it, since a
  // 2xx means the mother accepted the request even if we never read its answer.
  let status: number | undefined;
  try {
    const response = await options.fetch(options.url, {
      method: 'POST',
      headers: options.headers,
      body: options.body,
      // Never follow: fetch would replay X-Api-Key and X-Signature to wherever Location points.
      // 'manual' rather than 'error' so the 3xx becomes a RedirectRefusedError with its status
      // instead of an opaque "fetch failed".
      redirect: 'manual',
      signal: controller.signal,
    });
    status = response.status;
    if (response.status >= 300 && response.status < 400) {
      await response.body?.cancel().catch(() => {});
      throw new RedirectRefusedError(response.status, options.url);
    }
    const text = await readCapped(response, options.maxResponseBytes, response.status);
    return { status: response.status, headers: response.headers, text, sentAtMs, receivedAtMs: options.nowMs() };
  } catch (error) {
    // Our own timer aborted the body read: say that the status line had arrived.
    if (error instanceof TimeoutError && error.status === undefined && status !== undefined) throw new TimeoutError(label, undefined, status);
    if (error instanceof MotherError) throw error;
    if (controller.signal.aborted && !options.signal?.aborted) throw new TimeoutError(label, error, status);
    const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
    const detail = cause instanceof Error ? cause.message : String(cause);
    const what = status === undefined ? 'Could not reach the mother' : `The connection broke while reading the mother's HTTP ${status} answer`;
    throw new NetworkError(`${what}: ${detail}`, error, status);
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', abortFromOutside);
  }
}

/** Parses a `Retry-After` header (seconds or an HTTP date) into milliseconds, capped at a day. */
export function parseRetryAfter(value: string | null, nowMs: number): number | undefined {
  if (!value) return undefined;
  const trimmed = value.trim();
  let ms: number;
  if (/^\d+$/.test(trimmed)) ms = Number(trimmed) * 1000;
  else {
    const date = Date.parse(trimmed);
    if (!Number.isFinite(date)) return undefined;
    ms = Math.max(0, date - nowMs);
  }
  return Math.min(ms, 24 * 60 * 60 * 1000);
}

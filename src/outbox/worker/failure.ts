// Decides what a failed push means for its row (retry with backoff, retry slowly for credentials, or give up), and reports the worker's errors.
import { describeError } from '../../logger.js';
import type { OutboxEmitter } from '../events.js';
import type { ClaimedRow } from '../store.js';
import { createTroubleReporter } from '../trouble.js';

export type FailureAction =
  /** The mother answered 2xx but its body was unusable: it accepted the release; never resend. */
  | { action: 'accepted' }
  /** The same bytes may succeed later: outage, timeout, 408/425/429/5xx, a malformed answer. */
  | { action: 'retry'; retryAfterMs: number | undefined }
  /** 401: our key, secret or clock is wrong. Nothing is wrong with the release, so it is never dropped. */
  | { action: 'auth' }
  /** The mother (or a proxy) refused these bytes for good; resending them unchanged cannot help. */
  | { action: 'dead' };

// Codes of errors.ts. Read from `code` rather than `instanceof`, so errors thrown by a custom
// client, or by a second copy of this package, are classified the same way.
const SLOW_RETRY_CODES = new Set(['AUTH_REJECTED']);
const DEAD_CODES = new Set(['VALIDATION_FAILED', 'METHOD_NOT_ALLOWED', 'REDIRECT_REFUSED', 'INVALID_RELEASE']);

interface ErrorFacts {
  code?: unknown;
  status?: unknown;
  retryable?: unknown;
  retryAfterMs?: unknown;
}

/**
 * Classifies what `pushSerializedRelease` threw. Anything unrecognised is retried: dropping a
 * release because of an error we do not understand would be the one unrecoverable mistake.
 */
export function classifyFailure(error: unknown): FailureAction {
  const facts: ErrorFacts = typeof error === 'object' && error !== null ? (error as ErrorFacts) : {};
  const code = typeof facts.code === 'string' ? facts.code : undefined;
  // A 2xx means the mother stored it, whatever the body looked like: resending would duplicate.
  if (typeof facts.status === 'number' && facts.status >= 200 && facts.status < 300) return { action: 'accepted' };
  if (code !== undefined && SLOW_RETRY_CODES.has(code)) return { action: 'auth' };
  if (code !== undefined && DEAD_CODES.has(code)) return { action: 'dead' };
  // Any other refusal the client marks final (400, 404, 413…): the request itself is wrong.
  if (facts.retryable === false) return { action: 'dead' };
  const retryAfterMs = typeof facts.retryAfterMs === 'number' && facts.retryAfterMs > 0 ? facts.retryAfterMs : undefined;
  return { action: 'retry', retryAfterMs };
}

/** The error as an Error, so events and `last_error` always carry a message. */
export function asError(error: unknown): Error {
  if (error instanceof Error) return error;
  return new Error(typeof error === 'string' ? error : `Non-error thrown: ${describeError(error)}`);
}

/** While claims keep failing, how often the same trouble is reported again. */
const STORE_TROUBLE_REPEAT_MS = 60_000;

/** A store that is down fails every poll: said once, then at most once a minute. */
export function storeTroubleReporter(events: OutboxEmitter, now: () => number) {
  return createTroubleReporter(STORE_TROUBLE_REPEAT_MS, now, (error) => reportError(events, error, undefined));
}

/** An error of the worker's, to the outbox's 'error' listeners, naming the row it concerns. */
export function reportError(events: OutboxEmitter, error: unknown, row: ClaimedRow | undefined): void {
  events.emit('error', { error: asError(error), id: row?.id, panel: row?.panel, remoteTrackId: row?.remoteTrackId });
}

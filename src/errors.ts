// One error class per failure kind, each with a stable `code` and a `retryable` flag (after ky).

export type MotherErrorCode =
  | 'AUTH_REJECTED'
  | 'METHOD_NOT_ALLOWED'
  | 'VALIDATION_FAILED'
  | 'HTTP_STATUS'
  | 'REDIRECT_REFUSED'
  | 'TIMEOUT'
  | 'NETWORK'
  | 'MALFORMED_RESPONSE'
  | 'RESPONSE_TOO_LARGE';

/** Base class of every failure talking to the mother. Messages never contain credentials. */
export class MotherError extends Error {
  override name = 'MotherError';
  readonly code: MotherErrorCode;
  /** True when the same request may succeed later unchanged (outage, timeout, bad gateway…). */
  readonly retryable: boolean;
  /** HTTP status of the response, when there was one. */
  readonly status: number | undefined;
  /** Delay the mother asked for through `Retry-After`, in milliseconds. */
  readonly retryAfterMs: number | undefined;

  constructor(code: MotherErrorCode, message: string, opts: { retryable: boolean; status?: number; retryAfterMs?: number; cause?: unknown }) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.code = code;
    this.retryable = opts.retryable;
    this.status = opts.status;
    this.retryAfterMs = opts.retryAfterMs;
  }
}

/** 401: bad or missing key or signature, or a stale timestamp. */
export class AuthenticationError extends MotherError {
  override name = 'AuthenticationError';
  constructor(message: string, status = 401) {
    super('AUTH_REJECTED', message, { retryable: false, status });
  }
}

/** 405: the mother wants another method (a proxy in between rewrote the request). */
export class MethodNotAllowedError extends MotherError {
  override name = 'MethodNotAllowedError';
  constructor(message: string) {
    super('METHOD_NOT_ALLOWED', message, { retryable: false, status: 405 });
  }
}

/** 422: the mother refused the payload; `serverMessage` is its `error` text. */
export class ServerValidationError extends MotherError {
  override name = 'ServerValidationError';
  readonly serverMessage: string;
  constructor(serverMessage: string) {
    super('VALIDATION_FAILED', `The mother rejected the request: ${serverMessage}`, { retryable: false, status: 422 });
    this.serverMessage = serverMessage;
  }
}

/** Any other non-2xx status. 408, 425, 429 and 5xx are retryable. */
export class HttpStatusError extends MotherError {
  override name = 'HttpStatusError';
  constructor(status: number, message: string, retryAfterMs?: number) {
    const retryable = status === 408 || status === 425 || status === 429 || status >= 500;
    super('HTTP_STATUS', message, retryAfterMs === undefined ? { retryable, status } : { retryable, status, retryAfterMs });
  }
}

/** A 3xx answer. Never followed: fetch would forward the signed headers to the new host. */
export class RedirectRefusedError extends MotherError {
  override name = 'RedirectRefusedError';
  constructor(status: number, url?: string) {
    const called = url === undefined ? '' : ` to POST ${url}`;
    super(
      'REDIRECT_REFUSED',
      `The mother answered with a redirect (HTTP ${status})${called}; redirects are never followed. Check \`baseUrl\`: set it to the final address of the directory that holds license.php and release.php.`,
      {
        retryable: false,
        status,
      },
    );
  }
}

/**
 * No complete answer in time. `status` is set when the status line had arrived before the body
 * stalled: a 2xx status means the mother accepted the request.
 */
export class TimeoutError extends MotherError {
  override name = 'TimeoutError';
  constructor(timeoutMs: number, cause?: unknown, status?: number) {
    const what = status === undefined ? 'did not answer' : `sent HTTP ${status} but not its whole body`;
    super('TIMEOUT', `The mother ${what} within ${timeoutMs} ms.`, { retryable: true, cause, ...(status === undefined ? {} : { status }) });
  }
}

/** The connection failed. `status` is set when it broke after the status line (see TimeoutError). */
export class NetworkError extends MotherError {
  override name = 'NetworkError';
  constructor(message: string, cause?: unknown, status?: number) {
    super('NETWORK', message, { retryable: true, cause, ...(status === undefined ? {} : { status }) });
  }
}

/** The answer was not the JSON the contract describes (HTML error page, bad types, cut off…). */
export class MalformedResponseError extends MotherError {
  override name = 'MalformedResponseError';
  constructor(message: string, status: number, cause?: unknown) {
    super('MALFORMED_RESPONSE', message, { retryable: true, status, cause });
  }
}

export class ResponseTooLargeError extends MotherError {
  override name = 'ResponseTooLargeError';
  constructor(limitBytes: number, status: number) {
    super('RESPONSE_TOO_LARGE', `The mother's answer exceeded ${limitBytes} bytes and was refused.`, { retryable: true, status });
  }
}

/** A release refused locally, before any network call. `field` names the offending field. */
export class InvalidReleaseError extends Error {
  override name = 'InvalidReleaseError';
  readonly code = 'INVALID_RELEASE';
  readonly retryable = false;
  readonly field: string;
  constructor(field: string, message: string) {
    super(message);
    this.field = field;
  }
}

/**
 * `STATE_FILE_REJECTED`: the state file was refused · `CLOCK_ROLLBACK`: the clock went back ·
 * `SHARED_VERDICT_REJECTED`: a value in the license store was refused · `STORE_UNAVAILABLE`:
 * the license store failed (instances check on their own until it is back).
 */
export type LocalStateCode = 'STATE_FILE_REJECTED' | 'STATE_FILE_WRITE_FAILED' | 'CLOCK_ROLLBACK' | 'SHARED_VERDICT_REJECTED' | 'STORE_UNAVAILABLE';

/**
 * Local state the guard refused to trust: `STATE_FILE_REJECTED` (a state file that is corrupt,
 * unauthenticated, from another panel or claiming a future time), `STATE_FILE_WRITE_FAILED` (the
 * state file could not be written; the verdict in memory stands), or `CLOCK_ROLLBACK` (the
 * system clock is behind the latest time this panel has seen), and trouble with the shared
 * license store of cluster mode. Reported through 'error'; the panel then relies on its own
 * checks instead of trusting that state.
 */
export class LocalStateError extends Error {
  override name = 'LocalStateError';
  readonly code: LocalStateCode;
  constructor(code: LocalStateCode, message: string) {
    super(message);
    this.code = code;
  }
}

/** The stable `code` of an error this package raised (e.g. 'TIMEOUT'), or 'UNKNOWN'. */
export function errorCodeOf(error: unknown): string {
  const code = (error as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' ? code : 'UNKNOWN';
}

/**
 * The outbox could not send a release for its panel: `PANEL_UNRESOLVED` (with `panels`, the
 * resolver answered null, threw, timed out or gave unusable credentials for the row's panel: its
 * rows wait and are tried again) · `PANEL_MISMATCH` (a store handed a worker a row of another
 * panel: it is never sent with this worker's credentials).
 */
export class PanelDeliveryError extends Error {
  override name = 'PanelDeliveryError';
  readonly code: 'PANEL_UNRESOLVED' | 'PANEL_MISMATCH';
  readonly panel: string;
  constructor(code: 'PANEL_UNRESOLVED' | 'PANEL_MISMATCH', panel: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.panel = panel;
  }
}

export type OutboxDatabaseErrorCode = 'OUTBOX_DATABASE_UNREACHABLE' | 'OUTBOX_DATABASE_LOGIN' | 'OUTBOX_DATABASE_MISSING';

/**
 * The PostgreSQL outbox could not use its database: `OUTBOX_DATABASE_UNREACHABLE` (refused,
 * timed out, dropped), `OUTBOX_DATABASE_LOGIN` (user or password refused) or
 * `OUTBOX_DATABASE_MISSING` (no such database). The message says where (host:port/database,
 * never a password), what it means for the releases and what to check; `cause` is the driver's.
 */
export class OutboxDatabaseError extends Error {
  override name = 'OutboxDatabaseError';
  readonly code: OutboxDatabaseErrorCode;
  constructor(code: OutboxDatabaseErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/**
 * `outbox.enqueue(release, { transaction })` found your transaction ended (committed or rolled
 * back by your library) while it was storing the release in it: an enqueue not awaited inside the
 * transaction's callback. `stored`: `false` when the release is known not to be stored (the
 * transaction rolled back, or ended before the release was written); `undefined` when your
 * library cannot tell whether the transaction committed after the release was written (then see
 * `outbox.list()`). The store never writes outside your transaction where the database lets it
 * tell (PostgreSQL; MariaDB), and never answers with the id of a row your library rolled back
 * where the library lets it tell (Knex; Kysely once the rollback has ended).
 */
export class TransactionEndedError extends Error {
  override name = 'TransactionEndedError';
  readonly code = 'TRANSACTION_ENDED';
  readonly stored: false | undefined;
  constructor(stored: false | undefined, options?: { cause?: unknown }) {
    super(
      `panel-license-guard: your transaction ended while the release was being stored in it (an enqueue not awaited inside your transaction's callback?): ${
        stored === false ? 'the release was not stored.' : 'the release is stored only if your transaction committed after it was written (see outbox.list()).'
      } Await outbox.enqueue() inside the callback, before it returns or throws.`,
      options,
    );
    this.stored = stored;
  }
}

/**
 * `panels` mode, about a host: `RESOLVE_FAILED` (your resolver threw, timed out or gave unusable
 * credentials; or a summary of such failures) · `HOST_NOT_LICENSED` (a host your resolver maps to
 * a panel whose license names other domains; refused with 421).
 */
export class PanelHostError extends Error {
  override name = 'PanelHostError';
  readonly code: 'RESOLVE_FAILED' | 'HOST_NOT_LICENSED';
  /** The host concerned, when the error is about one (never in a summary). */
  readonly host: string | undefined;
  constructor(code: 'RESOLVE_FAILED' | 'HOST_NOT_LICENSED', message: string, options?: { host?: string; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.host = options?.host;
  }
}

/**
 * What a guard's `'error'` listeners receive: switch on `code`. In `panels` mode an error about one
 * panel carries its id and the hosts this instance knows for it.
 */
export type LicenseGuardError = (MotherError | LocalStateError | PanelHostError) & { readonly panel?: string; readonly hosts?: string[] };

/** Any error as a guard reports it: the package's own as they are; anything else (a custom client's throw) as a NetworkError. */
export function asGuardError(error: unknown): LicenseGuardError {
  if (error instanceof MotherError || error instanceof LocalStateError || error instanceof PanelHostError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new NetworkError(`The license check failed: ${message}`, error);
}

/**
 * Thrown by a store's `settleMany()` when only some outcomes were recorded: `results[i]` is the
 * result of the i-th outcome, or undefined when it was not recorded (the first failure is the
 * `cause`). The worker records the undefined ones again, one at a time, and no others. A custom
 * store may throw it too; any other error means nothing of the batch was recorded.
 */
export class PartialSettleError extends Error {
  override name = 'PartialSettleError';
  readonly code = 'PARTIAL_SETTLE';
  readonly results: readonly ('applied' | 'superseded' | 'stale' | undefined)[];
  constructor(results: readonly ('applied' | 'superseded' | 'stale' | undefined)[], cause: unknown) {
    const missing = results.filter((result) => result === undefined).length;
    super(`panel-license-guard: ${missing} of ${results.length} outcomes could not be recorded`, { cause });
    this.results = results;
  }
}

/** The console runs as many title searches as it allows at once: the page answers 503 and asks to try again. */
export class ConsoleBusyError extends Error {
  override name = 'ConsoleBusyError';
  readonly code = 'CONSOLE_BUSY';
  readonly status = 503;
  constructor(running: number) {
    super(`panel-license-guard: ${running} title searches are running on this instance already.`);
  }
}

/** The command line was used wrongly (an unknown flag, a missing value): said with the command's usage. */
export class UsageError extends Error {
  override name = 'UsageError';
  readonly code = 'USAGE';
  readonly usage: string | undefined;
  constructor(message: string, usage?: string) {
    super(message);
    this.usage = usage;
  }
}

// The mother API client: both contract operations, signed, hardened, skew-corrected.
import { createHash, createHmac } from 'node:crypto';
import { inspect } from 'node:util';
import { AuthenticationError, HttpStatusError, MalformedResponseError, MethodNotAllowedError, type MotherError, ServerValidationError } from '../errors.js';
import { OptionProblems, optionError, rejectUnknownOptions } from '../options.js';
import { type Release, serializeRelease, validateRelease } from '../release.js';
import { assertApiKey, assertApiSecret } from '../signing.js';
import { cleanText } from '../text.js';
import { SkewClock } from './clock.js';
import { type FetchLike, parseRetryAfter, type RawResponse } from './http.js';
import { errorBodySchema, type LicenseResponse, licenseResponseSchema, type ReleaseResponse, releaseResponseSchema } from './license-response.js';
import { type MotherEndpoint, type MotherEndpointOptions, resolveEndpoint, sendSigned } from './mother-endpoint.js';

export interface MotherClientOptions {
  /** Base address of the mother's partner API; `license.php` and `release.php` are joined to it. */
  baseUrl: string;
  /** The panel's API key. */
  apiKey: string;
  /** The panel's API secret. Kept in a closure; never logged, inspected or serialized. */
  apiSecret: string;
  /** Abort a request (body included) after this many milliseconds. @default 10000 */
  timeoutMs?: number;
  /** Refuse answers larger than this many bytes. @default 1048576 (1 MiB) */
  maxResponseBytes?: number;
  /** Allow plain `http:` to a non-loopback host. @default false */
  allowInsecureHttp?: boolean;
  /** The fetch implementation. @default globalThis.fetch */
  fetch?: FetchLike;
  /** Local clock in milliseconds; injected by tests. @default Date.now */
  now?: () => number;
}

export interface RequestOptions {
  /** Aborts the request (a `NetworkError` is thrown). @default undefined */
  signal?: AbortSignal;
}

export interface MotherClient {
  /** POST license.php with an empty signed body; resolves with the schema-checked answer. */
  checkLicense(options?: RequestOptions): Promise<LicenseResponse>;
  /** Validates the release locally, then POSTs release.php; resolves with `{ ok, release_id }`. */
  pushRelease(release: Release, options?: RequestOptions): Promise<ReleaseResponse>;
  /** Sends a body already serialized by `serializeRelease` (used by the outbox: exact stored bytes). */
  pushSerializedRelease(body: string, options?: RequestOptions): Promise<ReleaseResponse>;
  /** Milliseconds the mother's clock is ahead of ours, as last measured. */
  clockOffsetMs(): number;
  /** The endpoint base, for logs and status pages (no credentials in it). */
  readonly baseUrl: string;
  /** A stable, non-reversible id of this panel at this mother (hash of base URL and key). */
  readonly panelId: string;
  /** The longest one call can take, in ms, retries included (the outbox sizes leases by it). */
  readonly timeoutMs: number;
  /**
   * HMAC-SHA256 (hex) of `data` under a key derived from the API secret for `purpose`. It
   * authenticates state this package keeps outside the process (the guard's `stateFile`); it is
   * never sent, and the secret cannot be recovered from it.
   */
  localMac(purpose: string, data: string): string;
}

const KNOWN = ['baseUrl', 'apiKey', 'apiSecret', 'timeoutMs', 'maxResponseBytes', 'allowInsecureHttp', 'fetch', 'now'] as const;

function parseJson(raw: RawResponse): unknown {
  try {
    return JSON.parse(raw.text);
  } catch (error) {
    const looksHtml = /^\s*</.test(raw.text);
    const what = raw.text.length === 0 ? 'an empty body' : looksHtml ? 'an HTML page' : 'a body that is not valid JSON';
    throw new MalformedResponseError(`The mother answered HTTP ${raw.status} with ${what}.`, raw.status, error);
  }
}

// Anything shaped like an HMAC-SHA256 in hex, wherever it sits (`sig_<hex>`, `sha256=<hex>`):
// our signature, or one echoed from an earlier request.
const HEX_DIGEST = /[0-9a-f]{64}/gi;

/**
 * Mother text we keep (errors, logs, `lastError`, CLI output) may echo our request headers, as a
 * proxy's error page can: the API key and anything shaped like a signature are cut out.
 */
function redactMotherText(text: string, apiKey: string): string {
  // Invisible characters first, so `pk_te\u200bst` cannot hide the key from the match.
  const visible = cleanText(text, Number.POSITIVE_INFINITY) ?? '';
  return visible.replaceAll(apiKey, '[api key]').replace(HEX_DIGEST, '[redacted]');
}

/** Turns a non-2xx answer into the error class of its kind. */
function errorFor(raw: RawResponse, nowMs: number, apiKey: string, url: string): MotherError {
  let serverMessage: string | undefined;
  try {
    const parsed = errorBodySchema.safeParse(JSON.parse(raw.text));
    // Remote text headed for logs and terminals: no control characters, bounded length, no
    // credentials (redacted before the cap, so a cut can never leave half a key behind).
    if (parsed.success) serverMessage = cleanText(redactMotherText(parsed.data.error, apiKey), 300) ?? undefined;
  } catch {
    // 401/405 bodies are not specified by the contract: HTML or empty is fine.
  }
  const suffix = serverMessage ? `: ${serverMessage}` : '.';
  if (raw.status === 401) return new AuthenticationError(`The mother rejected the credentials or signature (HTTP 401)${suffix}`);
  if (raw.status === 405) return new MethodNotAllowedError(`The mother refused the method (HTTP 405)${suffix}`);
  if (raw.status === 422) return new ServerValidationError(serverMessage ?? 'validation failed (no message given)');
  const retryAfter = parseRetryAfter(raw.headers.get('retry-after'), nowMs);
  // No such script there: most often a `baseUrl` that is not the directory of the scripts.
  const where = raw.status === 404 ? ` (POST ${url}: check \`baseUrl\`, the directory that holds license.php and release.php)` : '';
  return new HttpStatusError(raw.status, `The mother answered HTTP ${raw.status}${suffix}${where}`, retryAfter);
}

function parseWith<T>(
  schema: { safeParse(v: unknown): { success: true; data: T } | { success: false; error: { issues: { path: PropertyKey[]; message: string }[] } } },
  raw: RawResponse,
  what: string,
): T {
  const result = schema.safeParse(parseJson(raw));
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  // Key names come from the mother: cleaned and capped like any remote text.
  const path = cleanText(issue?.path.map(String).join('.').replace(HEX_DIGEST, '[redacted]'), 100) ?? '(root)';
  const where = issue ? `\`${path}\`: ${issue.message}` : 'unknown shape';
  throw new MalformedResponseError(`The mother's ${what} answer does not match the contract (${where}).`, raw.status);
}

/** A stable id for the panel of `apiKey` at this mother, safe to log and show (not the key). */
export function panelIdOf(baseUrl: string, apiKey: string): string {
  // The first 16 bytes as hex: a flat string, not a slice that keeps the whole digest alive.
  return createHash('sha256').update(`${baseUrl}\n${apiKey}`).digest().toString('hex', 0, 16);
}

/**
 * One panel's client: its key, secret and learned clock offset, over an endpoint it may share
 * with every other panel at the same mother. A class whose methods live on the prototype, so a
 * client costs a few hundred bytes (`panels` mode keeps one per panel). The key and secret are
 * private fields: never enumerated, inspected or serialized.
 */
class SignedMotherClient implements MotherClient {
  readonly panelId: string;
  readonly #endpoint: MotherEndpoint;
  readonly #apiKey: string;
  readonly #apiSecret: string;
  readonly #clock: SkewClock;
  /** One derived key per purpose, so a MAC made for one use is worthless for another (made on first use). */
  #localKeys: Map<string, Buffer> | undefined;

  constructor(endpoint: MotherEndpoint, apiKey: string, apiSecret: string) {
    this.#endpoint = endpoint;
    this.#apiKey = apiKey;
    this.#apiSecret = apiSecret;
    this.#clock = new SkewClock(endpoint.now);
    this.panelId = panelIdOf(endpoint.baseUrl, apiKey);
  }

  get baseUrl(): string {
    return this.#endpoint.baseUrl;
  }

  get timeoutMs(): number {
    return this.#endpoint.timeoutMs;
  }

  private async send(url: string, body: string, signal: AbortSignal | undefined): Promise<RawResponse> {
    const endpoint = this.#endpoint;
    const raw = await sendSigned({ endpoint, apiKey: this.#apiKey, apiSecret: this.#apiSecret, clock: this.#clock, url, body, signal });
    if (raw.status >= 200 && raw.status < 300) return raw;
    throw errorFor(raw, endpoint.now(), this.#apiKey, url);
  }

  async checkLicense(options?: RequestOptions): Promise<LicenseResponse> {
    const raw = await this.send(this.#endpoint.licenseUrl, '', options?.signal);
    const answer = parseWith(licenseResponseSchema, raw, 'license');
    if (answer.server_time !== undefined) this.#clock.fromServerTime(answer.server_time, raw.sentAtMs, raw.receivedAtMs);
    return answer;
  }

  async pushRelease(release: Release, options?: RequestOptions): Promise<ReleaseResponse> {
    return this.pushSerializedRelease(serializeRelease(validateRelease(release)), options);
  }

  async pushSerializedRelease(body: string, options?: RequestOptions): Promise<ReleaseResponse> {
    const raw = await this.send(this.#endpoint.releaseUrl, body, options?.signal);
    return parseWith(releaseResponseSchema, raw, 'release');
  }

  clockOffsetMs(): number {
    return this.#clock.offsetMs();
  }

  localMac(purpose: string, data: string): string {
    this.#localKeys ??= new Map();
    let key = this.#localKeys.get(purpose);
    if (key === undefined) {
      key = createHmac('sha256', this.#apiSecret).update(`panel-license-guard local state: ${purpose}`).digest();
      this.#localKeys.set(purpose, key);
    }
    return createHmac('sha256', key).update(data, 'utf8').digest('hex');
  }

  toJSON(): { baseUrl: string } {
    return { baseUrl: this.baseUrl };
  }

  [inspect.custom](): string {
    return `MotherClient { baseUrl: '${this.baseUrl}' }`;
  }
}

/**
 * A client of panel `apiKey` at an endpoint already validated (`panels` mode: one endpoint per
 * mother, shared). Throws when the key or secret is unusable, naming which.
 */
export function clientAt(endpoint: MotherEndpoint, apiKey: string, apiSecret: string): MotherClient {
  const problems = new OptionProblems();
  problems.redact(apiSecret);
  problems.check(() => assertApiKey(apiKey), undefined);
  problems.check(() => assertApiSecret(apiSecret), undefined);
  problems.throwIfAny('createMotherClient');
  return new SignedMotherClient(endpoint, apiKey, apiSecret);
}

/** The validated endpoint part of client options (throws like createMotherClient() on a bad one). */
export function motherEndpoint(options: MotherEndpointOptions): MotherEndpoint {
  const problems = new OptionProblems();
  const endpoint = resolveEndpoint(options, problems);
  problems.throwIfAny('createMotherClient');
  return endpoint;
}

export function createMotherClient(options: MotherClientOptions): MotherClient {
  if (typeof options !== 'object' || options === null) throw optionError('options', 'must be an object', 'Pass { baseUrl, apiKey, apiSecret }.');
  const problems = new OptionProblems();
  problems.redact(options.apiSecret);
  rejectUnknownOptions('createMotherClient', options, KNOWN, problems);
  const { apiKey, apiSecret } = options;
  problems.check(() => assertApiKey(apiKey), undefined);
  problems.check(() => assertApiSecret(apiSecret), undefined);
  const endpoint = resolveEndpoint(options, problems);
  problems.throwIfAny('createMotherClient');
  return asPlainClient(new SignedMotherClient(endpoint, apiKey, apiSecret));
}

/**
 * The client as a plain object would behave: methods bound (`const { pushRelease } = client`
 * works) and `baseUrl`, `timeoutMs` as own properties (kept by a spread). For the clients you
 * make; `panels` mode keeps the bare class instances, whose methods stay on the prototype.
 */
function asPlainClient(client: SignedMotherClient): MotherClient {
  for (const name of ['checkLicense', 'pushRelease', 'pushSerializedRelease', 'clockOffsetMs', 'localMac'] as const)
    Object.defineProperty(client, name, { value: client[name].bind(client), enumerable: true });
  Object.defineProperty(client, 'baseUrl', { value: client.baseUrl, enumerable: true });
  Object.defineProperty(client, 'timeoutMs', { value: client.timeoutMs, enumerable: true });
  return client;
}

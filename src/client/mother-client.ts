// The mother API client: both contract operations, signed, hardened, skew-corrected.
import { createHash, createHmac } from 'node:crypto';
import { inspect } from 'node:util';
import { OptionProblems, optionError, optionNames, rejectUnknownOptions } from '../options.js';
import { type Release, serializeRelease, validateRelease } from '../release.js';
import { assertApiKey, assertApiSecret } from '../signing.js';
import { SkewClock } from './clock.js';
import type { FetchLike, RawResponse } from './http.js';
import { type LicenseResponse, licenseResponseSchema, type ReleaseResponse, releaseResponseSchema } from './license-response.js';
import { errorFor, parseWith, redactedLicense } from './mother-answers.js';
import { type MotherEndpoint, type MotherEndpointOptions, resolveEndpoint, sendSigned } from './mother-endpoint.js';
import { type Redactor, redactorFor } from './redaction.js';

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

/** Internal (tracing): a RequestOptions key whose function learns the HTTP status of the mother's answer. */
export const RESPONSE_STATUS: unique symbol = Symbol('panel-license-guard.response-status') as never;
export type StatusObserving = RequestOptions & { [RESPONSE_STATUS]?: (status: number) => void };

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

const KNOWN = optionNames<MotherClientOptions>({
  baseUrl: true,
  apiKey: true,
  apiSecret: true,
  timeoutMs: true,
  maxResponseBytes: true,
  allowInsecureHttp: true,
  fetch: true,
  now: true,
});

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
  /** Cuts this panel's key and secret out of the mother's texts (made on first use). */
  #redactor: Redactor | undefined;
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

  private get redactor(): Redactor {
    this.#redactor ??= redactorFor(this.#apiKey, this.#apiSecret);
    return this.#redactor;
  }

  private async send(url: string, body: string, options: StatusObserving | undefined): Promise<RawResponse> {
    const endpoint = this.#endpoint;
    const signal = options?.signal;
    const raw = await sendSigned({ endpoint, apiKey: this.#apiKey, apiSecret: this.#apiSecret, clock: this.#clock, url, body, signal });
    options?.[RESPONSE_STATUS]?.(raw.status);
    if (raw.status >= 200 && raw.status < 300) return raw;
    throw errorFor(raw, endpoint.now(), this.redactor, url);
  }

  async checkLicense(options?: RequestOptions): Promise<LicenseResponse> {
    const raw = await this.send(this.#endpoint.licenseUrl, '', options);
    const answer = parseWith(licenseResponseSchema, raw, 'license', this.redactor);
    if (answer.server_time !== undefined) this.#clock.fromServerTime(answer.server_time, raw.sentAtMs, raw.receivedAtMs);
    return redactedLicense(answer, this.redactor);
  }

  async pushRelease(release: Release, options?: RequestOptions): Promise<ReleaseResponse> {
    return this.pushSerializedRelease(serializeRelease(validateRelease(release)), options);
  }

  async pushSerializedRelease(body: string, options?: RequestOptions): Promise<ReleaseResponse> {
    const raw = await this.send(this.#endpoint.releaseUrl, body, options);
    return parseWith(releaseResponseSchema, raw, 'release', this.redactor);
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

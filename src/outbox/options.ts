export type { OutboxPanelCredentials } from './panels/panel-senders.js';
export type { ReleaseSender } from './release-sender.js';

import type { FetchLike } from '../client/http.js';
import { isolateLogger, type StructuredLogger } from '../logger.js';
import { OptionProblems, optionalFunction, optionError, optionNames, positiveInteger, rejectUnknownOptions, shown, timerMs } from '../options.js';
import { resolveTracing, type Tracing, type TracingOption } from '../tracing/tracing-option.js';
import type { OutboxLogger } from './events.js';
import type { OutboxPanelCredentials } from './panels/panel-senders.js';
import { type PanelsSource, resolvePanelsSource } from './panels/panels-options.js';
import type { ReleaseSender } from './release-sender.js';
import { type ResolvedRetention, type RetentionOptions, resolveRetention } from './retention.js';
import type { OutboxStore } from './store.js';
import { resolveMaxPerSecond } from './worker/mother-rate.js';

/** One outbox for many panels: each row is sent with the credentials of the panel it was stored for. */
export interface OutboxPanelsOptions {
  /**
   * Credentials of a panel, by your own stable id of it (a tenant id, not a host): `{ apiKey,
   * apiSecret, baseUrl? }`, or null for a panel you do not know (its rows wait). Asked at most once
   * per panel per `resolveTtlMs`; while it throws, a panel it knew keeps its credentials. Required.
   */
  resolve: (panel: string) => OutboxPanelCredentials | null | undefined | Promise<OutboxPanelCredentials | null | undefined>;
  /** How long a panel's credentials are remembered. @default 300000 (5 minutes) */
  resolveTtlMs?: number;
  /** The longest a resolver call may take before the panel counts as unresolved. @default 5000 */
  resolveTimeoutMs?: number;
  /** A panel the resolver does not know (or that failed) has its rows tried again after this long. @default 60000 */
  unresolvedRetryMs?: number;
  /** Panels whose credentials (and clients) are kept in memory at once. @default 10000 */
  max?: number;
}

export interface ReleaseOutboxOptions {
  /** The mother client that sends releases (`createMotherClient()`). Required unless `panels` is given. */
  client?: ReleaseSender;
  /** Many panels in one outbox: pass this instead of `client`, and `{ panel }` to every enqueue. @default undefined */
  panels?: OutboxPanelsOptions;
  /** With `panels`: the mother of the panels whose credentials name no `baseUrl`. @default undefined */
  baseUrl?: string;
  /** With `panels`: longest push to a mother, retries included. @default 10000 */
  timeoutMs?: number;
  /** With `panels`: allow plain `http:` to a mother that is not on loopback. @default false */
  allowInsecureHttp?: boolean;
  /** With `panels`: the fetch the panels' clients use. @default globalThis.fetch */
  fetch?: FetchLike;
  /**
   * Path of the SQLite file holding the queue (needs the optional peer dependency
   * `better-sqlite3@12`). `':memory:'` keeps the queue in memory: lost when the process ends.
   * Pass `file` or `store`, not both. @default undefined
   */
  file?: string;
  /** A store instance instead of `file` (e.g. `sqliteOutboxStore()` with custom settings). Not closed by `close()`. @default undefined */
  store?: OutboxStore;
  /**
   * Most pushes in flight at once. A single panel's outbox also claims up to `max(64, concurrency)`
   * releases ahead of its free slots, fewer while pushes are slow (docs/outbox.md). @default 4
   */
  concurrency?: number;
  /**
   * Most pushes per second to one mother (its base URL), shared by every panel of this outbox
   * that delivers there: pushes start at least 1/maxPerSecond s apart, in the order they were
   * claimed. Per outbox instance, not across processes: with N processes, give each
   * limit / N. Must leave `concurrency` turns of waiting room in `leaseMs` (docs/outbox.md).
   * @default undefined (unlimited)
   */
  maxPerSecond?: number;
  /** Ceiling of the first retry delay; doubled after each failure (full jitter). @default 1000 */
  baseDelayMs?: number;
  /** Longest retry delay, `Retry-After` included. @default 900000 (15 minutes) */
  maxDelayMs?: number;
  /** Delay after the mother rejects our credentials (401): slow, since only a human can fix that. @default 300000 (5 minutes) */
  authRetryDelayMs?: number;
  /**
   * How long a claimed release is reserved for this process. Another process (or this one after a
   * crash) may send it again once the lease ends, so it must cover the longest push (the client's
   * `timeoutMs`, which bounds its retries too) plus 5 s to record the outcome.
   * @default 60000
   */
  leaseMs?: number;
  /** How often an idle worker looks for due releases (e.g. queued by another process). @default 1000 */
  pollIntervalMs?: number;
  /** Clock in epoch milliseconds; injected by tests. @default Date.now */
  now?: () => number;
  /** Uniform random number in [0, 1) for the jitter; injected by tests. @default Math.random */
  random?: () => number;
  /** Start delivering at once. With `false`, call `start()`. @default true */
  autoStart?: boolean;
  /**
   * How long delivered and dead rows are kept; old ones are deleted in small batches in the
   * background. The latest delivery of every track is kept, so an identical re-upload is still
   * recognised. `false` keeps every row. Needs a store with `prune()` (all built-in stores).
   * @default { deliveredMs: 30 days, deadMs: 90 days, intervalMs: 1 hour, batchSize: 500 }
   */
  retention?: RetentionOptions | false;
  /** Receives what no listener handled (an unheard 'error', a dead release without a 'dead' listener). @default console */
  logger?: OutboxLogger;
  /**
   * OpenTelemetry: a `create` span per enqueue, whose context is stored with the release, and a
   * `send` span per push linked to it (docs/tracing.md).
   * @default undefined (traced when `@opentelemetry/api` is installed and an SDK registered)
   */
  tracing?: TracingOption;
}

export type StoreSource = { kind: 'memory' } | { kind: 'file'; file: string } | { kind: 'given'; store: OutboxStore };

export interface ResolvedOutboxConfig {
  panels: PanelsSource;
  unresolvedRetryMs: number;
  storeSource: StoreSource;
  concurrency: number;
  /** Pushes per second to one mother at most; undefined: no limit. */
  maxPerSecond: number | undefined;
  baseDelayMs: number;
  maxDelayMs: number;
  authRetryDelayMs: number;
  leaseMs: number;
  /** The longest one push takes, retries included, when the client says (a MotherClient does). */
  pushTimeoutMs: number | undefined;
  pollIntervalMs: number;
  now: () => number;
  random: () => number;
  autoStart: boolean;
  logger: StructuredLogger;
  retention: ResolvedRetention | false;
  /** Undefined when nothing is traced (`tracing: false`, or no `@opentelemetry/api`). */
  tracing: Tracing | undefined;
}

const KNOWN = optionNames<ReleaseOutboxOptions>({
  client: true,
  panels: true,
  baseUrl: true,
  timeoutMs: true,
  allowInsecureHttp: true,
  fetch: true,
  file: true,
  store: true,
  concurrency: true,
  maxPerSecond: true,
  baseDelayMs: true,
  maxDelayMs: true,
  authRetryDelayMs: true,
  leaseMs: true,
  pollIntervalMs: true,
  now: true,
  random: true,
  autoStart: true,
  logger: true,
  retention: true,
  tracing: true,
});

/** Time a lease must leave after the longest push, to record its outcome (SQLite's busy timeout). */
export const LEASE_MARGIN_MS = 5000;

const STORE_METHODS = ['enqueue', 'claimDue', 'settle', 'counts', 'list', 'requeueDead', 'close'] as const;
const MAX_CONCURRENCY = 64;

function resolveStoreSource(file: unknown, store: unknown): StoreSource {
  if (file !== undefined && store !== undefined) {
    throw optionError('file', 'and `store` were both given', 'Pass `file` for the built-in SQLite store, or `store` for your own, not both.');
  }
  if (store !== undefined) {
    const missing = STORE_METHODS.find((method) => typeof (store as Record<string, unknown> | null)?.[method] !== 'function');
    if (missing) throw optionError('store', `is not an outbox store (no \`${missing}()\` method)`, 'Pass sqliteOutboxStore(...) or memoryOutboxStore().');
    return { kind: 'given', store: store as OutboxStore };
  }
  if (file === undefined) {
    throw optionError('file', 'is required (or `store`)', 'Pass a path such as "./data/outbox.db", or ":memory:" for a queue that is not durable.');
  }
  if (typeof file !== 'string' || file.trim() === '')
    throw optionError('file', `must be a non-empty path, received ${shown(file)}`, 'Pass a path such as "./data/outbox.db".');
  return file === ':memory:' ? { kind: 'memory' } : { kind: 'file', file };
}

function resolveLogger(value: unknown): StructuredLogger {
  if (value === undefined) return isolateLogger(console);
  const logger = value as Partial<OutboxLogger> | null;
  if (typeof logger?.warn !== 'function' || typeof logger.error !== 'function') {
    throw optionError('logger', 'must have `warn` and `error` methods', 'Pass `console`, a pino/winston logger, or leave it out.');
  }
  return isolateLogger(logger as OutboxLogger);
}

/** Validates everything up front: a misspelt or impossible option fails at start-up, not at 3 a.m. All problems at once. */
export function resolveOutboxOptions(options: ReleaseOutboxOptions): ResolvedOutboxConfig {
  if (typeof options !== 'object' || options === null) throw optionError('options', 'must be an object', 'Pass { client, file: "./data/outbox.db" }.');
  const problems = new OptionProblems();
  rejectUnknownOptions('createReleaseOutbox', options, KNOWN, problems);
  const panels = resolvePanelsSource(options, problems);
  const pushTimeoutMs = panels.kind === 'one' ? panels.client.timeoutMs : (panels.senders.clientOptions.timeoutMs ?? 10_000);
  const concurrency = problems.check(() => positiveInteger('concurrency', options.concurrency, 4), 4);
  if (concurrency > MAX_CONCURRENCY)
    problems.add(optionError('concurrency', `must be at most ${MAX_CONCURRENCY}, received ${concurrency}`, 'A handful of parallel pushes is plenty; try 4.'));
  const baseDelayMs = problems.check(() => timerMs('baseDelayMs', options.baseDelayMs, 1000), 1000);
  const maxDelayMs = problems.check(() => timerMs('maxDelayMs', options.maxDelayMs, 15 * 60_000), 15 * 60_000);
  if (maxDelayMs < baseDelayMs)
    problems.add(optionError('maxDelayMs', `(${maxDelayMs}) is below \`baseDelayMs\` (${baseDelayMs})`, 'Raise `maxDelayMs` or lower `baseDelayMs`.'));
  if (options.autoStart !== undefined && typeof options.autoStart !== 'boolean') {
    problems.add(optionError('autoStart', `must be true or false, received ${shown(options.autoStart)}`, 'Leave it out to start at once.'));
  }
  const leaseMs = problems.check(() => positiveInteger('leaseMs', options.leaseMs, 60_000), 60_000);
  // A lease that can run out while its push is still in flight (or before its outcome is
  // recorded) would let a second worker send the same release: the lease must cover both.
  if (typeof pushTimeoutMs === 'number' && leaseMs < pushTimeoutMs + LEASE_MARGIN_MS) {
    problems.add(
      optionError(
        'leaseMs',
        `(${leaseMs}) must exceed the client's \`timeoutMs\` (${pushTimeoutMs}) by at least ${LEASE_MARGIN_MS} ms, the time allowed to record the outcome`,
        `Set \`leaseMs\` to ${pushTimeoutMs + LEASE_MARGIN_MS} or more, or lower the client's \`timeoutMs\`.`,
      ),
    );
  }
  const config: ResolvedOutboxConfig = {
    panels,
    unresolvedRetryMs: problems.check(() => timerMs('panels.unresolvedRetryMs', options.panels?.unresolvedRetryMs, 60_000), 60_000),
    storeSource: problems.check(() => resolveStoreSource(options.file, options.store), { kind: 'memory' }),
    concurrency,
    maxPerSecond: resolveMaxPerSecond(options.maxPerSecond, { concurrency, leaseMs, pushTimeoutMs, marginMs: LEASE_MARGIN_MS }, problems),
    baseDelayMs,
    maxDelayMs,
    authRetryDelayMs: problems.check(() => timerMs('authRetryDelayMs', options.authRetryDelayMs, 5 * 60_000), 0),
    leaseMs,
    pushTimeoutMs,
    pollIntervalMs: problems.check(() => timerMs('pollIntervalMs', options.pollIntervalMs, 1000), 0),
    now: problems.check(() => optionalFunction<() => number>('now', options.now), undefined) ?? Date.now,
    random: problems.check(() => optionalFunction<() => number>('random', options.random), undefined) ?? Math.random,
    autoStart: options.autoStart ?? true,
    logger: problems.check(() => resolveLogger(options.logger), isolateLogger(console)),
    retention: resolveRetention(options.retention, problems),
    tracing: resolveTracing(options.tracing, problems),
  };
  const given = config.storeSource.kind === 'given' ? config.storeSource.store : undefined;
  if (options.retention !== undefined && options.retention !== false && given && typeof given.prune !== 'function')
    problems.add(optionError('retention', 'needs a store with a `prune()` method', 'Add `prune()` to your store, or pass `retention: false`.'));
  problems.throwIfAny('createReleaseOutbox');
  return config;
}

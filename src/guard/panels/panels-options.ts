// `panels` (many panels in one deployment, chosen by host): validation, and the per-panel client.
import { createHash } from 'node:crypto';
import { createEndpointCache } from '../../client/endpoints.js';
import { createMotherClient, type MotherClient, type MotherClientOptions } from '../../client/mother-client.js';
import { type OptionProblems, optionalFunction, optionError, optionNames, positiveInteger, timerMs } from '../../options.js';
import { validatePanelId } from '../../panel-id.js';
import type { PanelCredentials } from './host-resolver.js';

export interface PanelsOptions {
  /**
   * Credentials of the panel served at `host` (lower case, no port, no trailing dot) — `{ apiKey,
   * apiSecret, baseUrl?, panel? }`, where `panel` is your id of it (set as `res.locals.panel`) —
   * or null for an unknown host. Called at most once per host per `resolveTtlMs`; concurrent first requests
   * share one call; never called on a request for a host already known. Required.
   */
  resolve: (host: string) => PanelCredentials | null | undefined | Promise<PanelCredentials | null | undefined>;
  /** Panels kept in memory; the least recently used is evicted (and no longer checked). @default 10000 */
  max?: number;
  /** A panel with no request for this long stops being checked until its next request. @default 86400000 (24 h) */
  idleMs?: number;
  /** How long a host's answer is remembered. @default 300000 (5 min) */
  resolveTtlMs?: number;
  /** How long an unknown host (null, an error, a timeout) is remembered. @default 30000 */
  unknownTtlMs?: number;
  /** The longest a resolver call may take; then the host counts as unknown for `unknownTtlMs`. @default 5000 */
  resolveTimeoutMs?: number;
  /** Each panel is checked once per interval, at its own phase in it (spread evenly). @default 300000 (5 min) */
  checkIntervalMs?: number;
  /**
   * Resolver calls per second for hosts not known yet, in this process (random `Host` headers must
   * not drive your tenants database). A new host over it gets `503` with `Retry-After`; known
   * hosts are never affected. @default 100
   */
  resolvePerSecond?: number;
  /** First resolver calls that may start at once before `resolvePerSecond` applies (a restart). @default 1000 */
  resolveBurst?: number;
  /** First resolver calls under way at once, at most; more new hosts get `503`. @default 32 */
  resolveConcurrency?: number;
}

export interface ResolvedPanels {
  resolve: PanelsOptions['resolve'];
  max: number;
  idleMs: number;
  resolveTtlMs: number;
  unknownTtlMs: number;
  resolveTimeoutMs: number;
  checkIntervalMs: number;
  resolvePerSecond: number;
  resolveBurst: number;
  resolveConcurrency: number;
  /** A client for one panel, with the guard's `baseUrl`, `timeoutMs`, `allowInsecureHttp` and `fetch`. */
  clientFor: (credentials: PanelCredentials) => MotherClient;
  /** The key a panel's runtime is kept under (its client's `panelId` and a print of the secret); throws on unusable credentials. */
  runtimeKeyOf: (credentials: PanelCredentials) => string;
}

const KEYS = optionNames<PanelsOptions>({
  resolve: true,
  max: true,
  idleMs: true,
  resolveTtlMs: true,
  unknownTtlMs: true,
  resolveTimeoutMs: true,
  checkIntervalMs: true,
  resolvePerSecond: true,
  resolveBurst: true,
  resolveConcurrency: true,
});
/** Options that name one panel, or schedule one: meaningless with `panels`. */
const SINGLE_PANEL = ['apiKey', 'apiSecret', 'client', 'stateFile', 'syncIntervalMs', 'schedule'] as const;
const HINTS: Partial<Record<(typeof SINGLE_PANEL)[number], string>> = {
  schedule: 'Use `panels.checkIntervalMs`.',
  syncIntervalMs: "With `panels` and a `store`, each panel's record is re-read at its check slots; drop `syncIntervalMs`.",
  stateFile: 'With `panels`, pass `store` to keep verdicts across restarts and instances.',
};

/** The guard's options as read here: `panels`, and those it replaces (refused beside it). */
type GuardOptionsSeen = { panels?: PanelsOptions } & Partial<Pick<MotherClientOptions, 'baseUrl' | 'timeoutMs' | 'allowInsecureHttp' | 'fetch'>> & {
    readonly [name in (typeof SINGLE_PANEL)[number]]?: unknown;
  };

export function resolvePanels(options: GuardOptionsSeen, problems: OptionProblems): ResolvedPanels | undefined {
  const given = options.panels;
  if (given === undefined) return undefined;
  if (typeof given !== 'object' || given === null) {
    problems.add(optionError('panels', 'must be an object', 'Pass { resolve: async (host) => ({ apiKey, apiSecret }) }.'));
    return undefined;
  }
  for (const name of SINGLE_PANEL)
    if (options[name] !== undefined)
      problems.add(optionError(name, 'was given together with `panels`', HINTS[name] ?? 'Each panel comes from `panels.resolve(host)`.'));
  for (const name of Object.keys(given))
    if (!KEYS.includes(name)) problems.add(optionError(`panels.${name}`, 'is not a panels option', `Use ${KEYS.join(', ')}.`));
  const resolve = problems.check(() => optionalFunction<PanelsOptions['resolve']>('panels.resolve', given.resolve), undefined);
  if (resolve === undefined) problems.add(optionError('panels.resolve', 'is required', 'Pass async (host) => ({ apiKey, apiSecret }) or null.'));
  // A client with placeholder credentials checks `baseUrl` and the client options once, here.
  const clientOptions = {
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    ...(options.allowInsecureHttp === undefined ? {} : { allowInsecureHttp: options.allowInsecureHttp }),
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
  };
  const baseUrl = options.baseUrl as string;
  problems.check(() => createMotherClient({ ...clientOptions, baseUrl, apiKey: 'placeholder', apiSecret: 'placeholder-secret' }), undefined);
  // A panel's client: the guard's options, at the panel's own mother when its answer names one;
  // one endpoint per mother, shared by its panels' clients.
  const endpoints = createEndpointCache(clientOptions);
  const clientOf = (given: PanelCredentials) => endpoints.clientFor(given.baseUrl ?? baseUrl, given.apiKey, given.apiSecret);
  return {
    resolve: resolve ?? (() => null),
    max: problems.check(() => positiveInteger('panels.max', given.max, 10_000, 1, 1_000_000), 1),
    idleMs: problems.check(() => positiveInteger('panels.idleMs', given.idleMs, 24 * 3600_000), 1),
    resolveTtlMs: problems.check(() => positiveInteger('panels.resolveTtlMs', given.resolveTtlMs, 300_000), 1),
    unknownTtlMs: problems.check(() => positiveInteger('panels.unknownTtlMs', given.unknownTtlMs, 30_000), 1),
    resolveTimeoutMs: problems.check(() => timerMs('panels.resolveTimeoutMs', given.resolveTimeoutMs, 5000), 1),
    checkIntervalMs: problems.check(() => positiveInteger('panels.checkIntervalMs', given.checkIntervalMs, 300_000, 10_000), 300_000),
    resolvePerSecond: problems.check(() => positiveInteger('panels.resolvePerSecond', given.resolvePerSecond, 100, 1, 1_000_000), 100),
    resolveBurst: problems.check(() => positiveInteger('panels.resolveBurst', given.resolveBurst, 1000, 1, 1_000_000), 1000),
    resolveConcurrency: problems.check(() => positiveInteger('panels.resolveConcurrency', given.resolveConcurrency, 32, 1, 100_000), 32),
    clientFor: clientOf,
    runtimeKeyOf: (credentials) => {
      // Building the client checks the key, secret and base URL before anything uses them; the
      // panel id covers the base URL, so one key at two mothers is two panels.
      if (credentials.panel !== undefined) validatePanelId(credentials.panel, 'the panels resolver');
      const { panelId } = clientOf(credentials);
      const secretPrint = createHash('sha256').update(`runtime\n${credentials.apiSecret}`).digest().toString('hex', 0, 8);
      return `${panelId}:${secretPrint}`;
    },
  };
}

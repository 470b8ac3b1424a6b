// Public options of licenseGuard() and their validation into a fully resolved config.
import type { FetchLike } from '../client/http.js';
import { createMotherClient, type MotherClient } from '../client/mother-client.js';
import { isLicenseStore, type LicenseStore } from '../license-store/license-store.js';
import { describeError, isolateLogger, type Logger } from '../logger.js';
import { OptionProblems, optionalFunction, optionError, optionNames, positiveInteger, rejectUnknownOptions, timerMs } from '../options.js';
import { type AllowRule, createAllowMatcher } from '../serve/allow-list.js';
import { type DomainsMode, resolveDomainPolicy } from '../serve/licensed-domains.js';
import { type PublicMessageInput, publicMessageFrom, supportContactFrom } from '../serve/public-message.js';
import type { ServeConfig } from '../serve/serve-config.js';
import { resolveTracing, type Tracing, type TracingOption } from '../tracing/tracing-option.js';
import { validExpiryWarnings } from './expiry-warnings.js';
import { optionalString, validApiPrefix, validColor, validLockStatus, validLogger, validSchedule } from './guard-validators.js';
import { type PanelsOptions, type ResolvedPanels, resolvePanels } from './panels/panels-options.js';
import { GuardTelemetry } from './telemetry.js';

/** `console`, a pino or winston logger, or any `{ warn, error }`. */
export type GuardLogger = Logger;

export interface LicenseGuardOptions {
  /** Base address of the mother's partner API. Required unless `client` is given. */
  baseUrl?: string;
  /** The panel's API key. Required unless `client` is given. */
  apiKey?: string;
  /** The panel's API secret. Required unless `client` is given. Never logged or rendered. */
  apiSecret?: string;
  /** A client from createMotherClient(), to share one with a release outbox. @default created from the credentials */
  client?: MotherClient;
  /** node-cron expression of the periodic check. @default '*\/5 * * * *' (every 5 minutes) */
  schedule?: string;
  /** Each scheduled check waits a random 0…jitterMs first, so panels do not all call at once. @default 30000 */
  jitterMs?: number;
  /** How long the last good verdict stands while checks fail (capped at `expires_at`). @default 259200000 (72 h) */
  gracePeriodMs?: number;
  /** First retry delay after a failed check; doubles per failure. @default 30000 */
  retryBaseMs?: number;
  /** Longest retry delay after failed checks. @default 300000 (5 min) */
  retryMaxMs?: number;
  /** How long requests wait for the first verdict before getting the lock response. @default 5000 */
  startupTimeoutMs?: number;
  /** File that keeps the last verified verdict across restarts (written atomically, mode 0600). Not with `store`. @default undefined (memory only) */
  stateFile?: string;
  /**
   * Cluster mode: a store shared by every instance of this panel, e.g.
   * `redisLicenseStore({ client })` from `panel-license-guard/redis`. The instances then run one
   * check per schedule slot, share one verdict and switch together. Not with `stateFile` (the
   * store keeps the verdict across restarts). @default undefined (this instance on its own)
   */
  store?: LicenseStore;
  /** Cluster mode: how often each instance re-reads the shared verdict, in case a published change was missed. @default 30000 */
  syncIntervalMs?: number;
  /** HTTP status of lock responses (400–599). @default 503 */
  lockStatus?: number;
  /** `Retry-After` of lock responses, in seconds. @default 300 */
  retryAfterSeconds?: number;
  /** Render the host app's own view (e.g. 'locked') instead of the built-in page, with the same locals. @default undefined */
  lockView?: string;
  /** Requests under this path prefix always get JSON lock responses. @default undefined */
  apiPrefix?: string;
  /**
   * Paths served while locked: exact raw paths (`'/healthz'`, GET and HEAD), `'/static/*'` for
   * everything below a path, `'POST /hooks/pay'` for other methods, and/or `(req) => boolean`
   * predicates. Compared byte for byte with the raw request path, as Express routes it.
   * @default []
   */
  allow?: AllowRule | AllowRule[];
  /** Name used when the mother sends none (or an unusable one). @default 'Panel' */
  defaultName?: string;
  /** Colour used when the mother's is not `#rrggbb`. @default '#334155' */
  defaultColor?: string;
  /** Request timeout of license checks (when the guard creates the client). @default 10000 */
  timeoutMs?: number;
  /** Allow plain http to a non-loopback mother (when the guard creates the client). @default false */
  allowInsecureHttp?: boolean;
  /** fetch implementation (when the guard creates the client). @default globalThis.fetch */
  fetch?: FetchLike;
  /**
   * Days before the license's `expires_at` at which the guard emits `'expiring'`, once per
   * threshold per panel (kept across restarts by `stateFile` or `store`), and from which
   * `res.locals.license.expiryWarning` is set for a banner. Whole days, 0 (the last day) to 3650;
   * `[]` for none. Counted on the mother's clock. @default [30, 14, 7, 3, 1]
   */
  expiryWarnings?: number[];
  /** Clock in ms for grace, expiry and status (not for request signing); injected by tests. @default Date.now */
  now?: () => number;
  /** Random source in [0, 1) for the retry jitter (the schedule's jitter is node-cron's own). @default Math.random */
  random?: () => number;
  /** Where warnings and errors go when no 'error' listener is attached. @default console */
  logger?: GuardLogger;
  /**
   * What the lock page and JSON lock responses tell the panel's users. The mother's `reason`
   * (often about the operator's billing) is not shown to them: it stays in `status()`, events,
   * logs and `res.locals.license.reason`. A string, or a function of the verdict returning one.
   * @default 'This panel is temporarily unavailable. Please try again later.' (locked) and
   * 'This panel is starting up. Please try again in a moment.' (pending)
   */
  publicMessage?: string | ((verdict: PublicMessageInput) => string);
  /** An e-mail address or http(s) URL shown on the lock page as the place to ask for help. @default undefined */
  supportContact?: string;
  /**
   * Licensed domains. `'enforce'`: a request for a host that is neither the license's
   * `custom_domain` nor `<subdomain>.<subdomainBase>` (nor in `allowHosts`) gets `421 Misdirected
   * Request`. `'redirect'`: browsers are sent there instead (308, same path and query); other
   * requests get the 421. The allow list still applies. @default 'off'
   */
  domains?: DomainsMode;
  /** The mother's domain for panel subdomains, e.g. 'mother-panels.com'. @default undefined (only `custom_domain` counts) */
  subdomainBase?: string;
  /** Hosts always served whatever the license says, e.g. ['localhost'] in development. @default [] */
  allowHosts?: string[];
  /**
   * Many panels in one deployment, chosen per request by host: `{ resolve: async (host) =>
   * ({ apiKey, apiSecret }) | null, max, idleMs, … }`. Instead of `apiKey`/`apiSecret`. @default undefined (one panel)
   */
  panels?: PanelsOptions;
  /** OpenTelemetry: a `license check` span per check (docs/tracing.md). @default undefined (traced when `@opentelemetry/api` is installed and an SDK registered) */
  tracing?: TracingOption;
}

export type { PublicMessageInput };

/** Every resolved option: what the request path reads (ServeConfig) and what the checks need. */
export interface GuardConfig extends ServeConfig {
  client: MotherClient;
  schedule: string;
  jitterMs: number;
  gracePeriodMs: number;
  retryBaseMs: number;
  retryMaxMs: number;
  startupTimeoutMs: number;
  stateFile: string | undefined;
  /** Authenticates the state file (keyed from the API secret); set whenever `stateFile` is. */
  stateMac: ((data: string) => string) | undefined;
  store: LicenseStore | undefined;
  /** Authenticates the shared verdict (keyed from the API secret, another purpose than the file's). */
  storeMac: (data: string) => string;
  syncIntervalMs: number;
  /** `panels` mode: set, and `client` is a placeholder never used for a check. */
  panels: ResolvedPanels | undefined;
  now: () => number;
  random: () => number;
  /** The package's own instruments (metrics) observe checks and transitions here; one per guard. */
  telemetry: GuardTelemetry;
  /** Undefined when nothing is traced (`tracing: false`, or no `@opentelemetry/api`). */
  tracing: Tracing | undefined;
}

const KNOWN = optionNames<LicenseGuardOptions>({
  baseUrl: true,
  apiKey: true,
  apiSecret: true,
  client: true,
  schedule: true,
  jitterMs: true,
  gracePeriodMs: true,
  expiryWarnings: true,
  retryBaseMs: true,
  retryMaxMs: true,
  startupTimeoutMs: true,
  stateFile: true,
  store: true,
  syncIntervalMs: true,
  lockStatus: true,
  retryAfterSeconds: true,
  lockView: true,
  apiPrefix: true,
  allow: true,
  defaultName: true,
  defaultColor: true,
  timeoutMs: true,
  allowInsecureHttp: true,
  fetch: true,
  now: true,
  random: true,
  logger: true,
  publicMessage: true,
  supportContact: true,
  domains: true,
  subdomainBase: true,
  allowHosts: true,
  panels: true,
  tracing: true,
});

function clientFrom(options: LicenseGuardOptions, problems: OptionProblems): MotherClient | undefined {
  if (options.client !== undefined) {
    if (typeof options.client?.checkLicense !== 'function') {
      problems.add(optionError('client', 'is not a mother client', 'Pass the value returned by createMotherClient().'));
      return undefined;
    }
    // These configure the client the guard would create; with a client given they would be ignored.
    for (const name of ['baseUrl', 'apiKey', 'apiSecret', 'timeoutMs', 'allowInsecureHttp', 'fetch'] as const) {
      if (options[name] !== undefined)
        problems.add(optionError(name, 'was given together with `client`', `Set \`${name}\` on createMotherClient() instead, or drop \`client\`.`));
    }
    return options.client;
  }
  return problems.check(
    () =>
      createMotherClient({
        baseUrl: options.baseUrl as string,
        apiKey: options.apiKey as string,
        apiSecret: options.apiSecret as string,
        ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
        ...(options.allowInsecureHttp === undefined ? {} : { allowInsecureHttp: options.allowInsecureHttp }),
        ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
      }),
    undefined,
  );
}

/** Validates every option and reports all problems in one TypeError (see OptionProblems). */
export function resolveGuardOptions(options: LicenseGuardOptions): GuardConfig {
  if (typeof options !== 'object' || options === null) throw optionError('options', 'must be an object', 'Pass { baseUrl, apiKey, apiSecret }.');
  const problems = new OptionProblems();
  problems.redact(options.apiSecret);
  rejectUnknownOptions('licenseGuard', options, KNOWN, problems);
  const panels = resolvePanels(options, problems);
  const client = panels
    ? problems.check(() => panels.clientFor({ apiKey: 'placeholder', apiSecret: 'placeholder-secret' }), undefined)
    : clientFrom(options, problems);
  const logger = problems.check(() => validLogger(options.logger), isolateLogger(console));
  let predicateErrorLogged = false;
  // Logged once, not per request: a broken predicate would otherwise flood the log.
  const onPredicateError = (error: unknown) => {
    if (predicateErrorLogged) return;
    predicateErrorLogged = true;
    logger.error(`panel-license-guard: an \`allow\` predicate threw (the request was treated as not allowed): ${describeError(error)}`, {
      event: 'allow_predicate_threw',
    });
  };
  const retryBaseMs = problems.check(() => timerMs('retryBaseMs', options.retryBaseMs, 30_000), 30_000);
  const retryMaxMs = problems.check(() => timerMs('retryMaxMs', options.retryMaxMs, 300_000), 300_000);
  if (retryMaxMs < retryBaseMs)
    problems.add(optionError('retryMaxMs', `(${retryMaxMs}) is below \`retryBaseMs\` (${retryBaseMs})`, 'Raise `retryMaxMs` or lower `retryBaseMs`.'));
  const stateFile = problems.check(
    () => optionalString('stateFile', options.stateFile, 'Pass a writable file path such as "./data/license-state.json".'),
    undefined,
  );
  const store = options.store;
  if (store !== undefined && !isLicenseStore(store))
    problems.add(optionError('store', 'is not a license store', "Pass `redisLicenseStore({ client })` from 'panel-license-guard/redis'."));
  if (store !== undefined && stateFile !== undefined)
    problems.add(optionError('stateFile', 'was given together with `store`', 'Drop `stateFile`: in cluster mode the store keeps the verdict across restarts.'));
  if (options.syncIntervalMs !== undefined && store === undefined)
    problems.add(optionError('syncIntervalMs', 'only applies in cluster mode', 'Pass `store` as well, or drop `syncIntervalMs`.'));
  if ((stateFile !== undefined || store !== undefined) && client !== undefined && typeof client.localMac !== 'function')
    problems.add(
      optionError(
        'client',
        'has no `localMac()` method, which `stateFile` and `store` need to authenticate the verdict they keep',
        'Pass a client from createMotherClient().',
      ),
    );
  const config = {
    panelKey: client?.panelId ?? '',
    schedule: problems.check(() => validSchedule(options.schedule ?? '*/5 * * * *'), ''),
    jitterMs: problems.check(() => timerMs('jitterMs', options.jitterMs, 30_000, 0), 0),
    gracePeriodMs: problems.check(() => positiveInteger('gracePeriodMs', options.gracePeriodMs, 72 * 60 * 60 * 1000, 0), 0),
    expiryWarnings: problems.check(() => validExpiryWarnings(options.expiryWarnings), []),
    retryBaseMs,
    retryMaxMs,
    startupTimeoutMs: problems.check(() => timerMs('startupTimeoutMs', options.startupTimeoutMs, 5000, 0), 0),
    stateFile,
    stateMac: stateFile === undefined || client === undefined ? undefined : (data: string) => client.localMac('state-file', data),
    store: isLicenseStore(store) ? store : undefined,
    storeMac: (data: string) => (client as MotherClient).localMac('license-store', data),
    syncIntervalMs: problems.check(() => timerMs('syncIntervalMs', options.syncIntervalMs, 30_000, 50), 30_000),
    lockStatus: problems.check(() => validLockStatus(options.lockStatus), 503),
    retryAfterSeconds: problems.check(() => positiveInteger('retryAfterSeconds', options.retryAfterSeconds, 300), 300),
    lockView: problems.check(() => optionalString('lockView', options.lockView, 'Pass the name of a view, such as "locked".'), undefined),
    apiPrefix: problems.check(() => validApiPrefix(options.apiPrefix), undefined),
    isAllowed: problems.check(
      () => createAllowMatcher(options.allow, onPredicateError),
      () => false,
    ),
    defaults: {
      name: problems.check(() => optionalString('defaultName', options.defaultName, 'Pass a display name.'), undefined) ?? 'Panel',
      color: problems.check(() => validColor(options.defaultColor), '#334155'),
    },
    publicMessage: problems.check(
      () => publicMessageFrom(options.publicMessage, logger),
      () => '',
    ),
    supportContact: problems.check(() => supportContactFrom(options.supportContact), undefined),
    domains: resolveDomainPolicy(options, problems),
    panels,
    now: problems.check(() => optionalFunction<() => number>('now', options.now), undefined) ?? Date.now,
    random: problems.check(() => optionalFunction<() => number>('random', options.random), undefined) ?? Math.random,
    logger,
    telemetry: new GuardTelemetry(),
    tracing: resolveTracing(options.tracing, problems),
  };
  problems.throwIfAny('licenseGuard');
  return { client: client as MotherClient, ...config };
}

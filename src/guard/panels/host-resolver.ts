// Host → panel credentials, through the user's resolver: at most one call per host per TTL
// (concurrent first requests share it), bounded by a timeout, unknown hosts remembered briefly.
import { LRUCache } from 'lru-cache';
import { PanelHostError } from '../../errors.js';
import { describeError } from '../../logger.js';
import { HostsByPanel } from './hosts-by-panel.js';
import type { NewHostGate } from './new-host-gate.js';
import type { ResolverFailure } from './resolver-reports.js';

export interface PanelCredentials {
  apiKey: string;
  apiSecret: string;
  /** The mother of this panel, when it is not the guard's `baseUrl` (the contract has several). */
  baseUrl?: string | undefined;
  /**
   * Your own id of this panel (a tenant id): requests of its hosts get it as `res.locals.panel`,
   * so an upload route can pass it to `outbox.enqueue(release, { panel })` without a second lookup.
   */
  panel?: string | undefined;
}

/**
 * A known host: its panel's credentials and the key its runtime is kept under (the panel id and
 * a print of the secret: the same key with another secret is another panel, so one host's wrong
 * secret never acts for another host, and a rotated secret takes effect). Computed once, when
 * resolved; an unchanged answer keeps the same object (one per host, however often it is asked).
 */
export interface PanelResolution {
  kind: 'panel';
  credentials: PanelCredentials;
  runtimeKey: string;
  /** After this (epoch ms) the host is asked again, in the background. */
  freshUntil: number;
}

/** `busy`: a new host over the process-wide bound on first calls (answered 503, nothing kept). */
export type Resolution = PanelResolution | { kind: 'unknown' } | { kind: 'busy' };

export interface HostResolverOptions {
  resolve: (host: string) => PanelCredentials | null | undefined | Promise<PanelCredentials | null | undefined>;
  /** Hosts with a panel remembered (least recently used forgotten first). */
  max: number;
  /** Hosts without one remembered, apart (a flood of these never pushes a known host out). */
  unknownMax: number;
  resolveTtlMs: number;
  unknownTtlMs: number;
  timeoutMs: number;
  /** The key of the panel these credentials belong to; throws when they cannot be used (a bad key). */
  runtimeKeyOf: (credentials: PanelCredentials) => string;
  now: () => number;
  /** The bound on first calls (hosts with no answer yet, known or not). */
  gate: NewHostGate;
  /** A failure for a host: the error (with the host) and what went wrong without it. */
  onFailure: (kind: ResolverFailure, error: Error, detail: string) => void;
  /**
   * Hosts served before a restart (known-hosts.ts): their first calls are not refused by `gate`
   * but wait for one of `listedConcurrency` places. @default none
   */
  listed?: { has(host: string): boolean; add(host: string): void; remove(host: string): void; readonly loaded: Promise<void> };
  listedConcurrency?: number;
  /**
   * A host's answer moved it to another panel runtime (a rotated secret): the old one must stop
   * checking at once, or it would keep checking with the old secret, and lock, under the same
   * panel id.
   */
  onMoved?: (runtimeKey: string) => void;
}

export interface HostResolver {
  /** A remembered answer, without I/O: what the request path uses. */
  cached(host: string): Resolution | undefined;
  /** Asks the resolver (once per host at a time) and remembers the answer. */
  resolve(host: string): Promise<Resolution>;
  /** Up to 100 hosts remembered for a panel: its id (as events name it) or your id from the resolver. */
  hostsOf(panel: string): string[];
  /** Whether any host remembered still uses the panel runtime kept under `runtimeKey`. */
  inUse(runtimeKey: string): boolean;
  /** No more calls to the resolver, not even background refreshes. */
  close(): void;
}

const MAX_HOSTS_SHOWN = 100;

const UNKNOWN: Resolution = { kind: 'unknown' };
const BUSY: Resolution = { kind: 'busy' };

const sameCredentials = (a: PanelCredentials, b: PanelCredentials) =>
  a.apiKey === b.apiKey && a.apiSecret === b.apiSecret && a.baseUrl === b.baseUrl && a.panel === b.panel;

const optionalString = (value: unknown) => value === undefined || (typeof value === 'string' && value !== '');

/** An error's class and code (`TypeError`, `Error 22P02`), never its message. */
function kindOf(error: unknown): string {
  const name = error instanceof Error ? error.name : typeof error;
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[A-Za-z0-9_]{1,20}$/.test(code) ? `${name} ${code}` : name;
}

function credentialsFrom(value: unknown): PanelCredentials | undefined {
  const given = value as Partial<PanelCredentials> | null | undefined;
  if (typeof given?.apiKey !== 'string' || given.apiKey === '' || typeof given.apiSecret !== 'string' || given.apiSecret === '') return undefined;
  if (!optionalString(given.baseUrl) || !optionalString(given.panel)) return undefined;
  const { apiKey, apiSecret, baseUrl, panel } = given;
  return { apiKey, apiSecret, ...(baseUrl === undefined ? {} : { baseUrl }), ...(panel === undefined ? {} : { panel }) };
}

export function createHostResolver(options: HostResolverOptions): HostResolver {
  // Capped by count; an entry is a host of at most 253 characters and its answer. Unknown hosts
  // have a cache of their own (host → when to ask again), so a flood of junk Host headers never
  // pushes a known host out.
  const byPanel = new HostsByPanel();
  const answers = new LRUCache<string, PanelResolution>({
    max: options.max,
    // Evicted, deleted or replaced by another answer: no longer one of its panel's hosts.
    dispose: (gone, host) => byPanel.remove(host, gone.runtimeKey, gone.credentials.panel),
  });
  const unknown = new LRUCache<string, number>({ max: options.unknownMax });
  let closed = false;
  const asking = new Map<string, Promise<Resolution>>();
  const listedTurns = limited(options.listedConcurrency ?? 32);
  // Until the list of hosts served before is read (one store call, bounded), a first call waits
  // for it: a restart's first requests are exactly those hosts.
  let listedLoading = options.listed !== undefined;
  void options.listed?.loaded.then(() => {
    listedLoading = false;
  });

  function rememberPanel(host: string, credentials: PanelCredentials, runtimeKey: string, ttlMs: number): Resolution {
    const freshUntil = options.now() + ttlMs;
    unknown.delete(host);
    const previous = answers.peek(host);
    if (previous !== undefined && previous.runtimeKey === runtimeKey && sameCredentials(previous.credentials, credentials)) {
      previous.freshUntil = freshUntil;
      return previous;
    }
    const resolution: PanelResolution = { kind: 'panel', credentials, runtimeKey, freshUntil };
    answers.set(host, resolution);
    byPanel.add(host, runtimeKey, credentials.panel);
    if (previous !== undefined && previous.runtimeKey !== runtimeKey) options.onMoved?.(previous.runtimeKey);
    return resolution;
  }

  function remember(host: string, resolution: Resolution, ttlMs: number): Resolution {
    if (resolution.kind === 'panel') return rememberPanel(host, resolution.credentials, resolution.runtimeKey, ttlMs);
    unknown.set(host, options.now() + ttlMs);
    answers.delete(host);
    return resolution;
  }

  /** A definite answer that the host has no usable panel (deprovisioned, or bad credentials). */
  function refuse(host: string, why: string): Resolution {
    options.onFailure(
      'unusable',
      new PanelHostError('RESOLVE_FAILED', `panel-license-guard: the panels resolver returned ${why} for ${host}`, { host }),
      `returned ${why}`,
    );
    return remember(host, UNKNOWN, options.unknownTtlMs);
  }

  async function ask(host: string): Promise<Resolution> {
    let timer: NodeJS.Timeout | undefined;
    const timedOutError = new Error('timed out');
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(timedOutError), options.timeoutMs);
      timer.unref();
    });
    try {
      const value = await Promise.race([Promise.resolve().then(() => options.resolve(host)), timeout]);
      clearTimeout(timer);
      if (value === null || value === undefined) {
        options.listed?.remove(host);
        return remember(host, UNKNOWN, options.unknownTtlMs);
      }
      const credentials = credentialsFrom(value);
      if (!credentials) return refuse(host, 'no { apiKey, apiSecret } strings (and optional non-empty baseUrl, panel)');
      let runtimeKey: string;
      try {
        runtimeKey = options.runtimeKeyOf(credentials);
      } catch (error) {
        return refuse(host, `unusable credentials (${describeError(error)})`);
      }
      options.listed?.add(host);
      return rememberPanel(host, credentials, runtimeKey, options.resolveTtlMs);
    } catch (error) {
      // Never a secret in the message: only what went wrong and for which host.
      const timedOut = error === timedOutError;
      const detail = timedOut ? `did not answer within ${options.timeoutMs} ms` : `threw: ${describeError(error)}`;
      const failure = new PanelHostError('RESOLVE_FAILED', `panel-license-guard: the panels resolver ${detail} for ${host}`, { host, cause: error });
      // The summary line names the kind of error only: a driver's message may quote the host.
      options.onFailure(timedOut ? 'timedOut' : 'threw', failure, timedOut ? detail : `threw ${kindOf(error)}`);
      // A host that had a panel keeps it while the resolver fails (asked again after unknownTtlMs).
      const previous = answers.peek(host);
      return remember(host, previous ?? UNKNOWN, options.unknownTtlMs);
    } finally {
      clearTimeout(timer);
    }
  }

  /** `waited`: a first call that waited for the list of hosts served before (it queues for a place, never refused for one). */
  function resolve(host: string, waited = false): Promise<Resolution> {
    if (closed) return Promise.resolve(answers.peek(host) ?? UNKNOWN);
    let pending = asking.get(host);
    if (!pending) {
      // A first call (no answer yet) is bounded process-wide; a known host's refresh is not
      // (one per host per TTL, and the hosts remembered are capped).
      const first = answers.peek(host) === undefined;
      if (first && listedLoading) {
        const afterLoading: Promise<Resolution> = (options.listed as NonNullable<HostResolverOptions['listed']>).loaded.then(() => {
          if (asking.get(host) === afterLoading) asking.delete(host);
          return resolve(host, true);
        });
        asking.set(host, afterLoading);
        return afterLoading;
      }
      // A host served before the restart waits its turn rather than being refused.
      const listed = first && options.listed?.has(host) === true;
      // One that waited for the list (released with all the others that did) still takes a token
      // of the rate, but queues for a place rather than being refused for one.
      if (first && !listed && !(waited ? options.gate.tryTakeToken() : options.gate.tryStart())) return Promise.resolve(BUSY);
      const queued = listed || (first && waited);
      pending = (queued ? listedTurns(() => ask(host)) : ask(host)).finally(() => {
        asking.delete(host);
        if (first && !queued) options.gate.finished();
      });
      asking.set(host, pending);
    }
    return pending;
  }

  return {
    /**
     * A known panel past its TTL is still answered (and asked again in the background): requests
     * never wait for the resolver once a host is known. An expired unknown host is asked again.
     */
    cached(host) {
      const known = answers.get(host);
      if (known === undefined) {
        const askAgainAt = unknown.get(host);
        return askAgainAt !== undefined && askAgainAt > options.now() ? UNKNOWN : undefined;
      }
      if (known.freshUntil <= options.now() && !closed) void resolve(host);
      return known;
    },
    resolve,
    hostsOf(panel) {
      return byPanel.of(panel, MAX_HOSTS_SHOWN);
    },
    inUse(runtimeKey) {
      for (const resolution of answers.values()) if (resolution.runtimeKey === runtimeKey) return true;
      return false;
    },
    close() {
      closed = true;
    },
  };
}

/** Runs at most `concurrency` of the works given at once; the others wait, first come first. */
function limited(concurrency: number) {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async <T>(work: () => Promise<T>): Promise<T> => {
    if (running >= concurrency) await new Promise<void>((resolve) => waiting.push(resolve));
    running++;
    try {
      return await work();
    } finally {
      running--;
      waiting.shift()?.();
    }
  };
}

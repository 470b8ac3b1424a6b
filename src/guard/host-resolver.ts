// Host → panel credentials, through the user's resolver: at most one call per host per TTL
// (concurrent first requests share it), bounded by a timeout, unknown hosts remembered briefly.
import { LRUCache } from 'lru-cache';
import { describeError } from '../logger.js';

export interface PanelCredentials {
  apiKey: string;
  apiSecret: string;
}

/** A known host: its panel's credentials, and that panel's id (computed once, when resolved). */
export type Resolution = { kind: 'panel'; credentials: PanelCredentials; panelId: string } | { kind: 'unknown' };

export interface HostResolverOptions {
  resolve: (host: string) => PanelCredentials | null | undefined | Promise<PanelCredentials | null | undefined>;
  /** Hosts remembered (least recently used forgotten first). */
  max: number;
  resolveTtlMs: number;
  unknownTtlMs: number;
  timeoutMs: number;
  /** The id of the panel these credentials belong to. */
  idOf: (credentials: PanelCredentials) => string;
  onError: (error: Error) => void;
}

export interface HostResolver {
  /** A remembered answer, without I/O: what the request path uses. */
  cached(host: string): Resolution | undefined;
  /** Asks the resolver (once per host at a time) and remembers the answer. */
  resolve(host: string): Promise<Resolution>;
}

const UNKNOWN: Resolution = { kind: 'unknown' };

function credentialsFrom(value: unknown): PanelCredentials | undefined {
  const given = value as Partial<PanelCredentials> | null | undefined;
  if (typeof given?.apiKey === 'string' && given.apiKey !== '' && typeof given.apiSecret === 'string' && given.apiSecret !== '')
    return { apiKey: given.apiKey, apiSecret: given.apiSecret };
  return undefined;
}

export function createHostResolver(options: HostResolverOptions): HostResolver {
  const answers = new LRUCache<string, Resolution>({ max: options.max, ttl: options.resolveTtlMs, ttlAutopurge: false });
  const asking = new Map<string, Promise<Resolution>>();

  async function ask(host: string): Promise<Resolution> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the panels resolver did not answer for ${host} within ${options.timeoutMs} ms`)), options.timeoutMs);
    });
    try {
      const value = await Promise.race([Promise.resolve().then(() => options.resolve(host)), timeout]);
      if (value === null || value === undefined) {
        answers.set(host, UNKNOWN, { ttl: options.unknownTtlMs });
        return UNKNOWN;
      }
      const credentials = credentialsFrom(value);
      if (!credentials) throw new Error(`the panels resolver returned no { apiKey, apiSecret } strings for ${host}`);
      const resolution: Resolution = { kind: 'panel', credentials, panelId: options.idOf(credentials) };
      answers.set(host, resolution);
      return resolution;
    } catch (error) {
      // Never a secret in the message: only what went wrong and for which host.
      options.onError(new Error(`panel-license-guard: ${describeError(error)}`, { cause: error }));
      answers.set(host, UNKNOWN, { ttl: options.unknownTtlMs });
      return UNKNOWN;
    } finally {
      clearTimeout(timer);
    }
  }

  return {
    cached: (host) => answers.get(host),
    resolve(host) {
      let pending = asking.get(host);
      if (!pending) {
        pending = ask(host).finally(() => asking.delete(host));
        asking.set(host, pending);
      }
      return pending;
    },
  };
}

// redisLicenseStore(): the LicenseStore of cluster mode on a Redis client the host app owns
// (node-redis 5 or ioredis, one server or a Redis Cluster: redis-connection.ts).
import { OptionProblems, optionError, optionNames, positiveInteger, rejectUnknownOptions } from '../../options.js';
import type { LicenseStore } from '../license-store.js';
import { ACCEPTED_CLIENTS, type RedisClient, type RedisConnection, type RedisSubscriber, redisConnection } from './redis-connection.js';

export interface RedisLicenseStoreOptions {
  /**
   * A connected Redis client: node-redis 5 (`createClient()` or `createCluster()`, connected) or
   * ioredis (`new Redis()` or `new Redis.Cluster()`). Not closed by the store. Any other object is
   * refused at construction.
   */
  client: RedisClient;
  /** Prefix of every key and channel, so several panels or environments can share one Redis. @default 'panel-license:' */
  prefix?: string;
  /** Longest wait for one Redis command before the guard treats the store as unavailable. @default 1000 */
  commandTimeoutMs?: number;
}

// Stores the value, then announces it (one script, one round trip): a subscriber never hears of a
// value that is not in Redis yet. If PUBLISH is refused the SET stays; the periodic read covers it.
const PUBLISH_SCRIPT = "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]); redis.call('PUBLISH', KEYS[1], ARGV[1]); return 1";
// Reads at most maxBytes + 1 bytes, so an oversized value never crosses the network whole (the
// guard refuses what is longer than its cap).
const GET_SCRIPT = "if redis.call('EXISTS', KEYS[1]) == 0 then return false end return redis.call('GETRANGE', KEYS[1], 0, ARGV[1])";
// SET NX that says who holds the key when it was taken (works on every Redis version, unlike SET NX
// GET), reading at most maxBytes + 1 bytes of the holder, as GET_SCRIPT does.
const ACQUIRE_SCRIPT =
  "if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('GETRANGE', KEYS[1], 0, ARGV[3]) end redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return false";

/**
 * A LicenseStore on Redis. Commands fail fast while the client is not connected (node-redis
 * would otherwise queue them until Redis comes back) and after `commandTimeoutMs`, so a Redis
 * outage turns into "check the mother yourself", never into a stalled guard.
 */
export function redisLicenseStore(options: RedisLicenseStoreOptions): LicenseStore {
  if (typeof options !== 'object' || options === null)
    throw optionError('options', 'must be an object', 'Pass { client } with a connected node-redis 5 or ioredis client.');
  const problems = new OptionProblems();
  rejectUnknownOptions('redisLicenseStore', options, optionNames<RedisLicenseStoreOptions>({ client: true, prefix: true, commandTimeoutMs: true }), problems);
  const connection = redisConnection(options.client);
  if (!connection) problems.add(optionError('client', 'is not a Redis client this store can use', ACCEPTED_CLIENTS));
  // ioredis prefixes the keys of commands but not the channels of SUBSCRIBE: changes published
  // under a prefixed key would never reach the subscribers.
  else if (keyPrefixOf(options.client))
    problems.add(
      optionError(
        'client',
        `is an ioredis client with keyPrefix ${JSON.stringify(keyPrefixOf(options.client))}`,
        "Leave keyPrefix out of this client and pass it as the store's `prefix` option.",
      ),
    );
  const prefix = options.prefix ?? 'panel-license:';
  if (typeof prefix !== 'string' || prefix.length > 200 || /[\s\p{Cc}]/u.test(prefix))
    problems.add(optionError('prefix', 'must be a string of at most 200 characters without spaces or control characters', 'Pass e.g. "prod:panel-license:".'));
  const timeoutMs = problems.check(() => positiveInteger('commandTimeoutMs', options.commandTimeoutMs, 1000, 1, 60_000), 1000);
  problems.throwIfAny('redisLicenseStore');
  const redis = connection as RedisConnection;

  function command<T>(args: string[]): Promise<T> {
    if (!redis.ready()) return Promise.reject(new Error('Redis is not connected.'));
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`Redis did not answer ${args[0]} within ${timeoutMs} ms.`)), timeoutMs);
    });
    // Every command here is an EVAL of one key (args[3]), so a Redis Cluster routes it to that key's node.
    return Promise.race([redis.command(args[3] as string, args) as Promise<T>, timeout]).finally(() => clearTimeout(timer));
  }

  const ms = (value: number) => String(Math.max(1, Math.floor(value)));
  interface SharedSubscriber {
    connection: RedisSubscriber;
    connected: Promise<RedisSubscriber>;
    channels: Map<string, Set<(message: string) => void>>;
    subscribed: Map<string, Promise<unknown>>;
  }
  /** One subscriber connection for every key (many panels share it); it goes with the last subscription. */
  let subscriber: SharedSubscriber | undefined;
  function sharedSubscriber(): SharedSubscriber {
    if (subscriber) return subscriber;
    const connection = redis.subscriber();
    const entry: SharedSubscriber = { connection, connected: Promise.resolve(connection), channels: new Map(), subscribed: new Map() };
    // A connection that never came up is not handed to later subscriptions.
    entry.connected = connection.connected.then(
      () => connection,
      (error: unknown) => {
        if (subscriber === entry) subscriber = undefined;
        throw error;
      },
    );
    subscriber = entry;
    return entry;
  }
  return {
    kind: 'redis',
    get: (key, maxBytes) => command<string | null>(['EVAL', GET_SCRIPT, '1', prefix + key, String(maxBytes)]),
    async publish(key, value, ttlMs) {
      await command(['EVAL', PUBLISH_SCRIPT, '1', prefix + key, value, ms(ttlMs)]);
    },
    acquire: (key, value, ttlMs, maxBytes) => command<string | null>(['EVAL', ACQUIRE_SCRIPT, '1', prefix + key, value, ms(ttlMs), String(maxBytes)]),
    subscribe(key, listener) {
      const channel = prefix + key;
      const shared = sharedSubscriber();
      // Listeners are counted per channel here: the channel is subscribed once and unsubscribed
      // only when its last listener goes, so closing one subscription never silences another.
      let listeners = shared.channels.get(channel);
      if (!listeners) {
        const set = new Set<(message: string) => void>();
        listeners = set;
        shared.channels.set(channel, set);
        // Both clients subscribe again by themselves after a reconnect; messages published
        // meanwhile are lost, which the guard's re-reads make up for.
        shared.subscribed.set(
          channel,
          shared.connected.then((connection) =>
            connection.subscribe(channel, (message) => {
              for (const each of [...set]) each(message);
            }),
          ),
        );
      }
      const own = (message: string) => listener(message);
      listeners.add(own);
      const ready = (shared.subscribed.get(channel) as Promise<unknown>).then(() => {});
      let closed = false;
      return {
        ready,
        async close() {
          if (closed) return;
          closed = true;
          const set = shared.channels.get(channel);
          set?.delete(own);
          if (set && set.size === 0) {
            shared.channels.delete(channel);
            const subscribed = shared.subscribed.get(channel);
            shared.subscribed.delete(channel);
            if (shared.channels.size > 0)
              await subscribed
                ?.then(() => shared.connected)
                .then((connection) => connection.unsubscribe(channel))
                .catch(() => {});
          }
          if (shared.channels.size > 0) return;
          // The last subscription: the connection goes too.
          if (subscriber === shared) subscriber = undefined;
          try {
            shared.connection.destroy();
          } catch {
            // Already closed (it never connected): nothing is left to stop.
          }
        },
      };
    },
  };
}

/** An ioredis client's `keyPrefix` option (a Cluster keeps it in its options, or in its redisOptions). */
function keyPrefixOf(client: unknown): string | undefined {
  const options = (client as { options?: { keyPrefix?: unknown; redisOptions?: { keyPrefix?: unknown } } } | null)?.options;
  const prefix = options?.keyPrefix ?? options?.redisOptions?.keyPrefix;
  // ioredis takes a Buffer too (and prefixes commands with it, not SUBSCRIBE).
  if (Buffer.isBuffer(prefix) && prefix.length > 0) return prefix.toString();
  return typeof prefix === 'string' && prefix !== '' ? prefix : undefined;
}

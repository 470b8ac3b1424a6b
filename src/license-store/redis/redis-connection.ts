// The Redis clients redisLicenseStore() accepts, behind one small interface: node-redis 5 (a
// client or a cluster) and ioredis (a Redis or a Cluster). Anything else is refused by name,
// since a client that merely looks right (ioredis has sendCommand() and duplicate() too) would
// otherwise accept every call and share nothing.

/** The part of a node-redis 5 client (`createClient()` from `redis`) the store uses. */
export interface NodeRedisClient {
  readonly isReady: boolean;
  sendCommand(args: string[]): Promise<unknown>;
  /** A second connection for SUBSCRIBE (a subscribed connection can send nothing else). */
  duplicate(): NodeRedisSubscriber;
  on(event: 'error', listener: (error: unknown) => void): unknown;
}

/** The part of a node-redis 5 cluster (`createCluster()` from `redis`) the store uses. */
export interface NodeRedisCluster {
  readonly isOpen: boolean;
  readonly masters: readonly unknown[];
  sendCommand(firstKey: string | undefined, isReadonly: boolean | undefined, args: string[]): Promise<unknown>;
  duplicate(): NodeRedisSubscriber;
  on(event: 'error', listener: (error: unknown) => void): unknown;
}

/** A node-redis connection (or cluster) used for SUBSCRIBE only. */
export interface NodeRedisSubscriber {
  connect(): Promise<unknown>;
  on(event: 'error', listener: (error: unknown) => void): unknown;
  subscribe(channel: string, listener: (message: string) => void): Promise<unknown>;
  unsubscribe(channel: string): Promise<unknown>;
  destroy(): void;
}

/** The part of an ioredis client (`new Redis()` or `new Redis.Cluster()` from `ioredis`) the store uses. */
export interface IORedisClient {
  readonly status: string;
  readonly isCluster: boolean;
  call(command: string, ...args: string[]): Promise<unknown>;
  /** A copy with the same options (a Redis takes option overrides, a Cluster startup nodes first). */
  duplicate(...args: never[]): unknown;
  /** A cluster's node connections. */
  nodes?(role: 'master'): IORedisClient[];
  subscribe(channel: string): Promise<unknown>;
  unsubscribe(channel: string): Promise<unknown>;
  connect(): Promise<unknown>;
  disconnect(): void;
  once(event: 'ready' | 'end', listener: () => void): unknown;
  on(event: 'error', listener: (error: unknown) => void): unknown;
  on(event: 'message', listener: (channel: string, message: string) => void): unknown;
}

/** Any client redisLicenseStore() accepts. */
export type RedisClient = NodeRedisClient | NodeRedisCluster | IORedisClient;

/** What the store needs of a client, whichever it is. */
export interface RedisConnection {
  /** 'node-redis', 'node-redis cluster', 'ioredis' or 'ioredis cluster' (for messages). */
  readonly kind: string;
  /** False while the client is not connected: commands fail at once rather than queue. */
  ready(): boolean;
  /** Sends one command whose only key is `key` (a cluster routes it by that key). */
  command(key: string, args: string[]): Promise<unknown>;
  /** A connection of its own for SUBSCRIBE; `connected` settles once it is up. */
  subscriber(): RedisSubscriber;
}

export interface RedisSubscriber {
  readonly connected: Promise<void>;
  subscribe(channel: string, listener: (message: string) => void): Promise<unknown>;
  unsubscribe(channel: string): Promise<unknown>;
  destroy(): void;
}

/** What the option error says is accepted. */
export const ACCEPTED_CLIENTS =
  "Pass a connected client: node-redis 5 (`await createClient({ url }).connect()` or `await createCluster({ rootNodes }).connect()` from 'redis') or ioredis (`new Redis(url)` or `new Redis.Cluster(nodes)` from 'ioredis').";

const ignore = () => {};
const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null;
const hasFunctions = (value: Record<string, unknown>, names: string[]) => names.every((name) => typeof value[name] === 'function');

/** The connection over `client`, or undefined when it is no client the store can use. */
export function redisConnection(client: unknown): RedisConnection | undefined {
  if (!isObject(client) || typeof client.on !== 'function') return undefined;
  if (typeof client.isCluster === 'boolean' && typeof client.status === 'string' && hasFunctions(client, ['call', 'duplicate', 'subscribe', 'disconnect']))
    return ioredisConnection(client as unknown as IORedisClient);
  if (!hasFunctions(client, ['sendCommand', 'duplicate'])) return undefined;
  if (typeof client.isReady === 'boolean') {
    const node = client as unknown as NodeRedisClient;
    return nodeRedisConnection(
      'node-redis',
      () => node.isReady,
      (_key, args) => node.sendCommand(args),
      node,
    );
  }
  if (typeof client.isOpen === 'boolean' && Array.isArray(client.masters)) {
    const cluster = client as unknown as NodeRedisCluster;
    return nodeRedisConnection(
      'node-redis cluster',
      () => cluster.isOpen,
      (key, args) => cluster.sendCommand(key, false, args),
      cluster,
    );
  }
  return undefined;
}

function nodeRedisConnection(
  kind: string,
  ready: () => boolean,
  command: (key: string, args: string[]) => Promise<unknown>,
  client: NodeRedisClient | NodeRedisCluster,
): RedisConnection {
  // node-redis throws an 'error' event that has no listener (and ends the process); the guard
  // reports failures of its own commands, so the events only need to be absorbed here.
  client.on('error', ignore);
  return {
    kind,
    ready,
    command,
    subscriber() {
      const connection = client.duplicate();
      connection.on('error', ignore);
      return {
        // node-redis subscribes again by itself after a reconnect.
        connected: connection.connect().then(ignore),
        subscribe: (channel, listener) => connection.subscribe(channel, listener),
        unsubscribe: (channel) => connection.unsubscribe(channel),
        destroy: () => connection.destroy(),
      };
    },
  };
}

function ioredisConnection(client: IORedisClient): RedisConnection {
  // ioredis prints an unhandled 'error' event to the console; failures reach the guard as rejections.
  client.on('error', ignore);
  // A client made with lazyConnect waits for its first command, which the store never sends
  // while the client is not ready: connect it.
  if (client.status === 'wait') client.connect().catch(ignore);
  return {
    kind: client.isCluster ? 'ioredis cluster' : 'ioredis',
    ready: () => client.status === 'ready',
    // ioredis finds the key of EVAL itself (from its numkeys), so a cluster routes it to its slot.
    command: (_key, args) => client.call(args[0] as string, ...args.slice(1)),
    subscriber() {
      const listeners = new Map<string, (message: string) => void>();
      let connection: IORedisClient | undefined;
      let destroyed = false;
      const opened = subscriberOf(
        client,
        (created) => {
          connection = created;
          created.on('error', ignore);
          created.on('message', (channel, message) => listeners.get(channel)?.(message));
          if (destroyed) created.disconnect();
        },
        () => destroyed,
      );
      opened.catch(ignore);
      return {
        connected: opened.then(ignore),
        async subscribe(channel, listener) {
          listeners.set(channel, listener);
          return (await opened).subscribe(channel);
        },
        async unsubscribe(channel) {
          listeners.delete(channel);
          return (await opened).unsubscribe(channel);
        },
        destroy() {
          // Also while it is still connecting: a copy retrying a Redis that never answers would keep the process alive.
          destroyed = true;
          connection?.disconnect();
        },
      };
    },
  };
}

/**
 * A connection of its own for SUBSCRIBE, once it is up. On a cluster, a plain connection to one
 * of its masters: Redis Cluster carries every PUBLISH to every node, so one node hears them all,
 * and ioredis's own cluster subscriber was seen to drop a SUBSCRIBE now and then (tested). It
 * reconnects to that node by itself; were the node gone for good, changes still arrive through
 * the guard's periodic re-reads.
 */
async function subscriberOf(client: IORedisClient, created: (connection: IORedisClient) => void, destroyed: () => boolean): Promise<IORedisClient> {
  if (client.isCluster && client.status !== 'ready') await new Promise<void>((resolve) => client.once('ready', resolve));
  if (destroyed()) throw new Error('the subscription was closed before it connected.');
  const [node] = client.isCluster ? (client.nodes?.('master') ?? []) : [client];
  if (!node) throw new Error('the Redis Cluster has no master to subscribe through.');
  // A cluster's node connections do not reconnect by themselves (the cluster does it for them): ours must.
  const copy = node.duplicate as (override?: object) => IORedisClient;
  const connection = copy.call(node, client.isCluster ? { retryStrategy: (times: number) => Math.min(times * 100, 2000), lazyConnect: false } : undefined);
  created(connection);
  if (connection.status === 'ready') return connection;
  // The copy connects by itself (or, made with lazyConnect, when told to); SUBSCRIBE waits for it,
  // so that a client made with enableOfflineQueue: false is not refused while it connects.
  await new Promise<void>((resolve, reject) => {
    connection.once('ready', resolve);
    connection.once('end', () => reject(new Error('the subscriber connection was closed.')));
    if (connection.status === 'wait') connection.connect().catch(reject);
  });
  return connection;
}

// The Redis clients cluster mode supports, as the tests connect them: every cluster suite runs once
// per client (node-redis 5 and ioredis), against the same real servers.
import { Redis as IORedis, Cluster as IORedisCluster } from 'ioredis';
import { createClient, createCluster } from 'redis';
import type { RedisClient } from '../../src/redis.js';

export interface TestRedisClient {
  /** What the client is, for test names. */
  readonly name: 'node-redis' | 'ioredis';
  /** A connected client of one server at `url`, retrying every 100 ms while it is away. */
  connect(url: string, connectionName?: string): Promise<Connected>;
  /** A connected client of a Redis Cluster that `nodes` (host:port) belong to. */
  connectCluster(nodes: string[]): Promise<Connected>;
}

export interface Connected {
  client: RedisClient;
  /** Sends one raw command (to the node of `key` in a cluster). */
  command(args: string[], key?: string): Promise<unknown>;
  /** True while connected. */
  ready(): boolean;
  close(): Promise<void>;
}

const ignore = () => {};

const nodeRedis: TestRedisClient = {
  name: 'node-redis',
  async connect(url, connectionName) {
    const client = createClient({ url, ...(connectionName === undefined ? {} : { name: connectionName }), socket: { reconnectStrategy: () => 100 } });
    client.on('error', ignore);
    await client.connect();
    return { client, command: (args) => client.sendCommand(args), ready: () => client.isReady, close: () => client.close().catch(ignore) };
  },
  async connectCluster(nodes) {
    const cluster = createCluster({ rootNodes: nodes.map((node) => ({ url: `redis://${node}` })), defaults: { socket: { reconnectStrategy: () => 100 } } });
    cluster.on('error', ignore);
    await cluster.connect();
    return {
      client: cluster,
      command: (args, key) => cluster.sendCommand(key, false, args),
      ready: () => cluster.isOpen,
      close: () => cluster.close().catch(ignore),
    };
  },
};

const ioredis: TestRedisClient = {
  name: 'ioredis',
  async connect(url, connectionName) {
    const client = new IORedis(url, { connectionName, retryStrategy: () => 100, lazyConnect: true });
    client.on('error', ignore);
    await client.connect();
    return {
      client,
      command: (args) => client.call(args[0] as string, ...args.slice(1)),
      ready: () => client.status === 'ready',
      close: async () => client.disconnect(),
    };
  },
  async connectCluster(nodes) {
    const startupNodes = nodes.map((node) => ({ host: node.split(':')[0], port: Number(node.split(':')[1]) }));
    const cluster = new IORedisCluster(startupNodes, { lazyConnect: true, clusterRetryStrategy: () => 100 });
    cluster.on('error', ignore);
    await cluster.connect();
    return {
      client: cluster,
      command: (args) => cluster.call(args[0] as string, ...args.slice(1)),
      ready: () => cluster.status === 'ready',
      close: async () => cluster.disconnect(),
    };
  },
};

export const REDIS_CLIENTS: readonly TestRedisClient[] = [nodeRedis, ioredis];

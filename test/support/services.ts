// Real services for integration tests: Redis (and its own throwaway servers), skipped loudly when absent.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { mysqlAnswers as answersMysql, postgresAnswers as answersPostgres, redisAnswers as answersRedis } from '../../bench/services.js';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/** True when a TCP service answers a Redis PING at `url` within a second. */
export const redisAnswers = (url: string = REDIS_URL) => answersRedis(url);

/**
 * Whether tests needing `service` can run. Outside CI a missing service skips them with a clear
 * line on stderr; with CI=true it fails the run instead, so CI never passes by skipping.
 */
export function serviceAvailable(service: string, address: string, answers: boolean): boolean {
  if (answers) return true;
  if (process.env.CI === 'true') throw new Error(`${service} at ${address} did not answer, and CI=true requires it. Start it (see .ci/run).`);
  process.stderr.write(`\nSKIPPED: ${service} at ${address} did not answer; the tests that need it were skipped.\n\n`);
  return false;
}

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A redis-server of the test's own on a free port (to stop and start it), nothing kept on disk. */
export class OwnRedis {
  private process: ChildProcess | undefined;
  constructor(
    readonly port: number,
    /** More redis-server arguments (a cluster node's). */
    private readonly extraArgs: string[] = [],
  ) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  static async create(): Promise<OwnRedis> {
    const redis = new OwnRedis(await freePort());
    await redis.start();
    return redis;
  }

  async start(): Promise<void> {
    this.process = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...this.extraArgs], {
      stdio: 'ignore',
    });
    const deadline = Date.now() + 10_000;
    while (!(await redisAnswers(this.url))) {
      if (Date.now() > deadline) throw new Error(`redis-server did not start on port ${this.port}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** Freezes the server (SIGSTOP): connections stay open and look connected; nothing answers. */
  pause(): void {
    this.process?.kill('SIGSTOP');
  }

  resume(): void {
    this.process?.kill('SIGCONT');
  }

  async stop(): Promise<void> {
    this.process?.kill('SIGCONT');
    const child = this.process;
    this.process = undefined;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }
}

export const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** True when PostgreSQL at `url` accepts a connection and a query within two seconds. */
export const postgresAnswers = (url: string = DATABASE_URL) => answersPostgres(url);

export const MYSQL_URL = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

/** True when MySQL or MariaDB at `url` accepts a connection and a query within two seconds. */
export const mysqlAnswers = (url: string = MYSQL_URL) => answersMysql(url);

/** A free port whose cluster bus port (port + 10000) is free too. */
async function freeClusterPort(): Promise<number> {
  for (;;) {
    const port = await freePort();
    if (port + 10_000 > 65_535) continue;
    const bus = createServer();
    const free = await new Promise<boolean>((resolve) => {
      bus.once('error', () => resolve(false));
      bus.listen(port + 10_000, '127.0.0.1', () => resolve(true));
    });
    if (free) await new Promise((resolve) => bus.close(resolve));
    if (free) return port;
  }
}

/**
 * A Redis Cluster of the test's own: three masters on free ports (`--cluster-enabled yes`), joined
 * with `redis-cli --cluster create`, nothing kept on disk but the nodes' files in a temporary folder.
 */
export class OwnRedisCluster {
  private constructor(
    readonly nodes: OwnRedis[],
    private readonly folder: string,
  ) {}

  /** The masters as host:port. */
  get addresses(): string[] {
    return this.nodes.map((node) => `127.0.0.1:${node.port}`);
  }

  static async create(masters = 3): Promise<OwnRedisCluster> {
    const folder = await mkdtemp(join(tmpdir(), 'plg-redis-cluster-'));
    const nodes: OwnRedis[] = [];
    for (let i = 0; i < masters; i++) {
      const port = await freeClusterPort();
      const node = new OwnRedis(port, ['--cluster-enabled', 'yes', '--cluster-config-file', join(folder, `nodes-${port}.conf`), '--dir', folder]);
      await node.start();
      nodes.push(node);
    }
    const cluster = new OwnRedisCluster(nodes, folder);
    try {
      await run('redis-cli', ['--cluster', 'create', ...cluster.addresses, '--cluster-replicas', '0', '--cluster-yes']);
      await cluster.waitUntilServing();
    } catch (error) {
      await cluster.stop();
      throw error;
    }
    return cluster;
  }

  /** Until every node says the cluster is up (all 16384 slots served). */
  private async waitUntilServing(): Promise<void> {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const states = await Promise.all(this.nodes.map((node) => run('redis-cli', ['-p', String(node.port), 'cluster', 'info']).catch(() => '')));
      if (states.every((info) => info.includes('cluster_state:ok'))) return;
      if (Date.now() > deadline) throw new Error(`the Redis Cluster on ${this.addresses.join(', ')} did not come up`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** How many keys matching `pattern` each master holds. */
  async keysPerNode(pattern: string): Promise<number[]> {
    const lists = await Promise.all(this.nodes.map((node) => run('redis-cli', ['-p', String(node.port), '--scan', '--pattern', pattern])));
    return lists.map((list) => list.split('\n').filter(Boolean).length);
  }

  /** The fewest subscribers any of `channels` has, over all nodes (a client subscribes through one node). */
  async fewestSubscribers(channels: string[]): Promise<number> {
    const replies = await Promise.all(this.nodes.map((node) => run('redis-cli', ['-p', String(node.port), 'pubsub', 'numsub', ...channels])));
    const totals = channels.map(() => 0);
    for (const reply of replies) {
      const lines = reply.split('\n').filter(Boolean);
      for (let i = 0; i < channels.length; i++) totals[i] = (totals[i] ?? 0) + Number(lines[2 * i + 1] ?? 0);
    }
    return Math.min(...totals);
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.stop()));
    await rm(this.folder, { recursive: true, force: true });
  }
}

/** True when `command` is on the PATH. */
export function commandExists(command: string): boolean {
  return (process.env.PATH ?? '').split(delimiter).some((folder) => folder !== '' && existsSync(join(folder, command)));
}

/** Runs a command to its end; rejects with what it printed when it fails. */
function run(command: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { timeout: 20_000 }, (error, stdout, stderr) =>
      error ? reject(new Error(`${command} ${args.join(' ')}: ${stderr || error.message}`)) : resolve(stdout),
    );
  });
}

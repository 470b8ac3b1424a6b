// Real services for integration tests: Redis (and its own throwaway servers), skipped loudly when absent.
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { postgresAnswers as answersPostgres, redisAnswers as answersRedis } from '../bench/services.js';

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
  constructor(readonly port: number) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  static async create(): Promise<OwnRedis> {
    const redis = new OwnRedis(await freePort());
    await redis.start();
    return redis;
  }

  async start(): Promise<void> {
    this.process = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
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

import { type ChildProcessByStdio, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { MotherEmulator } from '../../src/emulator/emulator.js';
import { mysqlOutboxStore } from '../../src/mysql.js';
import { createReleaseOutbox } from '../../src/outbox/outbox.js';
import { postgresOutboxStore } from '../../src/postgres.js';
import { API_KEY, API_SECRET, clientFor, startEmulator, waitFor } from '../support/helpers.js';
import { DATABASE_URL, MYSQL_URL, mysqlAnswers, postgresAnswers, serviceAvailable } from '../support/services.js';

const LOADER = fileURLToPath(new URL('../fixtures/outbox-ts-loader.mjs', import.meta.url));
const CHILD = fileURLToPath(new URL('../fixtures/outbox-child.ts', import.meta.url));

let emulator: MotherEmulator;
const havePostgres = serviceAvailable('PostgreSQL', DATABASE_URL, await postgresAnswers());
const haveMysql = serviceAvailable('MySQL/MariaDB', MYSQL_URL, await mysqlAnswers());
const dir = mkdtempSync(join(tmpdir(), 'outbox-processes-'));
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(async () => {
  await emulator.close();
  rmSync(dir, { recursive: true, force: true });
});

type Child = ChildProcessByStdio<Writable, Readable, Readable> & { messages: Record<string, unknown>[]; stderr: Readable; errors: () => string };
const children: Child[] = [];
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  emulator.setFaults({});
  emulator.reset();
});

/** Starts the fixture in a real `node` process; its JSON stdout lines land in `messages`. */
function startChild(mode: string, env: Record<string, string | number>): Child {
  const child = spawn(process.execPath, ['--import', LOADER, CHILD], {
    env: {
      ...process.env,
      OUTBOX_MODE: mode,
      MOTHER_URL: emulator.url,
      MOTHER_API_KEY: API_KEY,
      MOTHER_API_SECRET: API_SECRET,
      OUTBOX_CONCURRENCY: '4',
      OUTBOX_LEASE_MS: '5600',
      ...Object.fromEntries(Object.entries(env).map(([key, value]) => [key, String(value)])),
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  }) as Child;
  child.messages = [];
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  child.errors = () => stderr;
  createInterface({ input: child.stdout }).on('line', (line) => child.messages.push(JSON.parse(line) as Record<string, unknown>));
  children.push(child);
  return child;
}

async function message(child: Child, event: string, timeoutMs = 20_000): Promise<Record<string, unknown>> {
  return waitFor<Record<string, unknown> | undefined>(
    () => {
      if (child.exitCode !== null && child.exitCode !== 0) throw new Error(`child exited ${child.exitCode}: ${child.errors()}`);
      return child.messages.find((m) => m.event === event);
    },
    `the child to say "${event}"`,
    timeoutMs,
  ) as Promise<Record<string, unknown>>;
}

function exited(child: Child): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

/**
 * Lets deliveries through slowly (so pushes are in flight), then kills `doomed` with SIGKILL
 * after at least 100 arrived; resolves with how many had arrived by then.
 */
async function killMidDelivery(doomed: Child, total: number): Promise<number> {
  expect(emulator.releases).toHaveLength(0);
  emulator.setFaults({ delayMs: 15 });
  await waitFor(() => emulator.releases.length >= 100, 'some deliveries before the kill');
  doomed.kill('SIGKILL');
  expect(await exited(doomed)).toMatchObject({ signal: 'SIGKILL' });
  const delivered = emulator.releases.length;
  expect(delivered).toBeLessThan(total);
  emulator.setFaults({});
  return delivered;
}

/** How many times each remote_track_id reached the emulator. */
function deliveriesPerTrack(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const { release } of emulator.releases) counts.set(String(release.remote_track_id), (counts.get(String(release.remote_track_id)) ?? 0) + 1);
  return counts;
}

describe('createReleaseOutbox()', () => {
  describe('when the process is killed mid-delivery', () => {
    it('lets the next process finish: every release arrives, duplicates at most the in-flight count', async () => {
      const file = join(dir, 'crash.db');
      const total = 500;
      const concurrency = 4;
      emulator.setFaults({ down: true });
      const doomed = startChild('enqueue-and-deliver', { OUTBOX_FILE: file, OUTBOX_COUNT: total, OUTBOX_CONCURRENCY: concurrency });
      await message(doomed, 'enqueued');
      const deliveredBeforeKill = await killMidDelivery(doomed, total);
      const finisher = startChild('deliver', { OUTBOX_FILE: file, OUTBOX_CONCURRENCY: concurrency });
      const { stats } = await message(finisher, 'drained');
      expect(stats).toMatchObject({ pending: 0, delivered: total, dead: 0 });

      const perTrack = deliveriesPerTrack();
      const duplicates = emulator.releases.length - perTrack.size;
      expect(perTrack.size).toBe(total);
      // In flight at the kill: `concurrency` pushes and as many answered ones being recorded (docs/guarantees.md).
      expect(duplicates).toBeLessThanOrEqual(2 * concurrency);
      process.stdout.write(`[outbox crash test] delivered before kill: ${deliveredBeforeKill}, duplicates: ${duplicates}\n`);
    });
  });

  /** A shared table on each database: its store (to watch the counts), the children's env, and how to drop it. */
  const SHARED_TABLES = [
    {
      name: 'PostgreSQL',
      available: havePostgres,
      open() {
        const schema = `test_outbox_crash_${process.pid}`;
        const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
        return {
          store: postgresOutboxStore({ pool, schema }),
          env: { OUTBOX_DATABASE_URL: DATABASE_URL, OUTBOX_SCHEMA: schema },
          async drop() {
            await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
            await pool.end();
          },
        };
      },
    },
    {
      name: 'MySQL/MariaDB',
      available: haveMysql,
      open() {
        const table = `test_outbox_crash_${process.pid}`;
        const pool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 2 });
        return {
          store: mysqlOutboxStore({ pool, table }),
          env: { OUTBOX_MYSQL_URL: MYSQL_URL, OUTBOX_TABLE: table },
          async drop() {
            await pool.query(`DROP TABLE IF EXISTS ${table}, ${table}_tracks, ${table}_migrations, ${table}_controls`);
            await pool.end();
          },
        };
      },
    },
  ];

  describe.each(SHARED_TABLES)('when two hosts share one $name table and one is killed mid-delivery', ({ name, available, open }) => {
    it.skipIf(!available)(
      'the survivor finishes: every release arrives, duplicates at most the killed host’s in-flight count',
      { timeout: 60_000 },
      async () => {
        const shared = open();
        try {
          const { store } = shared;
          await store.migrate();
          const total = 500;
          const concurrency = 4;
          const host = (first: number) =>
            startChild('enqueue-and-deliver', { ...shared.env, OUTBOX_FIRST: first, OUTBOX_COUNT: total / 2, OUTBOX_CONCURRENCY: concurrency });
          emulator.setFaults({ down: true });
          const [doomed, survivor] = [host(0), host(total / 2)];
          await Promise.all([message(doomed, 'enqueued'), message(survivor, 'enqueued')]);
          const deliveredBeforeKill = await killMidDelivery(doomed, total);
          // The survivor takes the killed host's leased rows once their lease (5.6 s) runs out.
          await waitFor(async () => (await store.counts()).delivered === total, 'the survivor to deliver everything', 40_000);
          expect(await store.counts()).toEqual({ pending: 0, delivered: total, dead: 0, cancelled: 0 });
          const perTrack = deliveriesPerTrack();
          const duplicates = emulator.releases.length - perTrack.size;
          expect(perTrack.size).toBe(total);
          // In flight at the kill: `concurrency` pushes and as many answered ones being recorded (docs/guarantees.md).
          expect(duplicates).toBeLessThanOrEqual(2 * concurrency);
          expect(survivor.exitCode).toBeNull();
          process.stdout.write(`[outbox ${name} crash test] delivered before kill: ${deliveredBeforeKill}, duplicates: ${duplicates}\n`);
        } finally {
          await shared.drop();
        }
      },
    );
  });

  describe('when two processes work on the same file', () => {
    it('never sends a release twice', async () => {
      const file = join(dir, 'shared.db');
      const total = 300;
      const seeding = createReleaseOutbox({ client: clientFor(emulator), file, autoStart: false, logger: { warn: vi.fn(), error: vi.fn() } });
      for (let i = 0; i < total; i++) await seeding.enqueue({ title: `Shared ${i}`, remote_track_id: `shared-${i}` });
      await seeding.close();

      emulator.setFaults({ delayMs: 10 });
      const workers = [startChild('deliver-on-go', { OUTBOX_FILE: file }), startChild('deliver-on-go', { OUTBOX_FILE: file })];
      await Promise.all(workers.map((worker) => message(worker, 'ready')));
      for (const worker of workers) worker.stdin.write('go\n');
      const reports = await Promise.all(workers.map((worker) => message(worker, 'drained')));

      const perTrack = deliveriesPerTrack();
      expect(perTrack.size).toBe(total);
      expect(emulator.releases).toHaveLength(total);
      expect(reports.map((r) => r.delivered as number).reduce((a, b) => a + b)).toBe(total);
      // Both really took part, so the test exercised the lease and not just one busy worker.
      for (const report of reports) expect(report.delivered).toBeGreaterThan(0);
    });
  });

  describe('when the host neither drains nor closes', () => {
    it('does not keep the process alive', async () => {
      emulator.setFaults({ down: true });
      const child = startChild('enqueue-and-leave', { OUTBOX_FILE: join(dir, 'left.db') });
      await message(child, 'enqueued');
      expect(await exited(child)).toEqual({ code: 0, signal: null });
    });
  });
});

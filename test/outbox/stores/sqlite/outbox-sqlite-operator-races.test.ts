// Operators and workers of several processes on one SQLite outbox file: a cancel racing another
// process's claims, and four feed readers of two other processes stamping positions while deliveries settle.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { loadSqliteDriver } from '../../../../src/db/sqlite-driver.js';
import type { CancelAnswer } from '../../../../src/outbox/store-operations.js';
import { sqliteOutboxStore } from '../../../../src/outbox/stores/sqlite/sqlite-store.js';

const LOADER = fileURLToPath(new URL('../../../fixtures/outbox-ts-loader.mjs', import.meta.url));
const CHILD = fileURLToPath(new URL('../../../fixtures/sqlite-operator-child.ts', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'outbox-sqlite-races-'));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** A child process on `file`; `stop()` tells it to finish and resolves with what it printed. */
async function child<T>(file: string, mode: 'claim' | 'feed'): Promise<{ stop(): Promise<T> }> {
  const proc = spawn(process.execPath, ['--import', LOADER, CHILD, file, mode], { stdio: ['pipe', 'pipe', 'inherit'] });
  children.push(proc);
  let out = '';
  const done = new Promise<T>((resolve, reject) => {
    proc.on('error', reject);
    proc.on('exit', (code) => {
      const last = out.trim().split('\n').at(-1) ?? '';
      if (code === 0 && last.startsWith('{')) resolve(JSON.parse(last) as T);
      else reject(new Error(`the ${mode} child exited with ${code}: ${out}`));
    });
  });
  await new Promise<void>((resolve) =>
    proc.stdout.on('data', (chunk) => {
      out += chunk;
      if (out.startsWith('ready\n')) resolve();
    }),
  );
  return {
    stop() {
      proc.stdin.end('stop\n');
      return done;
    },
  };
}

const release = (track: string) => ({ panel: 'panel-a', remoteTrackId: track, body: JSON.stringify({ title: track }), contentHash: track });

describe('the SQLite outbox operators across processes', () => {
  it('a cancel racing another process’s claims: each release is either cancelled and never claimed, or claimed and answered in flight', async () => {
    const file = join(dir, 'cancel-race.db');
    const store = sqliteOutboxStore({ file });
    const claimer = await child<{ claimed: number[] }>(file, 'claim');
    const answers: CancelAnswer[] = [];
    for (let round = 0; round < 40; round++) {
      const queued = await Promise.all(Array.from({ length: 10 }, (_, i) => store.enqueue(release(`r${round}-${i}`), Date.now())));
      // The other process claims one row per turn meanwhile; some rounds let it take a few first.
      if (round % 2 === 1) await sleep(round % 5);
      answers.push(...(await Promise.all(queued.map(({ id }) => store.cancel?.({ id, nowMs: Date.now(), note: 'deleted' }) as Promise<CancelAnswer>))));
    }
    const { claimed } = await claimer.stop();
    const cancelled = answers.filter((answer) => answer.result === 'cancelled').map((answer) => answer.id);
    const inFlight = answers.filter((answer) => answer.result === 'in-flight').map((answer) => answer.id);
    expect(cancelled.length + inFlight.length).toBe(400);
    // Exactly one wins each race: the ids answered in flight are the ids the claimer holds.
    expect(new Set(claimed)).toEqual(new Set(inFlight));
    expect(claimed).toHaveLength(new Set(claimed).size);
    expect(cancelled.filter((id) => claimed.includes(id as number))).toEqual([]);
    const rows = await store.list({ state: undefined, limit: 1000 });
    for (const row of rows) expect(row.state).toBe(claimed.includes(row.id) ? 'pending' : 'cancelled');
    // Both sides won some races (not a test of two processes that never met).
    expect(cancelled.length).toBeGreaterThan(0);
    expect(inFlight.length).toBeGreaterThan(0);
    await store.close();
  }, 120_000);

  it('four readers of two processes reading the feed while deliveries settle: every delivery once, one position each, the same positions for all', async () => {
    const file = join(dir, 'feed-race.db');
    const store = sqliteOutboxStore({ file });
    const readers = await Promise.all(Array.from({ length: 2 }, () => child<{ readers: [number, number][][] }>(file, 'feed')));
    const delivered: number[] = [];
    for (let round = 0; round < 30; round++) {
      await Promise.all(Array.from({ length: 10 }, (_, i) => store.enqueue(release(`f${round}-${i}`), Date.now())));
      const claims = await store.claimDue({ owner: 'w', panel: 'panel-a', limit: 10, nowMs: Date.now(), leaseMs: 60_000 });
      // Settled out of id order, some in one commit, some one by one: ids do not commit in order.
      const [some, others] = [claims.filter((_, i) => i % 2 === 0), claims.filter((_, i) => i % 2 === 1).reverse()];
      for (const claim of others) expect(await store.settle(claim, 'w', { kind: 'delivered', releaseId: claim.id }, Date.now())).toBe('applied');
      await store.settleMany?.(
        some.map((claim) => ({ claim, outcome: { kind: 'delivered', releaseId: claim.id }, nowMs: Date.now() })),
        'w',
      );
      delivered.push(...claims.map((claim) => claim.id));
      // The test's own process reads too, now and then.
      if (round % 5 === 0) await store.deliveries?.({ after: 0, limit: 5 });
    }
    const results = (await Promise.all(readers.map((reader) => reader.stop()))).flatMap((result) => result.readers);
    expect(delivered).toHaveLength(300);
    const truth = results[0] ?? [];
    // Positions 1..600 in the order read, each delivery exactly once.
    expect(truth.map(([position]) => position)).toEqual(Array.from({ length: 300 }, (_, i) => i + 1));
    expect(new Set(truth.map(([, id]) => id))).toEqual(new Set(delivered));
    expect(results).toHaveLength(4);
    for (const rows of results) expect(rows).toEqual(truth);
    // The counter says the same: the next position given is 301.
    const db = new (loadSqliteDriver())(file, { readonly: true });
    expect(db.prepare("SELECT value FROM release_outbox_controls WHERE name = 'feed-position'").get()).toEqual({ value: '300' });
    db.close();
    await store.close();
  }, 180_000);
});

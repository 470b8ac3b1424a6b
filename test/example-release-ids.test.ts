// The delivery-feed recipe of the example app (example-app/release-ids.js), killed at any moment
// (two followers at a time on one database, while deliveries keep landing): every release_id ends
// up on the app's own row, and none is written twice.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, expect, it } from 'vitest';
import { createReleaseOutbox } from '../src/outbox/outbox.js';
import { API_KEY, API_SECRET, clientFor, sleep, startEmulator, waitFor } from './support/helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'release-ids-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const RELEASES = 120;

function follower(outboxFile: string, appDbFile: string): ChildProcess {
  const child = spawn(process.execPath, [join(import.meta.dirname, 'fixtures/release-ids-follower.mjs'), outboxFile, appDbFile, '7'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  child.stdout?.resume();
  return child;
}

it('writes every release_id back exactly once however often its followers are killed', async () => {
  const emulator = await startEmulator([{ apiKey: API_KEY, apiSecret: API_SECRET, active: true }]);
  const outboxFile = join(dir, 'outbox.db');
  const appDbFile = join(dir, 'app.db');
  const outbox = createReleaseOutbox({ client: clientFor(emulator), file: outboxFile, pollIntervalMs: 20 });
  try {
    // Deliveries keep landing while the followers are killed and started again.
    const enqueuing = (async () => {
      for (let n = 0; n < RELEASES; n++) {
        await outbox.enqueue({ title: `Song ${n}`, primary_artist: 'Ada', remote_track_id: `track-${n}` });
        if (n % 5 === 0) await sleep(25);
      }
    })();
    for (let round = 0; round < 8; round++) {
      const pair = [follower(outboxFile, appDbFile), follower(outboxFile, appDbFile)];
      await sleep(500 + ((round * 97) % 400));
      for (const child of pair) child.kill('SIGKILL');
      // A follower may have ended by itself already (its exit then came before this wait).
      await Promise.all(
        pair.map((child) => (child.exitCode !== null || child.signalCode !== null ? undefined : new Promise((resolve) => child.once('exit', resolve)))),
      );
    }
    await enqueuing;
    await outbox.drain({ signal: AbortSignal.timeout(20_000) });
    const last = follower(outboxFile, appDbFile);
    try {
      // The last follower catches up (its database is created once it has started).
      const applied = () => {
        if (!existsSync(appDbFile)) return [];
        const db = new Database(appDbFile, { readonly: true });
        try {
          if (db.prepare(`SELECT 1 FROM sqlite_master WHERE name = 'tracks'`).get() === undefined) return [];
          return db.prepare('SELECT remote_track_id AS track, release_id AS releaseId, applied FROM tracks').all() as {
            track: string;
            releaseId: number;
            applied: number;
          }[];
        } finally {
          db.close();
        }
      };
      const rows = await waitFor(
        () => {
          const found = applied();
          return found.filter((row) => row.releaseId !== null).length === RELEASES ? found : undefined;
        },
        'every release_id',
        30_000,
      ).catch((error) => {
        throw new Error(`${(error as Error).message}: ${applied().length} rows written back of ${RELEASES}`);
      });
      expect(rows).toHaveLength(RELEASES);
      const fromMother = new Map(emulator.releases.map((r) => [r.release.remote_track_id, r.releaseId]));
      for (const row of rows ?? []) expect(row).toEqual({ track: row.track, releaseId: fromMother.get(row.track), applied: 1 });
    } finally {
      last.kill('SIGKILL');
    }
  } finally {
    await outbox.close();
    await emulator.close();
  }
}, 90_000);

// Migrating a large v4 SQLite outbox file to v5 (two new indexes) while a second process opens the
// same file, as two app processes started together after an upgrade do: the second waits.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { loadSqliteDriver } from '../../../../src/db/sqlite-driver.js';
import { sqliteOutboxStore } from '../../../../src/outbox/stores/sqlite/sqlite-store.js';

const LOADER = fileURLToPath(new URL('../../../fixtures/outbox-ts-loader.mjs', import.meta.url));
const CHILD = fileURLToPath(new URL('../../../fixtures/sqlite-open-child.ts', import.meta.url));
const HOLDER = fileURLToPath(new URL('../../../fixtures/sqlite-hold-lock.ts', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'sqlite-race-'));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

function open(file: string, busyTimeoutMs: number): Promise<{ ok: boolean; ms: number; error?: string; code?: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', LOADER, CHILD, file, String(busyTimeoutMs)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.on('error', reject);
    child.on('exit', () => resolve(JSON.parse(out)));
  });
}

describe('SQLite v4 → v5 migration with two processes opening at once', () => {
  it('the second process waits for the first one’s migration instead of failing with SQLITE_BUSY', async () => {
    const file = join(dir, 'v4.db');
    const store = sqliteOutboxStore({ file });
    await store.close();
    const db = new (loadSqliteDriver())(file);
    db.exec('DROP INDEX release_outbox_panel_list; DROP INDEX release_outbox_track_list');
    // 200,000 rows in every state (a large but ordinary outbox: retention keeps each track's latest delivery).
    db.exec(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 200000)
      INSERT INTO release_outbox (panel, remote_track_id, body, content_hash, state, attempts, next_attempt_at, created_at, updated_at, delivered_seq)
      SELECT 'panel-' || (i % 50), 'track-' || i, '{"title":"' || hex(randomblob(100)) || '"}', hex(randomblob(32)),
        CASE i % 3 WHEN 0 THEN 'pending' WHEN 1 THEN 'delivered' ELSE 'dead' END, 0, 0, i, i, i FROM c`);
    db.pragma('user_version = 4');
    db.close();
    // Both with the same busy timeout, shorter than this file's migration takes here (with the
    // default 5 s, the same happens from about 1.4 million rows on this machine: 3.5 s per million).
    const [a, b] = await Promise.all([open(file, 200), open(file, 200)]);
    expect([a, b]).toEqual([expect.objectContaining({ ok: true }), expect.objectContaining({ ok: true })]);
  }, 120_000);

  it('fails after the busy timeout when the process holding the lock is not migrating (a hung writer)', async () => {
    const file = join(dir, 'v4-locked.db');
    await sqliteOutboxStore({ file }).close();
    const db = new (loadSqliteDriver())(file);
    db.pragma('user_version = 4');
    db.close();
    const holder = spawn(process.execPath, ['--import', LOADER, HOLDER, file], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(holder);
    await new Promise<void>((resolve) => holder.stdout?.on('data', (chunk) => String(chunk).includes('held') && resolve()));
    // Before, the opener waited as long as a migration may take (10 minutes, its event loop frozen).
    const opened = await Promise.race([open(file, 200), new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 8000))]);
    expect(opened).toEqual(expect.objectContaining({ ok: false, code: 'SQLITE_BUSY' }));
  }, 30_000);
});

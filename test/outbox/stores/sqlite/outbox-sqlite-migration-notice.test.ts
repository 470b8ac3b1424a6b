// The SQLite migration notice (`<file>-migrating`: the migrator's host, pid namespace, pid and
// start): an opener waits for a migrator that reached the file through a link, or from another
// pid namespace (a second container on the same volume), and not for a hung writer behind a
// notice that is not one.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { loadSqliteDriver } from '../../../../src/db/sqlite-driver.js';
import { sqliteOutboxStore } from '../../../../src/outbox/stores/sqlite/sqlite-store.js';

const LOADER = fileURLToPath(new URL('../../../fixtures/outbox-ts-loader.mjs', import.meta.url));
const CHILD = fileURLToPath(new URL('../../../fixtures/sqlite-open-child.ts', import.meta.url));
const HOLDER = fileURLToPath(new URL('../../../fixtures/sqlite-hold-lock.ts', import.meta.url));
const WHEN = fileURLToPath(new URL('../../../fixtures/sqlite-open-when.ts', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'migration-notice-'));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** `unshare --pid` needs root and util-linux. */
const canUnshare = process.getuid?.() === 0 && spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'true']).status === 0;

type Opened = { ok: boolean; ms: number; error?: string; code?: string };

/** Opens `file` for writing in a child process; `prefix`: a command to run node under (unshare). */
function open(file: string, busyTimeoutMs: number, prefix: string[] = [], when?: string): Promise<Opened> {
  return new Promise((resolve, reject) => {
    const script = when === undefined ? [CHILD, file, String(busyTimeoutMs)] : [WHEN, file, String(busyTimeoutMs), when];
    const argv = [...prefix, process.execPath, '--import', LOADER, ...script];
    const child = spawn(argv[0] as string, argv.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    let out = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.on('error', reject);
    child.on('exit', () => resolve(out ? JSON.parse(out) : { ok: false, ms: -1, error: 'killed' }));
  });
}

const within = <T>(promise: Promise<T>, ms: number) => Promise.race([promise, new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), ms))]);

async function largeV4(name: string, rows = 200_000): Promise<string> {
  const file = join(dir, name);
  await sqliteOutboxStore({ file }).close();
  const db = new (loadSqliteDriver())(file);
  db.exec('DROP INDEX release_outbox_panel_list; DROP INDEX release_outbox_track_list');
  db.exec(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ${rows})
    INSERT INTO release_outbox (panel, remote_track_id, body, content_hash, state, attempts, next_attempt_at, created_at, updated_at, delivered_seq)
    SELECT 'panel-' || (i % 50), 'track-' || i, '{"title":"' || hex(randomblob(100)) || '"}', hex(randomblob(32)),
      CASE i % 3 WHEN 0 THEN 'pending' WHEN 1 THEN 'delivered' ELSE 'dead' END, 0, 0, i, i, i FROM c`);
  db.pragma('user_version = 4');
  db.close();
  return file;
}

describe('the SQLite migration notice', () => {
  it('is not believed when it is not one (a bare pid): a hung writer fails the opener after its busy timeout', async () => {
    // A notice naming only a live pid (this test's process), as an older version of the notice
    // did: it says nothing of when or where, so it is not believed.
    const file = join(dir, 'stale.db');
    await sqliteOutboxStore({ file }).close();
    const db = new (loadSqliteDriver())(file);
    db.pragma('user_version = 4');
    db.close();
    writeFileSync(`${file}-migrating`, String(process.pid));
    const holder = spawn(process.execPath, ['--import', LOADER, HOLDER, file], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(holder);
    await new Promise<void>((resolve) => holder.stdout?.on('data', (chunk) => String(chunk).includes('held') && resolve()));
    const opened = await within(open(file, 200), 8000);
    expect(opened).toEqual(expect.objectContaining({ ok: false, code: 'SQLITE_BUSY' }));
  }, 30_000);

  it('is found by an opener that reaches the file by its real path, when the migrator opened it through a symbolic link', async () => {
    const real = await largeV4('real.db');
    const link = join(dir, 'link.db');
    symlinkSync(real, link);
    // The second process opens by the real path as soon as the migrator (through the link) announced.
    const second = open(real, 200, [], `${real}-migrating`);
    await new Promise((resolve) => setTimeout(resolve, 3000)); // its node is up and polling
    const first = await open(link, 200);
    const opened = await second;
    expect([first, opened]).toEqual([expect.objectContaining({ ok: true }), expect.objectContaining({ ok: true })]);
  }, 120_000);

  it('is found by an opener by the same path', async () => {
    const file = await largeV4('control.db');
    const second = open(file, 200, [], `${file}-migrating`);
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const first = await open(file, 200);
    const opened = await second;
    expect([first, opened]).toEqual([expect.objectContaining({ ok: true }), expect.objectContaining({ ok: true })]);
  }, 120_000);

  it.skipIf(!canUnshare)(
    'is believed by an opener in another pid namespace (a second container on the same volume)',
    async () => {
      const file = await largeV4('containers.db');
      const second = open(file, 200, ['unshare', '--pid', '--fork', '--mount-proc'], `${file}-migrating`);
      await new Promise((resolve) => setTimeout(resolve, 3000));
      const first = await open(file, 200);
      const opened = await second;
      expect([first, opened]).toEqual([expect.objectContaining({ ok: true }), expect.objectContaining({ ok: true })]);
    },
    120_000,
  );

  it('is not believed when it claims to start a day from now (a clock far ahead): a hung writer fails the opener after its busy timeout', async () => {
    const file = join(dir, 'future.db');
    await sqliteOutboxStore({ file }).close();
    const db = new (loadSqliteDriver())(file);
    db.pragma('user_version = 4');
    db.close();
    writeFileSync(`${file}-migrating`, JSON.stringify({ host: 'other-host', ns: 'pid:[1]', pid: 4242, at: Date.now() + 24 * 3600_000 }));
    const holder = spawn(process.execPath, ['--import', LOADER, HOLDER, file], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(holder);
    await new Promise<void>((resolve) => holder.stdout?.on('data', (chunk) => String(chunk).includes('held') && resolve()));
    expect(await within(open(file, 200), 8000)).toEqual(expect.objectContaining({ ok: false, code: 'SQLITE_BUSY' }));
  }, 30_000);
});

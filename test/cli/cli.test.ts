import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT, type Io } from '../../src/cli/io.js';
import { main } from '../../src/cli/main.js';
import type { MotherEmulator } from '../../src/emulator/emulator.js';
import { sqliteOutboxStore } from '../../src/outbox/stores/sqlite/sqlite-store.js';
import { API_KEY, API_SECRET, startEmulator, waitFor } from '../support/helpers.js';
import { DATABASE_URL, postgresAnswers, serviceAvailable } from '../support/services.js';

let emulator: MotherEmulator;
const havePostgres = serviceAvailable('PostgreSQL', DATABASE_URL, await postgresAnswers());
const pgSchema = `test_cli_${process.pid}`;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(async () => {
  await emulator.close();
  if (!havePostgres) return;
  const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
  await admin.query(`DROP SCHEMA IF EXISTS "${pgSchema}" CASCADE`);
  await admin.end();
});

function fakeIo(env: Record<string, string> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const io: Io = { out: (l) => out.push(l), err: (l) => err.push(l), write: (t) => out.push(t), env, isTTY: false };
  return { io, out, err };
}

describe('panel-license', () => {
  describe('check', () => {
    const env = () => ({ MOTHER_BASE_URL: emulator.url, PANEL_API_KEY: API_KEY, PANEL_API_SECRET: API_SECRET });

    it('exits 0 and prints the panel when active', async () => {
      const { io, out } = fakeIo(env());
      expect(await main(['check'], io)).toBe(EXIT.ok);
      expect(out[0]).toBe('ACTIVE  Rhythm Hub');
    });

    it('exits 1 with the reason when inactive, as JSON with --json', async () => {
      emulator.setPanel(API_KEY, { active: false, reason: 'Unpaid' });
      try {
        const { io, out } = fakeIo(env());
        expect(await main(['check', '--json'], io)).toBe(EXIT.inactive);
        expect(JSON.parse(out[0] ?? '')).toMatchObject({ ok: true, active: false, reason: 'Unpaid' });
        // Control and format characters in mother text: still valid JSON, and inert on a terminal.
        emulator.setPanel(API_KEY, { active: false, reason: 'Overdue\u200b invoice \u007f\u001b[2J' });
        const odd = fakeIo(env());
        expect(await main(['check', '--json'], odd.io)).toBe(EXIT.inactive);
        expect(JSON.parse(odd.out[0] ?? '').reason).toBe('Overdue\u200b invoice \u007f\u001b[2J');
        expect(odd.out[0]).not.toMatch(/[\p{Cc}\p{Cf}]/u);
      } finally {
        emulator.setPanel(API_KEY, { active: true, reason: null });
      }
    });

    it('exits 3 when rejected or unreachable, without printing the secret', async () => {
      const { io, err } = fakeIo({ ...env(), PANEL_API_SECRET: 'wrong-secret-value' });
      expect(await main(['check'], io)).toBe(EXIT.unreachable);
      expect(err[0]).toMatch(/^ERROR {3}AUTH_REJECTED/);
      emulator.setFaults({ down: true });
      const down = fakeIo(env());
      expect(await main(['check', '--json'], down.io)).toBe(EXIT.unreachable);
      expect(JSON.parse(down.out[0] ?? '')).toMatchObject({ ok: false, error: 'HTTP_STATUS' });
      emulator.setFaults({});
      expect(err.join('\n')).not.toContain('wrong-secret-value');
    });

    it('exits 2 on usage errors, flags taking precedence over env', async () => {
      const missing = fakeIo();
      expect(await main(['check'], missing.io)).toBe(EXIT.usage);
      expect(missing.err[0]).toMatch(/Missing --base-url\/MOTHER_BASE_URL, --api-key\/PANEL_API_KEY, --api-secret\/PANEL_API_SECRET/);
      expect(await main(['check', '--bogus'], fakeIo(env()).io)).toBe(EXIT.usage);
      expect(await main(['check', '--base-url', 'http://mother.example/x'], fakeIo(env()).io)).toBe(EXIT.usage);
      expect(await main(['nope'], fakeIo().io)).toBe(EXIT.usage);
      expect(await main(['check', '--base-url', emulator.url], fakeIo({ PANEL_API_KEY: API_KEY, PANEL_API_SECRET: API_SECRET }).io)).toBe(EXIT.ok);
    });
  });

  describe('push and outbox', () => {
    const env = () => ({ MOTHER_BASE_URL: emulator.url, PANEL_API_KEY: API_KEY, PANEL_API_SECRET: API_SECRET });
    const dir = mkdtempSync(join(tmpdir(), 'plg-cli-'));

    it('delivers an array of releases, one line per result, and reports invalid ones', async () => {
      const outbox = join(dir, 'push.db');
      const file = join(dir, 'releases.json');
      writeFileSync(file, JSON.stringify([{ title: 'One', remote_track_id: 'cli-1' }, { title: 'Two', remote_track_id: 'cli-2' }, { album: 'no title' }]));
      const { io, out } = fakeIo(env());
      expect(await main(['push', file, '--outbox', outbox], io)).toBe(EXIT.inactive);
      expect(out.filter((l) => l.startsWith('delivered'))).toHaveLength(2);
      expect(out).toContain('invalid    [2] title: Missing release title.');
      const ids = emulator.releases.map((r) => r.release.remote_track_id);
      expect(ids).toEqual(expect.arrayContaining(['cli-1', 'cli-2']));

      const again = fakeIo(env());
      expect(await main(['push', file, '--outbox', outbox], again.io)).toBe(EXIT.inactive);
      expect(again.out.filter((l) => l.startsWith('unchanged'))).toHaveLength(2);

      const list = fakeIo();
      expect(await main(['outbox', '--outbox', outbox, '--state', 'delivered'], list.io)).toBe(EXIT.ok);
      expect(list.out[0]).toBe('pending 0 · delivered 2 · dead 0 · cancelled 0');
      expect(list.out.slice(1).every((l) => /\tdelivered\t/.test(l))).toBe(true);
    });

    it.skipIf(!havePostgres)('works the same on a PostgreSQL URL, and never prints its password', async () => {
      const url = new URL(DATABASE_URL);
      url.password = 'sekret-db-pass';
      url.searchParams.set('schema', pgSchema);
      const outbox = url.toString();
      const file = join(dir, 'pg.json');
      writeFileSync(
        file,
        JSON.stringify([
          { title: 'Via PG', remote_track_id: 'cli-pg-1' },
          { title: 'Refused', remote_track_id: 'cli-pg-2' },
        ]),
      );
      emulator.setFaults({ status: 422, endpoint: 'release.php' });
      const refused = fakeIo(env());
      expect(await main(['push', file, '--outbox', outbox, '--wait-s', '20'], refused.io)).toBe(EXIT.inactive);
      emulator.setFaults({});
      const pushed = fakeIo(env());
      expect(await main(['push', file, '--outbox', outbox, '--wait-s', '20'], pushed.io)).toBe(EXIT.ok);
      expect(pushed.out.filter((l) => l.startsWith('delivered'))).toHaveLength(2);
      const list = fakeIo();
      expect(await main(['outbox', '--outbox', outbox], list.io)).toBe(EXIT.ok);
      expect(list.out[0]).toBe('pending 0 · delivered 2 · dead 2 · cancelled 0');
      // The dead rows were followed by newer content of their tracks: they stay dead.
      const retry = fakeIo();
      expect(await main(['outbox', 'retry', '1', '--outbox', outbox], retry.io)).toBe(EXIT.inactive);
      expect(retry.err[0]).toMatch(/^Release #1 stays dead: its track was queued again since/);
      url.searchParams.set('table', 'never_created');
      const missing = fakeIo();
      expect(await main(['outbox', '--outbox', url.toString()], missing.io)).toBe(EXIT.usage);
      // A password can also sit in the query; and a URL that is not PostgreSQL is no file path.
      url.searchParams.set('sslpassword', 'query-sekret');
      const query = fakeIo();
      expect(await main(['outbox', '--outbox', url.toString()], query.io)).toBe(EXIT.usage);
      const other = fakeIo();
      expect(await main(['outbox', '--outbox', 'mysql://root:sekret-db-pass@127.0.0.1/db'], other.io)).toBe(EXIT.usage);
      expect(other.err.join('\n')).toMatch(/takes a file path or a postgres:\/\/ URL; this looks like a URL but is not one/);
      const said = [refused, pushed, list, retry, missing, query, other].flatMap((io) => [...io.out, ...io.err]).join('\n');
      expect(said).toMatch(/no outbox table .*never_created at postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:5432\/test \(/i);
      expect(said).not.toMatch(/sekret/);
    });

    it('never shows a password it cannot read as meant, and never takes a URL for a file path', async () => {
      const file = join(dir, 'never.json');
      writeFileSync(file, JSON.stringify({ title: 'Never', remote_track_id: 'cli-never' }));
      const work = mkdtempSync(join(tmpdir(), 'plg-cli-cwd-'));
      const home = process.cwd();
      process.chdir(work);
      try {
        for (const given of [
          'postgres://user:2024/Winter@127.0.0.1/test', // digits before an unencoded / read as a port
          'postgres://user:5432#Winter@127.0.0.1/test', // a # starts a fragment
          'postgres:/user:Winter@127.0.0.1/test', // one slash
          'postgresql:user:Winter@127.0.0.1/test', // none
          'POSTGRES://user:Winter@', // no host
          'mysql:user:Winter@127.0.0.1/db',
          '"postgres://user:Winter@127.0.0.1/test"', // the quotes an env file leaves
          '<postgres://user:Winter@127.0.0.1/test>',
          '\u200Bpostgres://user:Winter@127.0.0.1/test', // an invisible character first
        ])
          for (const args of [
            ['push', file, '--outbox', given],
            ['outbox', '--outbox', given],
          ]) {
            const { io, out, err } = fakeIo(env());
            expect(await main(args, io), given).toBe(EXIT.usage);
            const said = [...out, ...err].join('\n');
            expect(said).not.toContain('Winter');
            expect(said).toMatch(/not shown: it may hold a password|PGPASSWORD/);
          }
        // Nothing was created where the URL would have been a path.
        expect(readdirSync(work)).toEqual([]);
      } finally {
        process.chdir(home);
      }
    });

    it('takes the outbox from PANEL_LICENSE_OUTBOX, so a URL with its password stays off the command line', async () => {
      const outbox = join(dir, 'from-env.db');
      const file = join(dir, 'env.json');
      writeFileSync(file, JSON.stringify({ title: 'From env', remote_track_id: 'cli-env' }));
      expect(await main(['push', file], fakeIo({ ...env(), PANEL_LICENSE_OUTBOX: outbox }).io)).toBe(EXIT.ok);
      const list = fakeIo();
      expect(await main(['outbox', '--outbox', outbox, '--state', 'delivered'], list.io)).toBe(EXIT.ok);
      expect(list.out[0]).toBe('pending 0 · delivered 1 · dead 0 · cancelled 0');
      expect(list.out[1]).toMatch(/cli-env/);
    });

    it.skipIf(!havePostgres)('rides out PostgreSQL dropping its connections while push waits for the mother (the built CLI)', async () => {
      const url = new URL(DATABASE_URL);
      url.searchParams.set('schema', pgSchema);
      url.searchParams.set('table', 'restart_outbox');
      url.searchParams.set('application_name', `plg-cli-${process.pid}`);
      const file = join(dir, 'restart.json');
      writeFileSync(file, JSON.stringify({ title: 'Through a restart', remote_track_id: 'cli-restart' }));
      const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
      // The mother takes 5 s to answer, so the push is under way when the connections drop. (A
      // mother answering 503 instead made the test flaky: under load it failed several times
      // first, and full jitter could put the next attempt past --wait-s.)
      emulator.setFaults({ endpoint: 'release.php', delayMs: 5000 });
      try {
        // The URL from the environment, as the README advises; the process as a user runs it.
        const child = spawn(process.execPath, [fileURLToPath(new URL('../../dist/cli/bin.js', import.meta.url)), 'push', file, '--wait-s', '20'], {
          env: { ...process.env, ...env(), PANEL_LICENSE_OUTBOX: url.toString() },
        });
        let output = '';
        child.stdout.on('data', (chunk) => {
          output += chunk;
        });
        child.stderr.on('data', (chunk) => {
          output += chunk;
        });
        const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
        // While push waits, the server drops every connection of the CLI (as a restart does).
        await waitFor(
          async () => (await admin.query('SELECT 1 FROM pg_stat_activity WHERE application_name = $1', [`plg-cli-${process.pid}`])).rowCount,
          'the CLI connected',
        );
        await new Promise((resolve) => setTimeout(resolve, 1000));
        const dropped = await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [`plg-cli-${process.pid}`]);
        expect(dropped.rowCount).toBeGreaterThan(0);
        expect(await exited, output).toBe(EXIT.ok);
        expect(output).toMatch(/^delivered/m);
      } finally {
        emulator.setFaults({});
        await admin.end();
      }
    });

    it('prints artist text with every control character escaped', async () => {
      // Stored by an older version that accepted control characters; listing must still be safe.
      const outbox = join(dir, 'escape.db');
      const store = sqliteOutboxStore({ file: outbox });
      const body = JSON.stringify({ release: { title: 'Clear\u001b[2J\u001b]52;c;ZXZpbA==\u0007', remote_track_id: 'id\u009b31m\nfake row' } });
      await store.enqueue(
        { panel: 'panel-a', remoteTrackId: 'id\u009b31m\nfake row', body, contentHash: createHash('sha256').update(body).digest('hex') },
        Date.now(),
      );
      await store.close();
      const list = fakeIo();
      expect(await main(['outbox', '--outbox', outbox], list.io)).toBe(EXIT.ok);
      expect(list.out.filter((line) => /\p{Cc}/u.test(line.replaceAll('\t', '')))).toEqual([]);
      expect(list.out).toHaveLength(2);
      expect(list.out[1]).toContain('Clear\\x1b[2J\\x1b]52;c;ZXZpbA==\\x07');
      expect(list.out[1]).toContain('id\\x9b31m\\x0afake row');

      const file = join(dir, 'evil.json');
      writeFileSync(file, JSON.stringify([{ title: 'x', '\u001b[31mred': 'y' }]));
      const pushed = fakeIo(env());
      expect(await main(['push', file, '--outbox', join(dir, 'evil.db'), '--wait-s', '1'], pushed.io)).toBe(EXIT.inactive);
      expect(pushed.out.join('\n')).not.toContain('\u001b');
    });

    it('leaves releases queued when the mother is down, and lists and retries dead ones', async () => {
      const outbox = join(dir, 'down.db');
      const file = join(dir, 'one.json');
      writeFileSync(file, JSON.stringify({ title: 'Queued', remote_track_id: 'cli-q' }));
      emulator.setFaults({ down: true });
      const down = fakeIo(env());
      expect(await main(['push', file, '--outbox', outbox, '--wait-s', '0.3'], down.io)).toBe(EXIT.unreachable);
      expect(down.err.join('\n')).toMatch(/1 release\(s\) of .*one\.json still queued.*Last error: The mother answered HTTP 503\./);
      emulator.setFaults({ status: 422 });
      const refused = fakeIo(env());
      expect(await main(['push', file, '--outbox', outbox, '--wait-s', '20'], refused.io)).toBe(EXIT.inactive);
      emulator.setFaults({});
      const dead = fakeIo();
      expect(await main(['outbox', '--outbox', outbox, '--state', 'dead', '--json'], dead.io)).toBe(EXIT.ok);
      const rows = JSON.parse(dead.out[0] ?? '[]') as { id: number }[];
      expect(rows).toHaveLength(1);
      const retry = fakeIo();
      expect(await main(['outbox', 'retry', String(rows[0]?.id), '--outbox', outbox], retry.io)).toBe(EXIT.ok);
      expect(retry.out[0]).toBe(`Release #${rows[0]?.id} queued again; the next push or panel process delivers it.`);
      expect(await main(['outbox', 'retry', '--outbox', outbox], fakeIo().io)).toBe(EXIT.usage);
      // Nothing to retry: say why.
      const pending = fakeIo();
      expect(await main(['outbox', 'retry', String(rows[0]?.id), '--outbox', outbox], pending.io)).toBe(EXIT.inactive);
      expect(pending.err[0]).toMatch(/^Release #\d+ is still pending \(0 attempt\(s\) so far\): it is already queued\.$/);
      const missing = fakeIo();
      expect(await main(['outbox', 'retry', '999', '--outbox', outbox], missing.io)).toBe(EXIT.inactive);
      expect(missing.err[0]).toMatch(/^No release #999 in .*down\.db\.$/);
      const none = fakeIo();
      expect(await main(['outbox', 'retry', '--all-dead', '--outbox', outbox], none.io)).toBe(EXIT.ok);
      expect(none.out[0]).toBe('No dead releases: nothing to queue again.');
    });

    it('prints one JSON object per result with --json, and names invalid releases', async () => {
      const outbox = join(dir, 'json.db');
      const file = join(dir, 'json.json');
      writeFileSync(
        file,
        JSON.stringify([
          { title: 'Json one', remote_track_id: 'json-1' },
          { title: 'Bad', remote_track_id: 'json-2', isrc: 'nope' },
        ]),
      );
      const { io, out } = fakeIo(env());
      expect(await main(['push', file, '--outbox', outbox, '--json'], io)).toBe(EXIT.inactive);
      const events = out.map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(events).toContainEqual({
        event: 'invalid',
        index: [1],
        remoteTrackId: 'json-2',
        title: 'Bad',
        field: 'isrc',
        message: expect.stringMatching(/^Release field "isrc" must be an ISRC/),
      });
      expect(events).toContainEqual(expect.objectContaining({ event: 'delivered', index: [0], remoteTrackId: 'json-1', releaseId: expect.any(Number) }));
      expect(events.at(-1)).toEqual({ event: 'summary', total: 2, delivered: 1, unchanged: 0, invalid: 1, refused: 0, queued: 0, lastError: null });
      const plain = fakeIo(env());
      await main(['push', file, '--outbox', outbox], plain.io);
      expect(plain.out).toContain(
        'invalid    [1] (json-2 "Bad") isrc: Release field "isrc" must be an ISRC: 12 characters CCXXXYYNNNNN (hyphens allowed), e.g. US-RC1-76-07839.',
      );
    });

    it("waits only for its own file's releases", async () => {
      const outbox = join(dir, 'own.db');
      const older = join(dir, 'older.json');
      writeFileSync(older, JSON.stringify({ title: 'Older, stuck', remote_track_id: 'own-old' }));
      emulator.setFaults({ down: true });
      expect(await main(['push', older, '--outbox', outbox, '--wait-s', '0.2'], fakeIo(env()).io)).toBe(EXIT.unreachable);
      const empty = join(dir, 'empty.json');
      writeFileSync(empty, '[]');
      // The older row cannot be delivered (the mother is still down): waiting for it would end in
      // exit 3 after --wait-s. Exit 0 with nothing queued means only this file was waited for.
      const run = fakeIo(env());
      expect(await main(['push', empty, '--outbox', outbox, '--wait-s', '5', '--json'], run.io)).toBe(EXIT.ok);
      expect(JSON.parse(run.out.at(-1) ?? '')).toMatchObject({ event: 'summary', total: 0, queued: 0 });
      emulator.setFaults({});
    });

    it('speaks in flags: unknown flags, --allow-insecure-http, --version', async () => {
      const unknown = fakeIo(env());
      expect(await main(['check', '--jsn'], unknown.io)).toBe(EXIT.usage);
      expect(unknown.err[0]).toMatch(/^panel-license: Unknown flag --jsn\. Did you mean --json\?/);
      const insecure = fakeIo({ ...env(), MOTHER_BASE_URL: 'http://mother.example/api' });
      expect(await main(['check'], insecure.io)).toBe(EXIT.usage);
      expect(insecure.err[0]).toMatch(/^panel-license: --base-url uses plain http: to a non-loopback host.*pass --allow-insecure-http/);
      expect(insecure.err[0]).not.toMatch(/panel-license-guard|allowInsecureHttp/);
      const valued = fakeIo(env());
      expect(await main(['check', '--json=yes'], valued.io)).toBe(EXIT.usage);
      expect(valued.err[0]).toMatch(/^panel-license: --json takes no value\./);
      const missing = fakeIo();
      expect(await main(['emulate', '--port'], missing.io)).toBe(EXIT.usage);
      expect(missing.err[0]).toMatch(/^panel-license: --port needs a value, e.g\. --port VALUE\./);
      const extra = fakeIo(env());
      expect(await main(['check', 'extra'], extra.io)).toBe(EXIT.usage);
      expect(extra.err[0]).toMatch(/^panel-license: Unexpected argument "extra"\./);
      const pipe = fakeIo(env());
      expect(await main(['check', '--api-key', 'a|b'], pipe.io)).toBe(EXIT.usage);
      expect(pipe.err[0]).not.toContain('`');
      // A panel id no store would keep byte for byte is refused before the outbox is opened.
      for (const panel of ['tenant\uD800', 'tenant\u001b[31m']) {
        const badPanel = fakeIo(env());
        expect(await main(['outbox', '--panel', panel, '--outbox', join(dir, 'never-opened.db')], badPanel.io)).toBe(EXIT.usage);
        expect(badPanel.err[0]).toMatch(/^panel-license: --panel ".*" is not a panel id: at most 200 characters of well-formed Unicode/);
      }
      expect(readdirSync(dir)).not.toContain('never-opened.db');
      const version = fakeIo();
      expect(await main(['--version'], version.io)).toBe(EXIT.ok);
      expect(version.out[0]).toMatch(/^panel-license \d+\.\d+\.\d+/);
    });
  });
});

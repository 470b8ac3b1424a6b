import { spawn, spawnSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EXIT, type Io } from '../src/cli/io.js';
import { main } from '../src/cli/main.js';
import { sleep, waitFor } from './support/helpers.js';
import { freePort, REDIS_URL, redisAnswers, serviceAvailable } from './support/services.js';

// The README's quick start, run as a newcomer would: `npm start` (stopped), then `npm test`.
const root = resolve(import.meta.dirname, '..');
const haveRedis = serviceAvailable('Redis', REDIS_URL, await redisAnswers());

async function occupied(): Promise<{ server: Server; port: number }> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as { port: number }).port };
}

/** Runs the example panel until `until` appears on stdout (or it exits); returns its output and exit code. */
function runExample(env: Record<string, string>, until: string | null): Promise<{ out: string; err: string; code: number | null }> {
  return new Promise((done, reject) => {
    // REDIS_URL would switch the example to cluster mode: only the test that wants it sets it.
    const child = spawn(process.execPath, ['example-app/start.js'], { cwd: root, env: { ...process.env, REDIS_URL: '', ...env } });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (until !== null && out.includes(until)) child.kill('SIGTERM');
    });
    child.stderr.on('data', (chunk: Buffer) => {
      err += chunk.toString();
    });
    child.on('error', reject);
    child.on('exit', (code) => done({ out, err, code }));
    setTimeout(() => child.kill('SIGKILL'), 20_000).unref();
  });
}

describe.skipIf(!haveRedis)('the example in cluster mode (REDIS_URL set)', () => {
  it('runs node:cluster workers that lock together, and stops them all', async () => {
    const [port, emulatorPort] = [await freePort(), await freePort()];
    const outboxFile = resolve(root, 'data/quick-start-cluster-outbox.db');
    const child = spawn(process.execPath, ['example-app/start.js'], {
      cwd: root,
      env: { ...process.env, REDIS_URL, WORKERS: '2', PORT: String(port), EMULATOR_PORT: String(emulatorPort), OUTBOX_FILE: outboxFile },
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    const exited = new Promise<number | null>((done) => child.on('exit', done));
    try {
      let err = '';
      child.stderr.on('data', (chunk: Buffer) => {
        err += chunk.toString();
      });
      await waitFor(() => out.includes('Ctrl-C to stop.'), 'the cluster to start', 40_000).catch((error: Error) => {
        throw new Error(`${error.message}\nstdout: ${out}\nstderr: ${err}`);
      });
      expect(out).toContain('(2 workers sharing one verdict on');
      const admin = out.match(/lock: {4}curl .* (http:\S+)/)?.[1] as string;
      await fetch(admin, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ active: false, reason: 'Invoice overdue' }),
      });
      expect(await (await fetch(`http://127.0.0.1:${port}/healthz/refresh`, { method: 'POST' })).json()).toMatchObject({ state: 'locked' });
      await sleep(300);
      const seen = new Map<number, string>();
      for (let i = 0; i < 12; i++) {
        const health = (await (await fetch(`http://127.0.0.1:${port}/healthz`)).json()) as { instance: number; license: { state: string; store: string } };
        expect(health.license.store).toBe('ok');
        seen.set(health.instance, health.license.state);
      }
      expect([...seen.values()]).toEqual(['locked', 'locked']);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      for (const pid of seen.keys()) expect(() => process.kill(pid, 0)).toThrow();
    } finally {
      child.kill('SIGKILL');
      for (const file of [outboxFile, `${outboxFile}-wal`, `${outboxFile}-shm`]) rmSync(file, { force: true });
    }
  }, 60_000);
});

describe('the quick start', () => {
  it('runs the example once, then lints clean (npm start, then npm test)', async () => {
    const [port, emulatorPort] = [await freePort(), await freePort()];
    // Runtime data in data/ as npm start writes it, under names of its own so that a developer's
    // own demo state (data/license-state.json) is left alone.
    const stateFile = resolve(root, 'data/quick-start-test-state.json');
    const outboxFile = resolve(root, 'data/quick-start-test-outbox.db');
    try {
      const env = { PORT: String(port), EMULATOR_PORT: String(emulatorPort), LICENSE_STATE_FILE: stateFile, OUTBOX_FILE: outboxFile };
      const run = await runExample(env, 'Ctrl-C to stop.');
      expect(run.out).toContain(`Example panel:   http://127.0.0.1:${port}/   (license: active)`);
      expect(run.code).toBe(0);
      // The runtime data npm start leaves behind must not fail the linter.
      expect(existsSync(stateFile)).toBe(true);
      const lint = spawnSync(process.execPath, [resolve(root, 'node_modules/@biomejs/biome/bin/biome'), 'check', '.'], { cwd: root, encoding: 'utf8' });
      expect(lint.status, lint.stdout + lint.stderr).toBe(0);
    } finally {
      for (const file of [stateFile, outboxFile, `${outboxFile}-wal`, `${outboxFile}-shm`]) rmSync(file, { force: true });
    }
  });

  it('says which port is taken and how to choose another', async () => {
    const busy = await occupied();
    try {
      const emulatorBusy = await runExample({ PORT: String(await freePort()), EMULATOR_PORT: String(busy.port) }, null);
      expect(emulatorBusy.code).toBe(1);
      expect(emulatorBusy.err).toContain(`The mother emulator port ${busy.port} is already in use`);
      expect(emulatorBusy.err).toContain('Set EMULATOR_PORT=<another port>');
      const panelBusy = await runExample({ PORT: String(busy.port), EMULATOR_PORT: String(await freePort()) }, null);
      expect(panelBusy.code).toBe(1);
      expect(panelBusy.err).toContain(`The panel port ${busy.port} is already in use`);
      expect(panelBusy.err).toContain('Set PORT=<another port>');

      const err: string[] = [];
      const io: Io = { out: () => {}, err: (l) => err.push(l), write: () => {}, env: {}, isTTY: false };
      expect(await main(['emulate', '--port', String(busy.port)], io)).toBe(EXIT.unreachable);
      expect(err.join('\n')).toMatch(new RegExp(`port ${busy.port} on 127\\.0\\.0\\.1 is already in use.*--port N`));
      expect(err.join('\n')).not.toMatch(/Cannot destructure/);
    } finally {
      await new Promise((r) => busy.server.close(r));
    }
  });
});

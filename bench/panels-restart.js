// Figure 8c: a `panels` deployment of many panels restarted, on a PostgreSQL license store (SQLite
// without one): with the mother down, the share of its hosts served within the first second and in
// all; with the mother up, its calls to the mother while every kept verdict is fresh.

import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import { round } from './stats.js';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** GETs `/` of every host at `concurrency`; each answer's status and time since `started` (ms). */
async function requestAll(port, hosts, concurrency, started) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const answers = [];
  let next = 0;
  const one = (host) =>
    new Promise((resolve) => {
      http
        .get({ host: '127.0.0.1', port, path: '/', agent, headers: { host } }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode));
        })
        .on('error', () => resolve(0));
    });
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < hosts.length) {
        const host = hosts[next++];
        const status = await one(host);
        answers.push({ status, at: performance.now() - started });
      }
    }),
  );
  agent.destroy();
  return answers;
}

async function openStore(databaseUrl, table, folder) {
  if (databaseUrl) {
    const { default: pg } = await import('pg');
    const { postgresLicenseStore } = await import('panel-license-guard/postgres');
    const pool = new pg.Pool({ connectionString: databaseUrl, max: 10 });
    return { store: postgresLicenseStore({ pool, table }), end: () => pool.end(), name: 'PostgreSQL' };
  }
  const { sqliteLicenseStore } = await import('panel-license-guard/sqlite');
  const store = sqliteLicenseStore({ file: join(folder, 'license.db') });
  return { store, end: async () => store.close(), name: 'SQLite' };
}

export async function measurePanelsRestart({ count, databaseUrl, log }) {
  const { createMotherEmulator } = await import('panel-license-guard/testing');
  const { licenseGuard } = await import('panel-license-guard');
  const panels = Array.from({ length: count }, (_, i) => ({
    apiKey: `pk_restart_${i}`,
    apiSecret: `sk_restart_${i}_0123456789`,
    active: true,
    panel: { name: `Panel ${i}` },
  }));
  const emulator = await createMotherEmulator({ panels });
  const hosts = panels.map((_, i) => `p${i}.restart.example`);
  const resolve = async (host) => {
    const panel = panels[Number(/^p(\d+)\./.exec(host)?.[1])];
    return panel ? { apiKey: panel.apiKey, apiSecret: panel.apiSecret } : null;
  };
  const table = `bench_restart_${randomBytes(4).toString('hex')}`;
  const folder = mkdtempSync(join(tmpdir(), 'plg-bench-restart-'));
  const opened = [];
  const deploy = async (bounds = {}) => {
    const { store, end, name } = await openStore(databaseUrl, table, folder);
    const guard = licenseGuard({ baseUrl: emulator.url, store, panels: { resolve, max: count * 2, ...bounds }, logger: { warn() {}, error() {} } });
    guard.on('error', () => {});
    const server = express()
      .use(guard)
      .get('/', (_req, res) => res.send(res.locals.branding.name))
      .listen(0, '127.0.0.1');
    await new Promise((done) => server.once('listening', done));
    const deployment = { guard, server, port: server.address().port, name, end };
    opened.push(deployment);
    return deployment;
  };
  const stop = async (deployment) => {
    await new Promise((done) => deployment.server.close(done));
    await deployment.guard.close();
    await deployment.end();
  };
  const licenseCalls = () => emulator.requests.filter((request) => request.endpoint === 'license.php').length;
  try {
    // The deployment before the restart met its hosts over time; here at once, past the new-host bound.
    const first = await deploy({ resolveBurst: count, resolvePerSecond: count });
    const warmStarted = performance.now();
    const warm = await requestAll(first.port, hosts, 64, warmStarted);
    if (warm.some((answer) => answer.status !== 200)) throw new Error('bench: the first deployment did not serve every host');
    log(`  first deployment: ${count} hosts served in ${round(performance.now() - warmStarted, 0)} ms`);
    await stop(first);
    // Restarted while the mother is down.
    emulator.setFaults({ down: true });
    const down = await deploy();
    const downAnswers = await requestAll(down.port, hosts, 256, performance.now());
    await stop(down);
    emulator.setFaults({});
    // Restarted with the mother up: the kept verdicts are fresh.
    const before = licenseCalls();
    const up = await deploy();
    const upAnswers = await requestAll(up.port, hosts, 256, performance.now());
    await sleep(5000);
    const calls = licenseCalls() - before;
    await stop(up);
    const served = downAnswers.filter((answer) => answer.status === 200);
    const inFirstSecond = served.filter((answer) => answer.at <= 1000).length;
    const allMs = round(Math.max(...downAnswers.map((answer) => answer.at)), 0);
    log(
      `  ${count} panels on ${first.name}, mother down: ${served.length} served (${inFirstSecond} within 1 s, all answered in ${allMs} ms); mother up: ${calls} mother calls, ${upAnswers.filter((a) => a.status === 200).length} served`,
    );
    return [
      {
        id: 'panels-restart-down',
        figure: `8c. A panels deployment of ${count.toLocaleString('en')} panels restarted while the mother is down: hosts served`,
        measured: `${served.length} of ${count} (${inFirstSecond} within the first second; all answered in ${allMs} ms)`,
        baseline: `${count} hosts`,
        ratio: round(served.length / count, 3),
        target: '1 (every host served)',
        met: served.length === count,
        raw: { inFirstSecond, allMs, refused: downAnswers.length - served.length },
      },
      {
        id: 'panels-restart-up',
        figure: `8c. The same restarted with the mother up and every kept verdict fresh: calls to the mother`,
        measured: `${calls} calls (restart, ${count} hosts served, 5 s after)`,
        baseline: `${count} (one start-up check per panel)`,
        ratio: round(calls / count, 3),
        target: '0',
        met: calls === 0,
        raw: { calls },
      },
    ];
  } finally {
    for (const deployment of opened) deployment.server.close();
    await emulator.close();
    rmSync(folder, { recursive: true, force: true });
    if (databaseUrl) {
      const { default: pg } = await import('pg');
      const client = new pg.Client({ connectionString: databaseUrl });
      await client.connect();
      await client.query(`DROP TABLE IF EXISTS "${table}", "${table}_migrations"`).catch(() => {});
      await client.end();
    }
  }
}

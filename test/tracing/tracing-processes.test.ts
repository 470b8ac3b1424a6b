// Across processes and a crash: a process serves an upload request (its trace comes in as a W3C
// traceparent), enqueues, fails to deliver (the mother is down) and is killed with SIGKILL; a
// second process delivers, and its `send` span links to the `create` span the first one made
// under the request. On every store two processes can share.
import { type ChildProcessByStdio, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../../src/emulator/emulator.js';
import { API_KEY, API_SECRET, startEmulator, waitFor } from '../support/helpers.js';
import { DATABASE_URL, MYSQL_URL, mysqlAnswers, postgresAnswers } from '../support/services.js';

const LOADER = fileURLToPath(new URL('../fixtures/outbox-ts-loader.mjs', import.meta.url));
const CHILD = fileURLToPath(new URL('../fixtures/tracing-child.ts', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'tracing-processes-'));

interface SpanLine {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  links: { traceId: string; spanId: string }[];
  attributes: Record<string, unknown>;
}
type Child = ChildProcessByStdio<Writable, Readable, Readable> & { lines: Record<string, unknown>[]; stderrText: () => string };

const children: Child[] = [];
afterAll(() => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

function startChild(emulator: MotherEmulator, mode: string, env: Record<string, string>): Child {
  const child = spawn(process.execPath, ['--import', LOADER, CHILD], {
    env: { ...process.env, TRACE_MODE: mode, MOTHER_URL: emulator.url, MOTHER_API_KEY: API_KEY, MOTHER_API_SECRET: API_SECRET, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  }) as Child;
  child.lines = [];
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  child.stderrText = () => stderr;
  createInterface({ input: child.stdout }).on('line', (line) => child.lines.push(JSON.parse(line) as Record<string, unknown>));
  children.push(child);
  return child;
}

/** A child takes seconds to start on a loaded machine: its sources are transpiled as it loads them. */
function said(child: Child, what: (line: Record<string, unknown>) => boolean, description: string, timeoutMs = 100_000) {
  return waitFor(
    () => {
      if (child.exitCode !== null && child.exitCode !== 0) throw new Error(`child exited ${child.exitCode}: ${child.stderrText()}`);
      return child.lines.find(what);
    },
    description,
    timeoutMs,
  );
}
const spansOf = (child: Child, prefix: string) => child.lines.filter((l) => l.event === 'span' && String(l.name).startsWith(prefix)) as unknown as SpanLine[];

const pool = (await postgresAnswers()) ? new pg.Pool({ connectionString: DATABASE_URL, max: 2 }) : undefined;
const mysqlPool = (await mysqlAnswers()) ? mysql.createPool({ uri: MYSQL_URL, connectionLimit: 2 }) : undefined;
const schema = `test_trace_kill_${process.pid}`;
const table = `test_trace_kill_${process.pid}`;
afterAll(async () => {
  await pool?.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).finally(() => pool.end());
  await mysqlPool?.query(`DROP TABLE IF EXISTS ${table}, ${table}_tracks, ${table}_migrations`).finally(() => mysqlPool.end());
});

const STORES: [string, Record<string, string>][] = [
  ['SQLite', { OUTBOX_FILE: join(dir, 'traced.db') }],
  ...(pool ? [['PostgreSQL', { OUTBOX_DATABASE_URL: DATABASE_URL, OUTBOX_SCHEMA: schema }] as [string, Record<string, string>]] : []),
  ...(mysqlPool ? [['MySQL', { OUTBOX_MYSQL_URL: MYSQL_URL, OUTBOX_TABLE: table }] as [string, Record<string, string>]] : []),
];

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';

describe.each(STORES)('on %s', (_name, where) => {
  it('links the delivery in a second process to the upload request a killed process served', { timeout: 300_000 }, async () => {
    const emulator = await startEmulator();
    try {
      await uploadKillDeliver(emulator, where);
    } finally {
      await emulator.close();
    }
  });
});

async function uploadKillDeliver(emulator: MotherEmulator, where: Record<string, string>): Promise<void> {
  emulator.setFaults({ down: true });
  const first = startChild(emulator, 'enqueue', where);
  const { url } = (await said(first, (l) => l.event === 'listening', 'the first process to listen')) as { url: string };
  const upload = await fetch(`${url}/upload`, { method: 'POST', headers: { traceparent: `00-${TRACE_ID}-00f067aa0ba902b7-01` } });
  expect(upload.status).toBe(200);
  const { id } = (await upload.json()) as { id: number };
  await said(first, (l) => l.event === 'span' && String(l.name).startsWith('send '), 'a failed push in the first process');
  first.kill('SIGKILL');
  await new Promise((resolve) => (first.signalCode !== null ? resolve(null) : first.once('exit', resolve)));
  expect(first.signalCode).toBe('SIGKILL');
  expect(emulator.releases).toHaveLength(0);

  const [request] = spansOf(first, 'POST /upload');
  const [created] = spansOf(first, 'create ');
  expect(request?.traceId).toBe(TRACE_ID);
  expect(created).toMatchObject({ traceId: TRACE_ID, parentSpanId: request?.spanId, attributes: { 'messaging.message.id': String(id) } });
  // The first process's failed attempt already links to it.
  expect(spansOf(first, 'send ')[0]).toMatchObject({
    links: [{ traceId: TRACE_ID, spanId: created?.spanId }],
    attributes: { 'panel_license.outcome': 'retry' },
  });

  emulator.setFaults({});
  const second = startChild(emulator, 'deliver', where);
  const { stats } = (await said(second, (l) => l.event === 'drained', 'the second process to drain')) as { stats: Record<string, number> };
  expect(stats).toMatchObject({ pending: 0, delivered: 1 });
  expect(emulator.releases).toHaveLength(1);
  const sent = spansOf(second, 'send ');
  expect(sent.at(-1)).toMatchObject({
    links: [{ traceId: TRACE_ID, spanId: created?.spanId }],
    attributes: { 'messaging.message.id': String(id), 'panel_license.outcome': 'delivered' },
  });
  expect(sent.at(-1)?.traceId).not.toBe(TRACE_ID);
}

import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import winston from 'winston';
import type { MotherEmulator } from '../src/emulator/emulator.js';
import { type LicenseGuard, licenseGuard } from '../src/index.js';
import { isolateLogger, type Logger } from '../src/logger.js';
import { createReleaseOutbox } from '../src/outbox/outbox.js';
import { clientFor, startEmulator, waitFor } from './support/helpers.js';

// Loggers passed as they are: each gets the message and the structured fields in its own form.
let emulator: MotherEmulator;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(() => emulator.close());
const closing: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  await Promise.all(closing.splice(0).map((item) => item.close()));
  emulator.setFaults({});
  emulator.reset();
  vi.restoreAllMocks();
});

/** JSON lines written by a logger, parsed. */
function jsonLines(): { stream: Writable; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n')) if (line.trim()) lines.push(JSON.parse(line));
      done();
    },
  });
  return { stream, lines };
}

async function failedCheckWith(logger: Logger): Promise<LicenseGuard> {
  const guard = licenseGuard({ client: clientFor(emulator, { timeoutMs: 1000 }), logger, retryBaseMs: 3600_000, retryMaxMs: 3600_000 });
  closing.push(guard);
  emulator.setFaults({ down: true });
  await guard.start();
  return guard;
}

const EXPECTED = { event: 'check_failed', code: 'HTTP_STATUS', state: 'pending', panel: expect.stringMatching(/^[0-9a-f]{32}$/), attempt: 1 };

describe('the logger option', () => {
  it('gives a pino logger its fields as the object and the text as msg', async () => {
    const { stream, lines } = jsonLines();
    await failedCheckWith(pino({ base: null }, stream));
    await waitFor(() => lines.length > 0, 'a pino line');
    expect(lines[0]).toMatchObject({ level: 40, msg: expect.stringMatching(/^panel-license-guard: The mother answered HTTP 503/), ...EXPECTED });
  });

  it('gives a winston logger one object with message and fields', async () => {
    const { stream, lines } = jsonLines();
    await failedCheckWith(winston.createLogger({ format: winston.format.json(), transports: [new winston.transports.Stream({ stream })] }));
    await waitFor(() => lines.length > 0, 'a winston line');
    expect(lines[0]).toMatchObject({ level: 'warn', message: expect.stringMatching(/^panel-license-guard: The mother answered HTTP 503/), ...EXPECTED });
  });

  it('gives console the text, then the fields, and no format string', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    emulator.setFaults({ endpoint: 'release.php', status: 405 });
    const outbox = createReleaseOutbox({ client: clientFor(emulator), file: ':memory:', logger: console, baseDelayMs: 20, pollIntervalMs: 20 });
    closing.push(outbox);
    await outbox.enqueue({ title: '100%s sure', remote_track_id: 'trk-%d' });
    await waitFor(() => warn.mock.calls.length > 0, 'a console line');
    const [text, fields] = warn.mock.calls[0] as [string, Record<string, unknown>];
    expect(text).toMatch(/^panel-license-guard: release outbox: release #1 is dead after 1 attempt/);
    expect(fields).toMatchObject({ event: 'release_dead', code: 'METHOD_NOT_ALLOWED', release: 1, attempt: 1 });
    // Text with a `%` (a host, a mother's message) cannot act as a format string and swallow the fields.
    isolateLogger(console).warn('host 100%s.example refused', { event: 'x' });
    expect(warn.mock.calls.at(-1)).toEqual(['host 100%%s.example refused', { event: 'x' }]);
  });

  it('logs nothing per request', async () => {
    const logger = { warn: vi.fn(), error: vi.fn() };
    const guard = await failedCheckWith(logger);
    const calls = logger.warn.mock.calls.length + logger.error.mock.calls.length;
    const { default: express } = await import('express');
    const { default: request } = await import('supertest');
    const app = express();
    app.use(guard);
    app.get('/', (_req, res) => {
      res.send('ok');
    });
    for (let i = 0; i < 20; i++) await request(app).get('/');
    expect(logger.warn.mock.calls.length + logger.error.mock.calls.length).toBe(calls);
  });
});

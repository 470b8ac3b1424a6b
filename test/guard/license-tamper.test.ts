import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createMotherClient, type LicenseGuard, type LicenseGuardOptions, licenseGuard } from '../../src/index.js';
import type { MotherEmulator } from '../../src/testing.js';
import { silentLogger } from '../support/guard-app.js';
import { API_KEY, API_SECRET, DEMO_PANEL, sleep, startEmulator, waitFor } from '../support/helpers.js';

const HOUR = 60 * 60 * 1000;
const DAY = 24 * HOUR;

let emulator: MotherEmulator;
const guards: LicenseGuard[] = [];
const dir = mkdtempSync(join(tmpdir(), 'plg-tamper-'));
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(() => emulator.close());
beforeEach(() => {
  emulator.setFaults({});
  emulator.setPanel(API_KEY, { active: true, reason: null, panel: DEMO_PANEL.panel ?? {} });
});
afterEach(() => {
  for (const guard of guards.splice(0)) guard.close();
});

function guardWith(options: Partial<LicenseGuardOptions>): { guard: LicenseGuard; errors: Error[] } {
  const guard = licenseGuard({ baseUrl: emulator.url, apiKey: API_KEY, apiSecret: API_SECRET, jitterMs: 0, logger: silentLogger, ...options });
  guards.push(guard);
  const errors: Error[] = [];
  guard.on('error', (error) => errors.push(error as Error));
  return { guard, errors };
}

/** Runs one guard to a verified active verdict and waits for its state file. */
async function writeActiveFile(now: () => number): Promise<string> {
  const stateFile = join(dir, `state-${Math.random()}.json`);
  const { guard } = guardWith({ stateFile, now });
  expect(await guard.start()).toBe('active');
  await waitFor(() => existsSync(stateFile), 'the state file');
  guard.close();
  return stateFile;
}

const codes = (errors: Error[]) => errors.map((e) => (e as { code?: string }).code);

describe('stateFile tampering', () => {
  it('ignores a file whose stored verdict was edited', async () => {
    const stateFile = await writeActiveFile(Date.now);
    const edited = JSON.parse(readFileSync(stateFile, 'utf8'));
    edited.lastSuccessAt = 8.64e15;
    writeFileSync(stateFile, JSON.stringify(edited));
    emulator.setFaults({ down: true });
    const { guard, errors } = guardWith({ stateFile, startupTimeoutMs: 50 });
    expect(await guard.start()).toBe('pending');
    expect(errors[0]?.message).toMatch(/does not verify/);
    expect(codes(errors)[0]).toBe('STATE_FILE_REJECTED');
  });

  it('ignores a file written before authentication (version 1)', async () => {
    const stateFile = await writeActiveFile(Date.now);
    const { mac: _mac, savedAt: _saved, ...rest } = JSON.parse(readFileSync(stateFile, 'utf8'));
    writeFileSync(stateFile, JSON.stringify({ ...rest, version: 1 }));
    emulator.setFaults({ down: true });
    const { guard, errors } = guardWith({ stateFile, startupTimeoutMs: 50 });
    expect(await guard.start()).toBe('pending');
    expect(errors[0]?.message).toMatch(/format version 1/);
  });

  it('refuses a correctly signed file that claims a success in the future', async () => {
    const stateFile = await writeActiveFile(Date.now);
    // Forged with the real key, as an operator holding the secret could.
    const client = createMotherClient({ baseUrl: emulator.url, apiKey: API_KEY, apiSecret: API_SECRET });
    const { mac: _mac, ...payload } = JSON.parse(readFileSync(stateFile, 'utf8'));
    const forged = { ...payload, lastSuccessAt: Date.now() + 30 * DAY, savedAt: Date.now() + 30 * DAY };
    writeFileSync(stateFile, JSON.stringify({ ...forged, mac: client.localMac('state-file', JSON.stringify(forged)) }));
    emulator.setFaults({ down: true });
    const { guard, errors } = guardWith({ stateFile, startupTimeoutMs: 50 });
    expect(await guard.start()).toBe('pending');
    expect(codes(errors)).toContain('CLOCK_ROLLBACK');
  });

  it('rejects a deeply nested file and a FIFO without hanging or crashing start()', async () => {
    const nested = join(dir, `nested-${Math.random()}.json`);
    writeFileSync(nested, `${'['.repeat(200_000)}${']'.repeat(200_000)}`);
    const fifo = join(dir, `fifo-${Math.random()}`);
    execFileSync('mkfifo', [fifo]);
    emulator.setFaults({ down: true });
    for (const stateFile of [nested, fifo]) {
      const { guard, errors } = guardWith({ stateFile, startupTimeoutMs: 50 });
      expect(await guard.start()).toBe('pending');
      expect(codes(errors)[0], stateFile).toBe('STATE_FILE_REJECTED');
    }
  });

  it('grants a restored verdict only the grace its original success left', async () => {
    const t0 = Date.now();
    const stateFile = await writeActiveFile(() => t0);
    emulator.setFaults({ down: true });
    const { guard } = guardWith({ stateFile, now: () => t0 + 70 * HOUR });
    expect(await guard.start()).toBe('grace');
    const endsAt = guard.status().graceEndsAt ?? 0;
    expect(Math.abs(endsAt - (t0 + 72 * HOUR))).toBeLessThan(5000);
  });

  it('does not resume after the clock was set back below the time the file last saw', async () => {
    const t0 = Date.now();
    let now = t0;
    const stateFile = join(dir, `outage-${Math.random()}.json`);
    const first = guardWith({ stateFile, now: () => now }).guard;
    expect(await first.start()).toBe('active');
    // Two days of outage: each failed check moves the file's high-water mark forward.
    emulator.setFaults({ down: true });
    now = t0 + 48 * HOUR;
    expect(await first.refresh()).toBe('grace');
    await waitFor(() => existsSync(stateFile) && JSON.parse(readFileSync(stateFile, 'utf8')).savedAt >= t0 + 48 * HOUR, 'the high-water mark');
    first.close();
    // Restart with the clock set back to just after the last success: a fresh 72 h before the fix.
    const { guard, errors } = guardWith({ stateFile, now: () => t0 + HOUR, startupTimeoutMs: 50 });
    expect(await guard.start()).toBe('pending');
    expect(codes(errors)).toContain('CLOCK_ROLLBACK');
  });
});

describe('grace and the clock', () => {
  it('is not extended by setting the clock back within a process', async () => {
    let offset = 0;
    // Grace long enough to see 'grace' first on a loaded machine, short enough to watch it end.
    const { guard } = guardWith({ gracePeriodMs: 1500, now: () => Date.now() + offset });
    expect(await guard.start()).toBe('active');
    emulator.setFaults({ down: true });
    offset = -30 * DAY;
    expect(await guard.refresh()).toBe('grace');
    await waitFor(() => guard.state === 'locked', 'grace to end on the monotonic clock', 8000);
  });

  it("ends at expires_at by the mother's clock, not ours", async () => {
    // The mother's clock is 1.5 s before the end of the license's last day; ours is hours behind.
    const endOfDay = (ms: number) => Math.floor(ms / DAY) * DAY + DAY;
    const offsetSeconds = Math.floor((endOfDay(Date.now() + 3000) - Date.now()) / 1000) - 2;
    const motherNow = Date.now() + offsetSeconds * 1000;
    const expiresAt = new Date(motherNow).toISOString().slice(0, 10);
    emulator.setPanel(API_KEY, { active: true, reason: null, panel: { ...DEMO_PANEL.panel, expires_at: expiresAt } });
    emulator.setFaults({ clockOffsetSeconds: offsetSeconds });
    const { guard } = guardWith({});
    expect(await guard.start()).toBe('active');
    emulator.setFaults({ down: true, clockOffsetSeconds: offsetSeconds });
    expect(await guard.refresh()).toBe('grace');
    await waitFor(() => guard.state === 'locked', 'expiry by the mother clock', 8000);
  });
});

describe('a logger that throws', () => {
  const throwing = {
    warn() {
      throw new Error('logger down');
    },
    error() {
      throw new Error('logger down');
    },
  };

  it('cannot keep the panel open after grace ends', async () => {
    const guard = licenseGuard({ baseUrl: emulator.url, apiKey: API_KEY, apiSecret: API_SECRET, gracePeriodMs: 1500, logger: throwing });
    guards.push(guard);
    expect(await guard.start()).toBe('active');
    emulator.setFaults({ down: true });
    expect(await guard.refresh()).toBe('grace');
    await sleep(1600);
    expect(await guard.refresh()).toBe('locked');
  });

  it('cannot make start() reject when the state file is unwritable', async () => {
    const guard = licenseGuard({ baseUrl: emulator.url, apiKey: API_KEY, apiSecret: API_SECRET, stateFile: '/dev/null/state.json', logger: throwing });
    guards.push(guard);
    await expect(guard.start()).resolves.toBe('active');
    await sleep(50);
  });
});

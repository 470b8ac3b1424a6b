import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT, type Io } from '../src/cli/io.js';
import { main } from '../src/cli/main.js';
import type { MotherEmulator } from '../src/emulator/emulator.js';
import { API_KEY, API_SECRET, startEmulator } from './helpers.js';

let emulator: MotherEmulator;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(() => emulator.close());

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
});

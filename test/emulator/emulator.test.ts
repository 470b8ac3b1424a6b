import http from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../../src/emulator/emulator.js';
import { signRequest } from '../../src/signing.js';
import { API_KEY, API_SECRET, DEMO_PANEL, startEmulator } from '../support/helpers.js';

let emulator: MotherEmulator;
let nowMs = Date.now();
beforeAll(async () => {
  emulator = await startEmulator([DEMO_PANEL], { now: () => nowMs });
});
afterAll(() => emulator.close());
beforeEach(() => {
  nowMs = Date.now();
  emulator.setFaults({});
  emulator.reset();
});

function signedPost(path: string, body: string, timestamp = Math.floor(nowMs / 1000), secret = API_SECRET) {
  return fetch(`${emulator.url}/${path}`, {
    method: 'POST',
    headers: { ...signRequest({ apiKey: API_KEY, apiSecret: secret, body, timestamp }), 'Content-Type': 'application/json' },
    body,
  });
}

describe('createMotherEmulator()', () => {
  it('validates its options', async () => {
    const { createMotherEmulator } = await import('../../src/testing.js');
    await expect(createMotherEmulator({ panels: [DEMO_PANEL], windowSecs: 10 } as never)).rejects.toThrow(
      /unknown option `windowSecs`. Did you mean `windowSeconds`\?/,
    );
    await expect(createMotherEmulator({ panels: [DEMO_PANEL], host: '0.0.0.0' as never })).rejects.toThrow(/`host` must be a loopback address/);
    await expect(createMotherEmulator({ panels: [] })).rejects.toThrow(/needs `panels`/);
  });

  it('answers 405 with Allow: POST to other methods', async () => {
    for (const method of ['GET', 'PUT', 'DELETE']) {
      const res = await fetch(`${emulator.url}/license.php`, { method });
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe('POST');
      expect(await res.json()).toMatchObject({ ok: false });
    }
  });

  it('answers 401 to a missing key, a bad signature and a stale timestamp', async () => {
    expect((await fetch(`${emulator.url}/license.php`, { method: 'POST' })).status).toBe(401);
    expect((await signedPost('license.php', '', undefined, 'wrong')).status).toBe(401);
    expect((await signedPost('license.php', '', Math.floor(nowMs / 1000) - 301)).status).toBe(401);
    expect((await signedPost('license.php', '', Math.floor(nowMs / 1000) - 299)).status).toBe(200);
  });

  it('checks the signature over the raw bytes, not a re-serialization', async () => {
    const body = '{ "release" : { "title" : "Spaced" } }';
    const timestamp = Math.floor(nowMs / 1000);
    const headers = signRequest({ apiKey: API_KEY, apiSecret: API_SECRET, body: '{"release":{"title":"Spaced"}}', timestamp });
    const res = await fetch(`${emulator.url}/release.php`, { method: 'POST', headers, body });
    expect(res.status).toBe(401);
    expect((await signedPost('release.php', body)).status).toBe(200);
  });

  it('answers 422 "Missing release title." and records accepted releases', async () => {
    const res = await signedPost('release.php', '{"release":{"album":"A"}}');
    expect(res.status).toBe(422);
    expect(await res.json()).toEqual({ ok: false, error: 'Missing release title.' });
    const ok = await signedPost('release.php', '{"release":{"title":"T","remote_track_id":"r1"}}');
    expect(await ok.json()).toEqual({ ok: true, release_id: emulator.releases[0]?.releaseId });
    expect(emulator.releases.map((r) => r.release.remote_track_id)).toEqual(['r1']);
  });

  it('shifts server_time and Date with clockOffsetSeconds', async () => {
    emulator.setFaults({ clockOffsetSeconds: 600 });
    const res = await signedPost('license.php', '', Math.floor(nowMs / 1000) + 600);
    const body = (await res.json()) as { server_time: number };
    expect(body.server_time).toBe(Math.floor(nowMs / 1000) + 600);
    expect(Date.parse(res.headers.get('date') ?? '')).toBeGreaterThan(nowMs + 590_000);
  });

  it('scopes faults to one endpoint when asked', async () => {
    emulator.setFaults({ down: true, endpoint: 'release.php' });
    expect((await signedPost('license.php', '')).status).toBe(200);
    expect((await signedPost('release.php', '{"release":{"title":"x"}}')).status).toBe(503);
  });

  describe('admin routes', () => {
    it('flips a license and shows state without secrets', async () => {
      const flip = await fetch(`${emulator.adminUrl}/panels/${API_KEY}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ active: false, reason: 'Suspended by admin' }),
      });
      expect(flip.status).toBe(200);
      expect(await (await signedPost('license.php', '')).json()).toMatchObject({ active: false, reason: 'Suspended by admin' });
      const state = await (await fetch(`${emulator.adminUrl}/state`)).text();
      expect(state).not.toContain(API_SECRET);
      // Unlocking without a reason clears the old one.
      await fetch(`${emulator.adminUrl}/panels/${API_KEY}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"active":true}' });
      expect(await (await signedPost('license.php', '')).json()).toMatchObject({ active: true, reason: null });
    });

    it('refuses a non-boolean active', async () => {
      const res = await fetch(`${emulator.adminUrl}/panels/${API_KEY}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"active":"no"}',
      });
      expect(res.status).toBe(422);
    });

    it('answers only loopback Host headers, and writes only as JSON (DNS rebinding, cross-site forms)', async () => {
      const { port } = new URL(emulator.adminUrl);
      const send = (path: string, host: string, method = 'GET', contentType?: string) =>
        new Promise<number>((resolve, reject) => {
          // node:http lets the test set any Host, as a rebinding page's browser would.
          const headers: Record<string, string> = { host, ...(contentType ? { 'content-type': contentType } : {}) };
          const req = http.request({ host: '127.0.0.1', port, path: `/__emulator${path}`, method, headers }, (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          });
          req.on('error', reject);
          req.end(method === 'GET' ? undefined : '{"active":false}');
        });
      for (const host of ['evil.example', `evil.example:${port}`, '127.0.0.1', `127.0.0.1:1`, `127.0.0.1.evil.example:${port}`]) {
        expect(await send('/state', host), host).toBe(403);
        expect(await send(`/panels/${API_KEY}`, host, 'POST', 'application/json'), host).toBe(403);
      }
      for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, `LOCALHOST:${port}`]) expect(await send('/state', host), host).toBe(200);
      expect(await send(`/panels/${API_KEY}`, `127.0.0.1:${port}`, 'POST', 'text/plain')).toBe(415);
      expect(await send(`/panels/${API_KEY}`, `127.0.0.1:${port}`, 'POST', 'application/x-www-form-urlencoded')).toBe(415);
      expect(await (await signedPost('license.php', '')).json()).toMatchObject({ active: true });
    });
  });
});

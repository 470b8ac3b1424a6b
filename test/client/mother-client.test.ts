import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { inspect } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createMotherClient } from '../../src/client/mother-client.js';
import type { MotherEmulator } from '../../src/emulator/emulator.js';
import {
  AuthenticationError,
  HttpStatusError,
  InvalidReleaseError,
  MalformedResponseError,
  MethodNotAllowedError,
  NetworkError,
  RedirectRefusedError,
  ResponseTooLargeError,
  ServerValidationError,
  TimeoutError,
} from '../../src/errors.js';
import { API_KEY, API_SECRET, clientFor, failure, startEmulator } from '../support/helpers.js';

let emulator: MotherEmulator;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(() => emulator.close());
beforeEach(() => {
  emulator.setFaults({});
  emulator.reset();
});

/** A throwaway HTTP server answering every request with `handler`. */
async function rawServer(handler: http.RequestListener): Promise<{ url: string; hits: () => number; close: () => Promise<void> }> {
  let hits = 0;
  const server = http.createServer((req, res) => {
    hits++;
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/api`, hits: () => hits, close: () => new Promise((r) => server.close(() => r())) };
}

/** A fetch that records each request's init before sending it. */
function recordingFetch(sent: RequestInit[]) {
  return (url: string, init: RequestInit) => {
    sent.push(init);
    return fetch(url, init);
  };
}

describe('createMotherClient()', () => {
  describe('checkLicense()', () => {
    it('sends an empty signed body and returns the parsed answer', async () => {
      const sent: RequestInit[] = [];
      const client = clientFor(emulator, { fetch: recordingFetch(sent) });
      const answer = await client.checkLicense();
      expect(answer).toMatchObject({ ok: true, active: true, reason: null, panel: { name: 'Rhythm Hub', brand_color: '#ff5500' } });
      expect(typeof answer.server_time).toBe('number');
      expect((sent[0]?.body as Uint8Array | undefined)?.byteLength).toBe(0);
      expect(sent[0]?.redirect).toBe('manual');
      expect(emulator.requests.map((r) => [r.endpoint, r.status])).toEqual([['license.php', 200]]);
    });

    it('reports an inactive license as a verdict, not an error', async () => {
      emulator.setPanel(API_KEY, { active: false, reason: 'Unpaid invoice' });
      try {
        await expect(clientFor(emulator).checkLicense()).resolves.toMatchObject({ active: false, reason: 'Unpaid invoice' });
      } finally {
        emulator.setPanel(API_KEY, { active: true, reason: null });
      }
    });

    it('joins the base URL with or without a trailing slash', async () => {
      await expect(clientFor(emulator, { baseUrl: `${emulator.url}/` }).checkLicense()).resolves.toMatchObject({ ok: true });
      await expect(clientFor(emulator, { baseUrl: emulator.url }).checkLicense()).resolves.toMatchObject({ ok: true });
    });
  });

  describe('pushRelease()', () => {
    it('sends the exact serialized bytes and returns the release id', async () => {
      const sent: RequestInit[] = [];
      const client = clientFor(emulator, { fetch: recordingFetch(sent) });
      const result = await client.pushRelease({ title: 'Café 🎵', remote_track_id: 'trk-1' });
      expect(result).toEqual({ ok: true, release_id: emulator.releases[0]?.releaseId });
      expect(Buffer.from(sent[0]?.body as Uint8Array).toString('utf8')).toBe('{"release":{"title":"Café 🎵","remote_track_id":"trk-1"}}');
      expect((sent[0]?.headers as Record<string, string> | undefined)?.['Content-Type']).toBe('application/json');
      expect(emulator.releases[0]?.release).toEqual({ title: 'Café 🎵', remote_track_id: 'trk-1' });
    });

    it('accepts any 2xx with ok and release_id', async () => {
      emulator.setFaults({ successStatus: 201 });
      await expect(clientFor(emulator).pushRelease({ title: 'x' })).resolves.toMatchObject({ ok: true });
    });

    it('validates locally before any network call', async () => {
      const error = await failure(clientFor(emulator).pushRelease({ title: '' }));
      expect(error).toBeInstanceOf(InvalidReleaseError);
      expect(error.message).toBe('Missing release title.');
      expect(emulator.requests).toHaveLength(0);
    });

    it("carries the mother's 422 message", async () => {
      const error = await failure(clientFor(emulator).pushSerializedRelease('{"release":{}}'));
      expect(error).toBeInstanceOf(ServerValidationError);
      expect(error).toMatchObject({ code: 'VALIDATION_FAILED', status: 422, retryable: false, serverMessage: 'Missing release title.' });
    });
  });

  describe('when the mother fails', () => {
    const cases: [string, Parameters<MotherEmulator['setFaults']>[0], new (...args: never[]) => Error, Record<string, unknown>][] = [
      ['down (503 HTML)', { down: true, retryAfterSeconds: 7 }, HttpStatusError, { code: 'HTTP_STATUS', status: 503, retryable: true, retryAfterMs: 7000 }],
      ['an HTML 500', { htmlError: true }, HttpStatusError, { status: 500, retryable: true }],
      ['a 429', { status: 429 }, HttpStatusError, { status: 429, retryable: true }],
      ['a 400', { status: 400 }, HttpStatusError, { status: 400, retryable: false }],
      ['a 405', { status: 405 }, MethodNotAllowedError, { code: 'METHOD_NOT_ALLOWED', retryable: false }],
      ['truncated JSON', { truncateJson: true }, MalformedResponseError, { code: 'MALFORMED_RESPONSE', retryable: true }],
      ['active as a string', { licenseBody: { ok: true, active: 'false', reason: null, panel: {} } }, MalformedResponseError, { retryable: true }],
      ['a missing panel', { licenseBody: { ok: true, active: true, reason: null } }, MalformedResponseError, {}],
      ['ok: false with 200', { licenseBody: { ok: false, error: 'nope' } }, MalformedResponseError, {}],
      ['a redirect', { redirectTo: 'http://127.0.0.1:9/elsewhere' }, RedirectRefusedError, { code: 'REDIRECT_REFUSED', status: 302 }],
    ];
    for (const [what, faults, ErrorClass, fields] of cases) {
      it(`throws ${ErrorClass.name} on ${what}`, async () => {
        emulator.setFaults(faults);
        const error = await failure(clientFor(emulator).checkLicense());
        expect(error).toBeInstanceOf(ErrorClass);
        expect(error).toMatchObject(fields);
      });
    }

    it('throws AuthenticationError on a wrong secret, whatever the body', async () => {
      const error = await failure(clientFor(emulator, { apiSecret: 'wrong-secret' }).checkLicense());
      expect(error).toBeInstanceOf(AuthenticationError);
      expect(error).toMatchObject({ code: 'AUTH_REJECTED', status: 401, retryable: false });
      const empty = await rawServer((_req, res) => res.writeHead(401).end());
      const html = await rawServer((_req, res) => res.writeHead(401, { 'content-type': 'text/html' }).end('<h1>no</h1>'));
      for (const server of [empty, html]) {
        const client = createMotherClient({ baseUrl: server.url, apiKey: API_KEY, apiSecret: API_SECRET });
        expect(await failure(client.checkLicense())).toBeInstanceOf(AuthenticationError);
        await server.close();
      }
    });

    it('times out a slow answer', async () => {
      emulator.setFaults({ delayMs: 1000 });
      const error = await failure(clientFor(emulator, { timeoutMs: 100 }).checkLicense());
      expect(error).toBeInstanceOf(TimeoutError);
      expect(error).toMatchObject({ code: 'TIMEOUT', retryable: true });
    });

    it('times out a body that trickles forever', async () => {
      const server = await rawServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"ok":');
      });
      const client = createMotherClient({ baseUrl: server.url, apiKey: API_KEY, apiSecret: API_SECRET, timeoutMs: 150 });
      expect(await failure(client.checkLicense())).toBeInstanceOf(TimeoutError);
      await server.close();
    });

    it('reports an unreachable mother as a network error', async () => {
      const server = await rawServer(() => {});
      const { url } = server;
      await server.close();
      const error = await failure(createMotherClient({ baseUrl: url, apiKey: API_KEY, apiSecret: API_SECRET }).checkLicense());
      expect(error).toBeInstanceOf(NetworkError);
      expect(error).toMatchObject({ code: 'NETWORK', retryable: true });
      expect(error.cause).toBeDefined();
    });

    it('refuses an HTML page served with 200', async () => {
      const server = await rawServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<html>maintenance</html>'));
      const error = await failure(createMotherClient({ baseUrl: server.url, apiKey: API_KEY, apiSecret: API_SECRET }).checkLicense());
      expect(error).toBeInstanceOf(MalformedResponseError);
      expect(error.message).toMatch(/HTML page/);
      await server.close();
    });

    it('keeps the body of a 2xx answer that is not JSON out of the error, its cause included', async () => {
      // A PHP debug line printing the key: JSON.parse quotes a short body whole in its message.
      const server = await rawServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end(API_KEY));
      const error = await failure(createMotherClient({ baseUrl: server.url, apiKey: API_KEY, apiSecret: API_SECRET }).checkLicense());
      expect(error).toBeInstanceOf(MalformedResponseError);
      expect(inspect(error, { depth: 5 })).not.toContain(API_KEY);
      await server.close();
    });

    it('refuses answers over 1 MiB, declared or streamed', async () => {
      const big = `{"pad":"${'x'.repeat(1024 * 1024)}"}`;
      const declared = await rawServer((_req, res) => res.writeHead(200, { 'content-length': Buffer.byteLength(big) }).end(big));
      const streamed = await rawServer((_req, res) => {
        res.writeHead(200);
        res.end(big);
      });
      for (const server of [declared, streamed]) {
        const client = createMotherClient({ baseUrl: server.url, apiKey: API_KEY, apiSecret: API_SECRET });
        expect(await failure(client.checkLicense())).toBeInstanceOf(ResponseTooLargeError);
        await server.close();
      }
    });

    it('never follows a redirect to another host', async () => {
      const elsewhere = await rawServer((_req, res) => res.writeHead(200).end('{}'));
      emulator.setFaults({ redirectTo: `${elsewhere.url}/license.php` });
      const refused = await failure(clientFor(emulator).checkLicense());
      expect(refused).toBeInstanceOf(RedirectRefusedError);
      // It names what was called and what to check.
      expect(refused.message).toContain(`POST ${emulator.url}/license.php`);
      expect(refused.message).toMatch(/Check `baseUrl`/);
      expect(elsewhere.hits()).toBe(0);
      await elsewhere.close();
    });

    it('names the URL it called and `baseUrl` on a 404', async () => {
      const client = createMotherClient({ baseUrl: `${emulator.url}/partner-api`, apiKey: API_KEY, apiSecret: API_SECRET });
      const missing = await failure(client.checkLicense());
      expect(missing).toMatchObject({ code: 'HTTP_STATUS', status: 404 });
      expect(missing.message).toContain(
        `POST ${emulator.url}/partner-api/license.php: check \`baseUrl\`, the directory that holds license.php and release.php`,
      );
    });
  });

  describe('clock skew', () => {
    it('recovers from a local clock an hour behind with one retry', async () => {
      const client = clientFor(emulator, { now: () => Date.now() - 3_600_000 });
      await expect(client.checkLicense()).resolves.toMatchObject({ active: true });
      expect(emulator.requests.map((r) => r.status)).toEqual([401, 200]);
      expect(Math.abs(client.clockOffsetMs() - 3_600_000)).toBeLessThan(3000);
      await client.pushRelease({ title: 'after the fix' });
      expect(emulator.requests.map((r) => r.status)).toEqual([401, 200, 200]);
    });

    it('learns the offset from server_time', async () => {
      emulator.setFaults({ clockOffsetSeconds: 120 });
      const client = clientFor(emulator);
      await client.checkLicense();
      expect(Math.abs(client.clockOffsetMs() - 120_000)).toBeLessThan(2000);
    });

    it('does not retry a 401 when the clocks agree', async () => {
      await failure(clientFor(emulator, { apiSecret: 'wrong' }).checkLicense());
      expect(emulator.requests).toHaveLength(1);
    });
  });

  describe('secrets', () => {
    it('never shows the secret or a signature in inspect, JSON or errors', async () => {
      const signatures: string[] = [];
      const client = clientFor(emulator, {
        fetch: (url, init) => {
          signatures.push((init.headers as Record<string, string>)['X-Signature'] ?? '');
          return fetch(url, init);
        },
      });
      emulator.setFaults({ status: 500 });
      const errors = [await failure(client.checkLicense()), await failure(client.pushRelease({ title: 'x' }))];
      emulator.setFaults({});
      errors.push(await failure(clientFor(emulator, { apiSecret: `${API_SECRET}x` }).checkLicense()));
      const texts = [
        inspect(client, { depth: 10, showHidden: true }),
        inspect(client, { depth: 10, showHidden: true, customInspect: false }),
        JSON.stringify(client),
        JSON.stringify({ ...client }),
        ...errors.flatMap((e) => [inspect(e, { depth: 10 }), String(e.stack), JSON.stringify(e)]),
      ];
      for (const text of texts) {
        expect(text).not.toContain(API_SECRET);
        for (const signature of signatures) expect(text).not.toContain(signature);
      }
    });
  });

  it('behaves as a plain object: methods work destructured, a spread keeps baseUrl and timeoutMs', async () => {
    const client = clientFor(emulator, { timeoutMs: 4000 });
    const { checkLicense, pushRelease } = client;
    expect((await checkLicense()).active).toBe(true);
    expect((await pushRelease({ title: 'Loose', primary_artist: 'A', remote_track_id: 'loose-1' })).ok).toBe(true);
    expect({ ...client }).toMatchObject({ baseUrl: client.baseUrl, timeoutMs: 4000, panelId: client.panelId });
  });

  describe('echoed request headers', () => {
    it('redacts our key and signature from mother text it keeps', async () => {
      // A proxy whose error page echoes the request headers, as some do.
      const echo = await rawServer((req, res) => {
        const key = String(req.headers['x-api-key']);
        const hidden = `${key.slice(0, 3)}\u200b${key.slice(3)}`;
        const error = `Bad gateway for ${req.headers['x-api-key']} (${hidden}) signed sig_${req.headers['x-signature']} at ${req.headers['x-timestamp']}`;
        res.writeHead(502, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: false, error }));
      });
      try {
        const signatures: string[] = [];
        const client = createMotherClient({
          baseUrl: echo.url,
          apiKey: API_KEY,
          apiSecret: API_SECRET,
          fetch: (url, init) => {
            signatures.push((init.headers as Record<string, string>)['X-Signature'] ?? '');
            return fetch(url, init);
          },
        });
        const error = await failure(client.checkLicense());
        expect(error.message).toMatch(/^The mother answered HTTP 502: Bad gateway for \[api key\] \(\[api key\]\) signed sig_\[redacted\] at \d+$/);
        expect(signatures).toHaveLength(1);
        expect(error.message).not.toContain(signatures[0]);
        expect(error.message).not.toContain(API_KEY);
      } finally {
        await echo.close();
      }
    });
  });

  describe('options', () => {
    const base = { apiKey: API_KEY, apiSecret: API_SECRET };
    it('requires https except for loopback or an explicit opt-in', () => {
      expect(() => createMotherClient({ ...base, baseUrl: 'http://mother.example/api' })).toThrow(/allowInsecureHttp/);
      expect(() => createMotherClient({ ...base, baseUrl: 'http://mother.example/api', allowInsecureHttp: true })).not.toThrow();
      expect(() => createMotherClient({ ...base, baseUrl: 'http://localhost:8080/api' })).not.toThrow();
      expect(() => createMotherClient({ ...base, baseUrl: 'ftp://mother.example' })).toThrow(/`baseUrl` must use https:/);
      expect(() => createMotherClient({ ...base, baseUrl: 'mother.example' })).toThrow(/`baseUrl` is not an absolute URL/);
    });
    it('refuses a base URL that ends in a script name, and says which directory to pass', () => {
      for (const baseUrl of [
        'https://mother.example/api/partner/license.php',
        'https://mother.example/api/partner/Release.PHP/',
        'https://mother.example/index.php',
      ])
        expect(() => createMotherClient({ ...base, baseUrl })).toThrow(
          /`baseUrl` ends in a script name .*it is the directory that holds license\.php and release\.php/,
        );
      expect(() => createMotherClient({ ...base, baseUrl: 'https://mother.example/api/partner/license.php' })).toThrow(
        /Pass "https:\/\/mother\.example\/api\/partner"/,
      );
      expect(() => createMotherClient({ ...base, baseUrl: 'https://mother.example/api/partner/' })).not.toThrow();
    });
    it('names unknown options with a suggestion', () => {
      expect(() => createMotherClient({ ...base, baseUrl: 'https://m.example', timeoutMS: 5 } as never)).toThrow(
        /unknown option `timeoutMS`. Did you mean `timeoutMs`\?/,
      );
      expect(() => createMotherClient({ ...base, baseUrl: 'https://m.example', timeoutMs: -1 })).toThrow(/`timeoutMs` must be an integer/);
      expect(() => createMotherClient({ ...base, apiSecret: '', baseUrl: 'https://m.example' })).toThrow(/`apiSecret`/);
    });
  });
});

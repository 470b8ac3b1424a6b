import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import express from 'express';
import express4 from 'express4';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { licenseConsole } from '../../src/console.js';
import { createReleaseOutbox, licenseGuard, memoryOutboxStore } from '../../src/index.js';
import { type ConsoleDeployment, consoleDeployment } from '../support/console-app.js';
import { silentLogger } from '../support/guard-app.js';
import { clientFor, sleep, startEmulator, waitFor } from '../support/helpers.js';

// The operator's console over HTTP: who may see it, what an action needs, what a page may load,
// and that what it shows and does is the guard's and the outbox's own.
let deployment: ConsoleDeployment;
beforeAll(async () => {
  deployment = await consoleDeployment();
});
afterAll(() => deployment.close());

const operator = (path: string) => request(deployment.app).get(`/ops/license${path}`).set('x-operator', 'yes');
/** A GET that gives the CSRF cookie and the token its forms carry. */
async function tokenFor(path: string): Promise<{ cookie: string; csrf: string }> {
  const page = await operator(path).expect(200);
  const cookie = String(page.headers['set-cookie']).split(';')[0] as string;
  const csrf = /name="csrf" value="([^"]+)"/.exec(page.text)?.[1] as string;
  return { cookie, csrf };
}

/** The status line and the rest of the answer to `raw`, written as it is to a listening `app`. */
async function rawRequest(app: express.Express, raw: string): Promise<string> {
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  try {
    const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
    socket.end(raw);
    const chunks: Buffer[] = [];
    for await (const chunk of socket) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString();
  } finally {
    server.close();
  }
}

describe('licenseConsole()', () => {
  it('refuses to be made without authorize, or with objects that are not a guard and an outbox', async () => {
    expect(() => licenseConsole({} as never)).toThrow(/`authorize` is required/);
    expect(() => licenseConsole({ authorize: () => true } as never)).toThrow(/`guard` and `outbox` are both missing/);
    expect(() => licenseConsole({ authorize: () => true, guard: (() => {}) as never })).toThrow(/`guard` is not a guard made by licenseGuard\(\)/);
    const both = () => licenseConsole({ authorize: () => true, outbox: {} as never, extra: 1 } as never);
    expect(both).toThrow(/`outbox` is not an outbox made by createReleaseOutbox\(\)/);
    expect(both).toThrow(/extra/);
  });

  it('answers 401 (or 403) and nothing else to a request authorize() does not let in', async () => {
    for (const path of ['/', '/releases', `/releases/${deployment.deadId}`, '/panels/x']) {
      const refused = await request(deployment.app).get(`/ops/license${path}`).expect(401);
      expect(refused.text).toBe('Not authorised');
      expect(refused.headers['set-cookie']).toBeUndefined();
    }
    await request(deployment.app).post(`/ops/license/releases/${deployment.deadId}/retry`).expect(401);
    const app = express();
    app.use(licenseConsole({ outbox: deployment.outbox, authorize: () => 403 }));
    expect((await request(app).get('/releases').expect(403)).text).toBe('Forbidden');
  });

  it('lists the panels locked and in grace first, with a strict CSP, and no key, secret or signature anywhere', async () => {
    const page = await operator('/').expect(200);
    expect(page.headers['content-security-policy']).toMatch(
      /^default-src 'none'; style-src 'nonce-[^']+'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'/,
    );
    expect(page.headers['cache-control']).toBe('no-store');
    const states = [...page.text.matchAll(/<span class="state (\w+)">/g)].map((match) => match[1]);
    expect(states).toEqual(['locked', 'grace', 'active']);
    for (const secret of ['sk_beats', 'sk_labelx', 'sk_acme', 'pk_beats', 'pk_acme', 'X-Signature']) expect(page.text).not.toContain(secret);
    const locked = await operator('/?state=locked').expect(200);
    expect([...locked.text.matchAll(/<span class="state (\w+)">/g)].map((match) => match[1])).toEqual(['locked']);
  });

  it('shows a panel, and checks it now from a form with its token', async () => {
    const list = await operator('/?state=locked').expect(200);
    const panelPath = /href="\/ops\/license(\/panels\/[^"]+)"/.exec(list.text)?.[1] as string;
    const page = await operator(panelPath).expect(200);
    expect(page.text).toContain('Unpaid invoice');
    expect(page.text).toContain('labelx.example');
    // The branding the panel's templates get, by the same snapshot.
    expect(page.text).toContain('Branding, as the templates get it');
    expect(page.text).toContain('<dd>Label X</dd>');
    // The hosts its license names, and what the guard does with others.
    expect(page.text).toContain('<dd>labelx.example, labelx.panels.example</dd>');
    expect(page.text).toContain('enforced (domains: &#39;enforce&#39;): a request for another host is refused');
    expect(list.text).toContain('<td>labelx.example, labelx.panels.example</td>');
    const { cookie, csrf } = await tokenFor(panelPath);
    const checksBefore = deployment.mother.requests.filter((r) => r.endpoint === 'license.php').length;
    const done = await request(deployment.app)
      .post(`/ops/license${panelPath}/refresh`)
      .set('x-operator', 'yes')
      .set('Cookie', cookie)
      .type('form')
      .send({ csrf })
      .expect(303);
    expect(done.headers.location).toMatch(/\?done=checked$/);
    expect(deployment.mother.requests.filter((r) => r.endpoint === 'license.php').length).toBe(checksBefore + 1);
  });

  it('refuses an action without the token, with a wrong one, or from another site', async () => {
    const path = `/ops/license/releases/${deployment.deadId}/retry`;
    const { cookie, csrf } = await tokenFor(`/releases/${deployment.deadId}`);
    const post = () => request(deployment.app).post(path).set('x-operator', 'yes').type('form');
    await post().send({}).expect(403);
    await post()
      .set('Cookie', cookie)
      .send({ csrf: `${csrf.slice(1)}A` })
      .expect(403);
    await post().send({ csrf }).expect(403); // the token without its cookie
    await post().set('Cookie', cookie).set('Sec-Fetch-Site', 'cross-site').send({ csrf }).expect(403);
    await post().set('Cookie', cookie).set('Origin', 'https://evil.example').send({ csrf }).expect(403);
    await post().set('Cookie', cookie).set('Origin', 'null').send({ csrf }).expect(403);
    expect((await deployment.outbox.get(deployment.deadId))?.state).toBe('dead');
  });

  it('shows a release title and a panel name from the mother as text, never markup', async () => {
    const list = await operator('/releases?state=dead').expect(200);
    expect(list.text).not.toContain('<script>window.__xss');
    expect(list.text).not.toContain('<img src=x');
    expect(list.text).toContain('&lt;script&gt;window.__xss=2&lt;/script&gt;');
    const release = await operator(`/releases/${deployment.deadId}`).expect(200);
    expect(release.text).not.toContain('<img src=x');
    expect(release.text).toContain('422');
  });

  it('retries a dead release, which the mother then receives', async () => {
    const { cookie, csrf } = await tokenFor(`/releases/${deployment.deadId}`);
    const done = await request(deployment.app)
      .post(`/ops/license/releases/${deployment.deadId}/retry`)
      .set('x-operator', 'yes')
      .set('Cookie', cookie)
      .type('form')
      .send({ csrf })
      .expect(303);
    expect(done.headers.location).toBe(`/ops/license/releases/${deployment.deadId}?done=retried`);
    await waitFor(async () => (await deployment.outbox.get(deployment.deadId))?.state === 'delivered', 'the retried release delivered');
    expect((await operator(`/releases/${deployment.deadId}?done=retried`).expect(200)).text).toContain('pending again');
  });

  it('pauses delivery with a button (releases wait, the page says so), cancels a waiting release, then resumes', async () => {
    const post = async (path: string, from: string, fields: Record<string, string> = {}) => {
      const { cookie, csrf } = await tokenFor(from);
      return request(deployment.app)
        .post(`/ops/license${path}`)
        .set('x-operator', 'yes')
        .set('Cookie', cookie)
        .type('form')
        .send({ csrf, ...fields })
        .expect(303);
    };
    const paused = await post('/releases/pause', '/releases');
    expect(paused.headers.location).toBe('/ops/license/releases?done=paused');
    expect((await operator('/releases?done=paused').expect(200)).text).toContain('Delivery is paused');
    const { id: waiting } = await deployment.outbox.enqueue({ title: 'Waits', primary_artist: 'Ada', remote_track_id: 'waits' });
    const { id: kept } = await deployment.outbox.enqueue({ title: 'Kept', primary_artist: 'Ada', remote_track_id: 'kept' });
    await sleep(300);
    expect((await deployment.outbox.get(waiting))?.state).toBe('pending');
    expect((await operator(`/releases/${waiting}`).expect(200)).text).toContain('Cancel this release');
    const cancelled = await post(`/releases/${waiting}/cancel`, `/releases/${waiting}`);
    expect(cancelled.headers.location).toBe(`/ops/license/releases/${waiting}?done=cancelled`);
    expect((await operator(`/releases/${waiting}?done=cancelled`).expect(200)).text).toContain('will never be sent');
    // Without the token nothing is cancelled or resumed.
    await request(deployment.app).post(`/ops/license/releases/${kept}/cancel`).set('x-operator', 'yes').type('form').send({}).expect(403);
    await request(deployment.app).post('/ops/license/releases/resume').set('x-operator', 'yes').type('form').send({}).expect(403);
    await post('/releases/resume', '/releases');
    await waitFor(async () => (await deployment.outbox.get(kept))?.state === 'delivered', 'the release kept, delivered after the resume');
    expect((await deployment.outbox.get(waiting))?.state).toBe('cancelled');
    expect(deployment.mother.releases.some((r) => r.release.title === 'Waits')).toBe(false);
  });

  it('pages through releases 50 at a time, and finds a release by its remote_track_id', async () => {
    const mother = await startEmulator();
    const outbox = createReleaseOutbox({ client: clientFor(mother), store: memoryOutboxStore(), autoStart: false });
    for (let i = 1; i <= 60; i++) await outbox.enqueue({ title: `Song ${i}`, primary_artist: 'Ada', remote_track_id: `t-${i}` });
    const ops = licenseConsole({ outbox, authorize: () => true });
    const app = express().use('/ops', ops);
    // Each row links its id and its title to the release.
    const ids = (html: string) => [...new Set([...html.matchAll(/<td><a href="\/ops\/releases\/(\d+)">/g)].map((match) => Number(match[1])))];
    const first = await request(app).get('/ops/releases?state=pending').expect(200);
    expect(ids(first.text)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    const next = /href="([^"]+)">Next page/.exec(first.text)?.[1]?.replaceAll('&amp;', '&') as string;
    expect(next).toBe('/ops/releases?state=pending&after=50');
    const second = await request(app).get(next).expect(200);
    expect(ids(second.text)).toEqual(Array.from({ length: 10 }, (_, i) => i + 51));
    expect(second.text).not.toContain('Next page');
    expect(ids((await request(app).get('/ops/releases?state=pending&track=t-7').expect(200)).text)).toEqual([7]);
    expect(ids((await request(app).get('/ops/releases?state=dead&track=t-7').expect(200)).text)).toEqual([]);
    ops.close();
    await outbox.close();
    await mother.close();
  });

  it('finds releases by words of their title, reading at most 10,000 releases a page', { timeout: 30_000 }, async () => {
    const mother = await startEmulator();
    const outbox = createReleaseOutbox({ client: clientFor(mother), store: memoryOutboxStore(), autoStart: false });
    // 51 titled "Midnight …" first (one in full-width letters), another far down the queue.
    for (let i = 1; i <= 10_060; i++) {
      const title = i === 5 ? 'ＭＩＤＮＩＧＨＴ Five' : i <= 51 || i === 10_040 ? `Midnight ${i}` : `Song ${i}`;
      await outbox.enqueue({ title, primary_artist: 'Ada', remote_track_id: `t-${i}` });
    }
    const ops = licenseConsole({ outbox, authorize: () => true });
    const app = express().use('/ops', ops);
    const ids = (html: string) => [...new Set([...html.matchAll(/<td><a href="\/ops\/releases\/(\d+)">/g)].map((match) => Number(match[1])))];
    const nextOf = (html: string, label: string) => new RegExp(`href="([^"]+)">${label}`).exec(html)?.[1]?.replaceAll('&amp;', '&');
    const first = await request(app).get('/ops/releases?state=pending&title=midnight').expect(200);
    expect(ids(first.text)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    expect(nextOf(first.text, 'Next page')).toBe('/ops/releases?state=pending&title=midnight&after=50');
    // The second page reads 10,000 releases from #51 on, finds two, and stops at #10,050.
    const second = await request(app).get('/ops/releases?state=pending&title=midnight&after=50').expect(200);
    expect(ids(second.text)).toEqual([51, 10_040]);
    expect(second.text).toContain('this page read 10,000 releases (up to #10050)');
    expect(nextOf(second.text, 'Search further')).toBe('/ops/releases?state=pending&title=midnight&after=10050');
    const third = await request(app).get('/ops/releases?state=pending&title=midnight&after=10050').expect(200);
    expect(ids(third.text)).toEqual([]);
    expect(third.text).not.toMatch(/Search further|Next page/);
    // Every word, in any order.
    expect(ids((await request(app).get('/ops/releases?state=pending&title=five%20midnight').expect(200)).text)).toEqual([5]);
    // With a track id, the title narrows that track's releases.
    expect(ids((await request(app).get('/ops/releases?state=pending&track=t-7&title=MIDNIGHT').expect(200)).text)).toEqual([7]);
    expect(ids((await request(app).get('/ops/releases?state=pending&track=t-70&title=midnight').expect(200)).text)).toEqual([]);
    ops.close();
    await outbox.close();
    await mother.close();
  });

  it('answers only on its hosts, says nothing of unknown notices or panels, and shows no stack', async () => {
    const app = express().use(
      '/ops',
      licenseConsole({ guard: deployment.guard, outbox: deployment.outbox, authorize: () => true, hosts: ['ops.platform.example'] }),
    );
    // A tenant's host: 404 before authorize, whoever asks.
    await request(app).get('/ops/').set('Host', 'beats.example').expect(404);
    await request(app).get('/ops/').set('Host', 'ops.platform.example').expect(200);
    await request(app).get('/ops/').set('Host', 'OPS.platform.example.:8443').expect(200);
    // With `trust proxy` on, Express takes the client's X-Forwarded-Host as the host: the console
    // wants every host a request names to be its own.
    app.set('trust proxy', true);
    await request(app).get('/ops/').set('Host', 'beats.example').set('X-Forwarded-Host', 'ops.platform.example').expect(404);
    await request(app).get('/ops/').set('Host', 'ops.platform.example').set('X-Forwarded-Host', 'ops.platform.example, beats.example').expect(404);
    await request(app).get('/ops/').set('Host', 'ops.platform.example').set('X-Forwarded-Host', 'ops.platform.example').expect(200);
    // An HTTP/1.0 request may carry no Host at all: a plain 404, not a 500.
    expect(await rawRequest(app, 'GET /ops/ HTTP/1.0\r\n\r\n')).toMatch(/^HTTP\/1\.1 404 /);
    expect(() => licenseConsole({ outbox: deployment.outbox, authorize: () => true, hosts: [] })).toThrow(/`hosts` must be a non-empty list/);
    for (const done of ['__proto__', 'constructor', 'toString']) {
      const page = await operator(`/releases?done=${done}`).expect(200);
      expect(page.text).not.toContain('class="notice"');
    }
    // The fixture's outbox is one panel's: any other panel id is no panel of it.
    expect((await operator('/releases?panel=nope').expect(404)).text).toContain('serves no such panel');
    expect((await operator('/panels/nope').expect(404)).text).toContain('no such panel in memory');
    expect((await operator('/releases/987654').expect(404)).text).toContain('No such release');
    const tooBig = await request(deployment.app)
      .post(`/ops/license/releases/${deployment.deadId}/retry`)
      .set('x-operator', 'yes')
      .type('form')
      .send({ csrf: 'x'.repeat(5000) })
      .expect(413);
    expect(tooBig.text).toBe('The console cannot take this request.');
  });

  it('takes the token from any cookie of its name (one tossed in by a sibling host must not lock the operator out)', async () => {
    const list = await operator('/').expect(200);
    const { cookie, csrf } = await tokenFor(/href="\/ops\/license(\/panels\/[^"]+)"/.exec(list.text)?.[1] as string);
    const tossed = `plg_console_csrf=${'A'.repeat(43)}`;
    await request(deployment.app)
      .post('/ops/license/releases/retry-dead')
      .set('x-operator', 'yes')
      .set('Cookie', `${tossed}; ${cookie}`)
      .type('form')
      .send({ csrf })
      .expect(303);
    // A real token from a page of the same site but another origin (another port): refused.
    await request(deployment.app)
      .post('/ops/license/releases/retry-dead')
      .set('x-operator', 'yes')
      .set('Cookie', cookie)
      .set('Sec-Fetch-Site', 'same-site')
      .type('form')
      .send({ csrf })
      .expect(403);
  });

  it('says a license that names no domain is served on every host, as the guard does, whatever `domains` says', async () => {
    const mother = await startEmulator([{ apiKey: 'pk_nodomain', apiSecret: 'sk_nodomain_0123456789', active: true, panel: { custom_domain: null } }]);
    const guard = licenseGuard({ baseUrl: mother.url, apiKey: 'pk_nodomain', apiSecret: 'sk_nodomain_0123456789', domains: 'enforce', logger: silentLogger });
    await guard.refresh();
    const ops = licenseConsole({ guard, authorize: () => true });
    const app = express().use('/ops', ops);
    const list = await request(app).get('/ops/').expect(200);
    expect(list.text).toContain('<td>none named by the license</td>');
    const panelPath = /href="\/ops(\/panels\/[^"]+)"/.exec(list.text)?.[1] as string;
    const page = await request(app).get(`/ops${panelPath}`).expect(200);
    expect(page.text).toContain('not checked: the license names no domain, so every host is served (domains: &#39;enforce&#39;)');
    ops.close();
    await guard.close();
    await mother.close();
  });

  it('works mounted in an Express 4 app too', async () => {
    const app = express4();
    const ops = licenseConsole({ guard: deployment.guard, outbox: deployment.outbox, authorize: (req) => req.get('x-operator') === 'yes' });
    // The types are express 5's here (this repository's); an Express 4 app resolves its own.
    app.use('/ops', ops as unknown as express4.RequestHandler);
    await request(app).get('/ops/').expect(401);
    const list = await request(app).get('/ops/').set('x-operator', 'yes').expect(200);
    expect(list.headers['content-security-policy']).toMatch(/^default-src 'none'/);
    const panelPath = /href="\/ops(\/panels\/[^"]+)"/.exec(list.text)?.[1] as string;
    const page = await request(app).get(`/ops${panelPath}`).set('x-operator', 'yes').expect(200);
    const cookie = String(page.headers['set-cookie']).split(';')[0] as string;
    const csrf = /name="csrf" value="([^"]+)"/.exec(page.text)?.[1] as string;
    await request(app).post(`/ops${panelPath}/refresh`).set('x-operator', 'yes').set('Cookie', cookie).type('form').send({ csrf }).expect(303);
    await request(app).post(`/ops${panelPath}/refresh`).set('x-operator', 'yes').set('Cookie', cookie).type('form').send({}).expect(403);
    ops.close();
  });

  it('shows releases without a guard, and says so for the panels', async () => {
    const mother = await startEmulator();
    const outbox = createReleaseOutbox({ client: clientFor(mother), store: memoryOutboxStore(), autoStart: false });
    const ops = licenseConsole({ outbox, authorize: () => true });
    const app = express().use('/ops', ops);
    await request(app).get('/ops/').expect(303).expect('location', '/ops/releases');
    expect((await request(app).get('/ops/releases').expect(200)).text).toContain('dead releases');
    ops.close();
    await outbox.close();
    await mother.close();
  });
});

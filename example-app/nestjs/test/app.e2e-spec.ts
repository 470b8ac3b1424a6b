// The e2e test of docs/nestjs.md: the whole app against the mother emulator, as a Nest user
// writes it (Test.createTestingModule, supertest), from an active license to a lock and back.
import type { NestExpressApplication } from '@nestjs/platform-express';
import { Test } from '@nestjs/testing';
import type { DeliveredEvent, LicenseGuard, ReleaseOutbox } from 'panel-license-guard';
import { createMotherEmulator, type MotherEmulator } from 'panel-license-guard/testing';
import request from 'supertest';
import { AppModule } from '../src/app.module';
import { LICENSE_GUARD, LICENSE_OPTIONS, type LicenseModuleOptions, RELEASE_OUTBOX } from '../src/license/license.tokens';
import { setUpApp } from '../src/setup';

const keys = { apiKey: 'pk_nest_e2e', apiSecret: 'sk_nest_e2e_0123456789' };
const OPS = 'Bearer ops-e2e-token';
const HTML = 'text/html';

describe('a Nest panel behind the license guard (e2e)', () => {
  let mother: MotherEmulator;
  let app: NestExpressApplication;
  let guard: LicenseGuard;
  let outbox: ReleaseOutbox;

  beforeAll(async () => {
    mother = await createMotherEmulator({ panels: [{ ...keys, active: true, panel: { name: 'Nest Beats', brand_color: '#0e7490' } }] });
    const options: LicenseModuleOptions = {
      baseUrl: mother.url,
      ...keys,
      opsToken: 'ops-e2e-token',
      outboxFile: ':memory:',
      supportContact: 'help@nest-beats.example',
    };
    // The options provider is overridden before any provider is built: AppModule reads no env here.
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] })
      .overrideProvider(LICENSE_OPTIONS)
      .useValue(options)
      .compile();
    app = setUpApp(moduleRef.createNestApplication<NestExpressApplication>({ logger: false }));
    await app.init();
    guard = app.get(LICENSE_GUARD);
    outbox = app.get(RELEASE_OUTBOX);
    await guard.start(); // the promise the module's bootstrap hook started: the first verdict
  });

  afterAll(async () => {
    await app?.close(); // a no-op when the last test closed it already
    await mother?.close();
  });

  it('renders the dashboard with the panel’s branding', async () => {
    const res = await request(app.getHttpServer()).get('/').set('Accept', HTML).expect(200);
    expect(res.text).toContain('<title>Nest Beats</title>');
    expect(res.text).toContain('--brand: #0e7490');
    expect(res.text).toContain('License active');
  });

  it('gives controllers the branding and license through @Branding() and @License()', async () => {
    const res = await request(app.getHttpServer()).get('/api/status').expect(200);
    expect(res.body).toMatchObject({ ok: true, panel: 'Nest Beats', color: '#0e7490', license: 'active' });
  });

  it('delivers an upload to the mother through the outbox', async () => {
    const delivered = new Promise<DeliveredEvent>((resolve) => outbox.on('delivered', resolve));
    const res = await request(app.getHttpServer()).post('/api/uploads').send({ title: 'Night Drive', remote_track_id: 'nest-1' }).expect(202);
    expect(res.body).toMatchObject({ ok: true, state: 'pending' });
    expect((await delivered).id).toBe(res.body.id);
    expect(mother.releases.map((r) => r.release.title)).toEqual(['Night Drive']);
  });

  it('refuses an invalid upload with 422, naming the field', async () => {
    const res = await request(app.getHttpServer()).post('/api/uploads').send({ title: '' }).expect(422);
    expect(res.body).toMatchObject({ ok: false, field: 'title' });
  });

  it('locks at the mother’s word: a browser gets the branded 503 page', async () => {
    mother.setPanel(keys.apiKey, { active: false, reason: 'Invoice overdue' });
    await expect(guard.refresh()).resolves.toBe('locked');
    const res = await request(app.getHttpServer()).get('/').set('Accept', HTML).expect(503);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.headers['retry-after']).toBe('300');
    expect(res.text).toContain('Nest Beats');
    expect(res.text).toContain('help@nest-beats.example');
    expect(res.text).not.toContain('Invoice overdue'); // the mother's reason is for the operator
  });

  it('answers API clients with JSON while locked, uploads included', async () => {
    const status = await request(app.getHttpServer()).get('/api/status').expect(503);
    expect(status.body).toMatchObject({ ok: false, error: 'panel_locked' });
    const upload = await request(app.getHttpServer()).post('/api/uploads').send({ title: 'Too late' }).expect(503);
    expect(upload.body).toMatchObject({ ok: false, error: 'panel_locked' });
  });

  it('locks paths no controller serves too: the middleware runs before routing', async () => {
    await request(app.getHttpServer()).get('/no-such-page').set('Accept', HTML).expect(503);
  });

  it('keeps the console reachable for operators while locked, and only for them', async () => {
    const server = app.getHttpServer();
    await request(server).get('/ops/license').expect(401);
    const list = await request(server).get('/ops/license').set('Authorization', OPS).expect(200);
    expect(list.text).toContain('locked');
    // Its "Check now" button: a form with a CSRF token and a cookie, posted through Nest's body parser.
    const panelPath = /href="(\/ops\/license\/panels\/[^"?]+)"/.exec(list.text)?.[1];
    const page = await request(server).get(String(panelPath)).set('Authorization', OPS).expect(200);
    const csrf = /name="csrf" value="([^"]+)"/.exec(page.text)?.[1];
    const cookie = page.headers['set-cookie'];
    const checked = await request(server).post(`${panelPath}/refresh`).set('Authorization', OPS).set('Cookie', cookie).type('form').send({ csrf }).expect(303);
    expect(checked.headers.location).toBe(`${panelPath}?done=checked`);
    // Paths under the console's prefix that it does not serve are excluded from the guard: Nest's 404.
    await request(server).get('/ops/license/no-such-page').set('Authorization', OPS).expect(404);
  });

  it('answers the load balancer’s health check while locked', async () => {
    const res = await request(app.getHttpServer()).get('/healthz').expect(200);
    expect(res.body).toMatchObject({ ok: true, panels: { total: 1, locked: 1 } });
  });

  it('unlocks without a restart', async () => {
    mother.setPanel(keys.apiKey, { active: true });
    await expect(guard.refresh()).resolves.toBe('active');
    await request(app.getHttpServer()).get('/').set('Accept', HTML).expect(200);
  });

  it('closes the guard and the outbox when the app shuts down', async () => {
    const closeGuard = jest.spyOn(guard, 'close');
    const closeOutbox = jest.spyOn(outbox, 'close');
    await app.close(); // what enableShutdownHooks() runs on SIGTERM
    expect(closeGuard).toHaveBeenCalledTimes(1);
    expect(closeOutbox).toHaveBeenCalledTimes(1);
    await expect(outbox.enqueue({ title: 'After close' })).rejects.toThrow(/after close/);
  });
});

import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { createPanelsApp } from '../example-app/panels.js';
import type { MotherEmulator } from '../src/testing.js';
import { silentLogger } from './support/guard-app.js';
import { startEmulator } from './support/helpers.js';

// The example's multi-panel mode (`npm start -- --panels`), built on the published package (dist/).
let emulator: MotherEmulator;
let panels: ReturnType<typeof createPanelsApp>;
let tenants: typeof import('../example-app/panels.js').DEMO_TENANTS;
beforeAll(async () => {
  const example = await import('../example-app/panels.js');
  tenants = example.DEMO_TENANTS;
  emulator = await startEmulator(
    Object.entries(tenants).map(([host, { apiKey, apiSecret, panel }]) => ({ apiKey, apiSecret, active: true, panel: { ...panel, custom_domain: host } })),
  );
  panels = example.createPanelsApp({ baseUrl: emulator.url, logger: silentLogger });
});
afterAll(async () => {
  await panels.close();
  await emulator.close();
});

describe('the example in multi-panel mode', () => {
  it('serves each demo host as its own panel, and one locked panel leaves the others serving', async () => {
    for (const [host, { panel }] of Object.entries(tenants)) {
      const page = await request(panels.app).get('/').set('Host', `${host}:3000`).expect(200);
      expect(page.text).toContain(`Welcome to ${panel.name}`);
    }
    emulator.setPanel(tenants['labelx.localhost']?.apiKey as string, { active: false, reason: 'Invoice overdue' });
    const refreshed = await request(panels.app).post('/healthz/refresh').set('Host', 'labelx.localhost').expect(200);
    expect(refreshed.body).toMatchObject({ state: 'locked' });
    const locked = await request(panels.app).get('/').set('Host', 'labelx.localhost').expect(503);
    expect(locked.text).toContain('The panel is paused for now.');
    await request(panels.app).get('/').set('Host', 'beats.localhost').expect(200);
    expect((await request(panels.app).get('/healthz').set('Host', 'labelx.localhost').expect(200)).body.license).toMatchObject({ state: 'locked' });
    await request(panels.app).get('/').set('Host', 'unknown.localhost').expect(404);
  });

  it("serves each demo panel's logo, while locked too, so the first page looks whole", async () => {
    for (const { id, panel } of Object.values(tenants)) {
      const logo = await request(panels.app).get(`/logo/${id}.svg`).set('Host', 'labelx.localhost').expect(200);
      expect(logo.headers['content-type']).toMatch(/^image\/svg\+xml/);
      expect(String(logo.body ?? logo.text)).toContain(panel.brand_color);
    }
    await request(panels.app).get('/logo/nobody.svg').set('Host', 'beats.localhost').expect(404);
  });

  it("sends each host's upload to the mother under its own panel's key, and shows it on that panel only", async () => {
    await request(panels.app).post('/upload').set('Host', 'beats.localhost').type('form').send({ title: 'Beats upload' }).expect(303);
    await request(panels.app).post('/upload').set('Host', 'acme.localhost').type('form').send({ title: 'Acme upload' }).expect(303);
    await panels.outbox.drain({ signal: AbortSignal.timeout(10_000) });
    const keyOf = (title: string) => emulator.releases.find((r) => r.release.title === title)?.apiKey;
    expect(keyOf('Beats upload')).toBe(tenants['beats.localhost']?.apiKey);
    expect(keyOf('Acme upload')).toBe(tenants['acme.localhost']?.apiKey);
    const beats = await request(panels.app).get('/').set('Host', 'beats.localhost').expect(200);
    expect(beats.text).toContain('Beats upload');
    expect(beats.text).not.toContain('Acme upload');
    expect((await request(panels.app).get('/api/status').set('Host', 'acme.localhost').expect(200)).body.panel).toBe('tenant-acme');
  });
});

import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { createPanelApp } from '../example-app/app.js';
import type { MotherEmulator } from '../src/testing.js';
import { silentLogger } from './support/guard-app.js';
import { API_KEY, API_SECRET, startEmulator, waitFor } from './support/helpers.js';

// The example panel imports the package by its published name (dist/), as a user's app would.
let emulator: MotherEmulator;
let panel: ReturnType<typeof createPanelApp>;
beforeAll(async () => {
  const { createPanelApp } = await import('../example-app/app.js');
  emulator = await startEmulator([{ apiKey: API_KEY, apiSecret: API_SECRET, active: true, panel: { name: 'Beat <Lab>', brand_color: '#112233' } }]);
  panel = createPanelApp({ baseUrl: emulator.url, apiKey: API_KEY, apiSecret: API_SECRET, logger: silentLogger });
  await panel.start();
});
afterAll(async () => {
  await panel.close();
  await emulator.close();
});

describe('the example panel', () => {
  it('renders the branding in its layout, escaped', async () => {
    const res = await request(panel.app).get('/').expect(200);
    expect(res.text).toContain('<span class="name">Beat &lt;Lab&gt;</span>');
    expect(res.text).toContain(':root { --brand: #112233; }');
  });

  it('queues an upload durably and shows its delivery state', async () => {
    await request(panel.app).post('/upload').type('form').send({ title: 'First Light', remote_track_id: 'ex-1' }).expect(303);
    await waitFor(() => emulator.releases.some((r) => r.release.remote_track_id === 'ex-1'), 'delivery to the mother');
    await waitFor(async () => (await request(panel.app).get('/')).text.includes('>delivered<'), 'the dashboard to show it delivered');
    // The delivery feed wrote the mother's release_id back onto the app's own row (release-ids.js).
    const delivered = emulator.releases.find((r) => r.release.remote_track_id === 'ex-1');
    await waitFor(async () => (await request(panel.app).get('/api/tracks')).body.tracks.length === 1, 'the release_id written back');
    expect((await request(panel.app).get('/api/tracks')).body.tracks).toEqual([{ remoteTrackId: 'ex-1', releaseId: delivered?.releaseId, applied: 1 }]);
    const res = await request(panel.app).post('/upload').type('form').send({ title: '', isrc: 'nope' }).expect(422);
    expect(res.text).toContain('Missing release title.');
  });

  it('stays reachable on /healthz while locked and serves its own locked view', async () => {
    emulator.setPanel(API_KEY, { active: false, reason: 'Invoice overdue' });
    await panel.guard.refresh();
    const locked = await request(panel.app).get('/upload').set('Accept', 'text/html').expect(503);
    expect(locked.text).toContain('This panel is temporarily unavailable');
    // Artists see the public message and a contact, never the operator's billing reason.
    expect(locked.text).toContain('The panel is paused for now. Your tracks and data are safe.');
    expect(locked.text).toContain('<a href="mailto:support@panel.example">support@panel.example</a>');
    expect(locked.text).not.toContain('Invoice overdue');
    expect(locked.text).toMatch(/<meta http-equiv="refresh" content="300">/);
    expect((await request(panel.app).get('/healthz').expect(200)).body.license.state).toBe('locked');
    expect((await request(panel.app).get('/api/status').expect(503)).body).toMatchObject({ error: 'panel_locked' });
    // Operators' endpoints stay reachable while locked: the status says so, the metrics show it.
    expect((await request(panel.app).get('/status').expect(503)).body).toMatchObject({ serving: false, state: 'locked', outbox: { pending: 0 } });
    const metrics = await request(panel.app).get('/metrics').expect(200);
    expect(metrics.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(metrics.text).toContain('panel_license_state{state="locked"} 1');
    expect(metrics.text).toMatch(/panel_license_outbox_deliveries_total\{outcome="delivered"\} [1-9]/);
    emulator.setPanel(API_KEY, { active: true, reason: null });
    await panel.guard.refresh();
    await request(panel.app).get('/upload').expect(200);
  });

  it('shows a renewal banner once the license is within an expiry warning, and none further off', async () => {
    const inDays = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString().slice(0, 10);
    emulator.setPanel(API_KEY, { panel: { expires_at: inDays(5) } });
    await panel.guard.refresh();
    const soon = await request(panel.app).get('/').expect(200);
    expect(soon.text).toContain(`<p class="banner" role="status">This panel's license expires in 5 days (${inDays(5)}).`);
    emulator.setPanel(API_KEY, { panel: { expires_at: inDays(90) } });
    await panel.guard.refresh();
    expect((await request(panel.app).get('/upload').expect(200)).text).not.toContain('class="banner"');
  });
});

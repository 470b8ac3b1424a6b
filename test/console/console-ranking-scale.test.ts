// Ranking a SQLite outbox's panels in the app's own event loop: the releases page at
// RANK_PANELS_UP_TO waiting releases that belong to as many panels (a tenant-per-artist platform,
// long ids too), and a metrics scrape over 200,000 such panels, hold the loop in short slices.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import { Registry } from 'prom-client';
import request from 'supertest';
import { afterAll, describe, expect, it } from 'vitest';
import { RANK_PANELS_UP_TO } from '../../src/console/releases-page.js';
import { licenseConsole } from '../../src/console.js';
import { loadSqliteDriver } from '../../src/db/sqlite-driver.js';
import { createReleaseOutbox } from '../../src/index.js';
import { registerMetrics } from '../../src/metrics.js';
import { sqliteOutboxStore } from '../../src/outbox/stores/sqlite/sqlite-store.js';
import { longestBlock, startEmulator } from '../support/helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'console-ranking-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function fileWith(rows: number, panelOf: (i: number) => string, state: 'pending' | 'dead' = 'pending'): Promise<string> {
  const file = join(dir, `outbox-${rows}-${Math.random().toString(36).slice(2)}.db`);
  await sqliteOutboxStore({ file }).close();
  const db = new (loadSqliteDriver())(file);
  const insert = db.prepare(
    'INSERT INTO release_outbox (panel, body, content_hash, state, next_attempt_at, created_at, updated_at) VALUES (?, ?, ?, ?, 0, 0, 0)',
  );
  db.transaction(() => {
    for (let i = 0; i < rows; i++) insert.run(panelOf(i), `{"release":{"title":"Song ${i}"}}`, `h${i}`, state);
  })();
  db.close();
  return file;
}

describe('ranking panels on a SQLite outbox', () => {
  it.each([
    { what: 'one panel per release, 200-character ids', panelOf: (i: number) => `${'p'.repeat(190)}-${String(i).padStart(8, '0')}` },
    { what: 'one panel per release, short ids', panelOf: (i: number) => `panel-${i}` },
    // Control: what the documented "about 20 ms" was measured with (few panels).
    { what: '20 panels (control)', panelOf: (i: number) => `panel-${i % 20}` },
  ])('ranks $what at RANK_PANELS_UP_TO waiting without holding the loop past 150 ms', async ({ panelOf }) => {
    const mother = await startEmulator();
    const outbox = createReleaseOutbox({
      file: await fileWith(RANK_PANELS_UP_TO, panelOf),
      baseUrl: mother.url,
      panels: { resolve: async () => null },
      autoStart: false,
    });
    try {
      const app = express().use('/ops', licenseConsole({ outbox, authorize: () => true }));
      await request(app).get('/ops/releases?state=pending'); // warm up (statements prepared, pages cached)
      const { ms, result } = await longestBlock(() => request(app).get('/ops/releases?state=pending'));
      expect(result.status).toBe(200);
      expect(result.text.includes('Panels with releases waiting')).toBe(true);

      expect(ms).toBeLessThan(150);
    } finally {
      await outbox.close();
      await mother.close();
    }
  });

  it('a metrics scrape does the same ranking without the cap: 200,000 waiting releases of as many panels', async () => {
    const mother = await startEmulator();
    const outbox = createReleaseOutbox({
      file: await fileWith(RANK_PANELS_UP_TO * 4, (i) => `panel-${i}`),
      baseUrl: mother.url,
      panels: { resolve: async () => null },
      autoStart: false,
    });
    try {
      const registry = new Registry();
      registerMetrics({ registry, outbox });
      // As an app serves it: GET /metrics over real HTTP.
      const app = express().get('/metrics', async (_req, res) => res.type('text/plain').send(await registry.metrics()));
      await request(app).get('/metrics'); // warm up
      const { ms, result } = await longestBlock(() => request(app).get('/metrics'));
      expect(result.text).toContain('panel_license_outbox_panel_releases{panel="panel-0",state="pending"} 1');
      // The first 100 of 200,000, ranked as the store does: most pending first (one each here), then by id.
      expect(ms).toBeLessThan(150);
    } finally {
      await outbox.close();
      await mother.close();
    }
  });

  it('ranks a backlog of few panels in slices too: 1,000,000 waiting releases of 10 panels', async () => {
    const file = join(dir, 'backlog.db');
    await sqliteOutboxStore({ file }).close();
    const db = new (loadSqliteDriver())(file);
    db.exec(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 1000000)
      INSERT INTO release_outbox (panel, body, content_hash, state, next_attempt_at, created_at, updated_at)
      SELECT 'panel-' || (i % 10), '{}', 'h' || i, 'pending', 0, i, i FROM c`);
    db.close();
    const mother = await startEmulator();
    const outbox = createReleaseOutbox({ file, baseUrl: mother.url, panels: { resolve: async () => null }, autoStart: false });
    try {
      await outbox.panelStats(100);
      const { ms, result } = await longestBlock(() => outbox.panelStats(100));
      expect(result.map(({ panel, pending }) => [panel, pending])).toEqual(Array.from({ length: 10 }, (_, i) => [`panel-${i}`, 100_000]));
      expect(ms).toBeLessThan(150);
    } finally {
      await outbox.close();
      await mother.close();
    }
  }, 120_000);

  it('ranks a panel after a long mother outage in slices: 100,000 oldest releases dead, 900,000 pending', async () => {
    // Each slice of dead rows bounds the pending rows read beside it: that bound must stop the
    // index search (in an OR it did not, and each slice walked all 900,000 pending entries).
    const file = join(dir, 'outage.db');
    await sqliteOutboxStore({ file }).close();
    const db = new (loadSqliteDriver())(file);
    db.exec(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 1000000)
      INSERT INTO release_outbox (panel, body, content_hash, state, next_attempt_at, created_at, updated_at)
      SELECT 'only', '{}', 'h' || i, CASE WHEN i <= 100000 THEN 'dead' ELSE 'pending' END, 0, i, i FROM c`);
    db.close();
    const store = sqliteOutboxStore({ file });
    try {
      await store.panelCounts?.(100);
      const { ms, result } = await longestBlock(async () => store.panelCounts?.(100));
      expect(result).toEqual([{ panel: 'only', pending: 900_000, dead: 100_000, oldestPendingAt: 100_001 }]);
      expect(ms).toBeLessThan(150);
    } finally {
      store.close();
    }
  }, 120_000);
});

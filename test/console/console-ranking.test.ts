// The releases page ranks the panels with releases waiting only while that is cheap: ranking
// reads every waiting release in one statement on SQLite, inside the app's own event loop.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import request from 'supertest';
import { afterAll, describe, expect, it } from 'vitest';
import { RANK_PANELS_UP_TO } from '../../src/console/releases-page.js';
import { licenseConsole } from '../../src/console.js';
import { loadSqliteDriver } from '../../src/db/sqlite-driver.js';
import { createReleaseOutbox } from '../../src/index.js';
import { sqliteOutboxStore } from '../../src/outbox/stores/sqlite/sqlite-store.js';
import { longestBlock, startEmulator } from '../support/helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'console-ranking-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A SQLite outbox file with `rows` pending releases of `panels` panels, written straight into the table. */
async function fileWith(rows: number, panels: number): Promise<string> {
  const file = join(dir, `outbox-${rows}.db`);
  await sqliteOutboxStore({ file }).close();
  const db = new (loadSqliteDriver())(file);
  const insert = db.prepare(
    "INSERT INTO release_outbox (panel, body, content_hash, state, next_attempt_at, created_at, updated_at) VALUES (?, ?, ?, 'pending', 0, 0, 0)",
  );
  db.transaction(() => {
    for (let i = 0; i < rows; i++) insert.run(`panel-${i % panels}`, `{"release":{"title":"Song ${i}"}}`, `h${i}`);
  })();
  db.close();
  return file;
}

describe('licenseConsole() releases page', () => {
  it('ranks the panels while few releases wait, and past RANK_PANELS_UP_TO says so instead of holding the app', async () => {
    const mother = await startEmulator();
    const outboxes = [];
    try {
      for (const [rows, ranked] of [
        [1_000, true],
        [RANK_PANELS_UP_TO * 4, false],
      ] as const) {
        const outbox = createReleaseOutbox({
          file: await fileWith(rows, 20_000),
          baseUrl: mother.url,
          panels: { resolve: async () => null },
          autoStart: false,
        });
        outboxes.push(outbox);
        const app = express().use('/ops', licenseConsole({ outbox, authorize: () => true }));
        const { ms, result } = await longestBlock(() => request(app).get('/ops/releases?state=pending'));
        expect(result.status).toBe(200);
        expect(result.text.includes('Panels with releases waiting')).toBe(ranked);
        expect(result.text.includes('too many to rank their panels here')).toBe(!ranked);
        // 200,000 waiting releases of 20,000 panels: ranking them held the loop about 200 ms.
        if (!ranked) expect(ms).toBeLessThan(150);
      }
    } finally {
      for (const outbox of outboxes) await outbox.close();
      await mother.close();
    }
  });
});

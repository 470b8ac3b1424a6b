// The SQLite store ranks panels a slice at a time (sqlite-panel-ranking.ts): across slice
// boundaries, with panels only pending, only dead or both, the unassigned panel, and ids whose
// order differs between UTF-8 bytes (SQLite's) and UTF-16 units (JS's), it gives the same answer
// as ranking every panel at once.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadSqliteDriver } from '../../../../src/db/sqlite-driver.js';
import { ROWS_PER_SLICE } from '../../../../src/outbox/stores/sqlite/sqlite-panel-ranking.js';
import { sqliteOutboxStore } from '../../../../src/outbox/stores/sqlite/sqlite-store.js';

const dir = mkdtempSync(join(tmpdir(), 'panel-ranking-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Expected {
  panel: string;
  pending: number;
  dead: number;
  oldestPendingAt: number | undefined;
}

describe('panelCounts() on the SQLite store, read in slices', () => {
  it('ranks every panel as one pass over all of them would', async () => {
    const file = join(dir, 'ranking.db');
    await sqliteOutboxStore({ file }).close();
    // More panels than two slices; ids that sort apart in UTF-8 and UTF-16 (U+FF5E vs U+1F600).
    const panels = ['', 'tenant-\uFF5E', 'tenant-\u{1F600}', ...Array.from({ length: ROWS_PER_SLICE * 2 + 37 }, (_, i) => `panel-${i}`)];
    const expected = new Map<string, Expected>();
    const db = new (loadSqliteDriver())(file);
    const insert = db.prepare(
      'INSERT INTO release_outbox (panel, body, content_hash, state, next_attempt_at, created_at, updated_at) VALUES (?, ?, ?, ?, 0, ?, 0)',
    );
    let at = 1000;
    db.transaction(() => {
      panels.forEach((panel, i) => {
        // Some panels pending only, some dead only, some both, in counts that tie and differ.
        const pending = i % 3 === 2 ? 0 : 1 + (i % 4);
        const dead = i % 3 === 0 ? 0 : 1 + (i % 2);
        const entry: Expected = { panel, pending, dead, oldestPendingAt: undefined };
        for (let n = 0; n < pending; n++) {
          insert.run(panel, '{}', `p${i}-${n}`, 'pending', ++at);
          entry.oldestPendingAt ??= at;
        }
        for (let n = 0; n < dead; n++) insert.run(panel, '{}', `d${i}-${n}`, 'dead', ++at);
        insert.run(panel, '{}', `x${i}`, 'delivered', ++at);
        expected.set(panel, entry);
      });
    })();
    db.close();
    const ranked = [...expected.values()].sort((a, b) => b.pending - a.pending || b.dead - a.dead || (a.panel < b.panel ? -1 : a.panel > b.panel ? 1 : 0));
    const store = sqliteOutboxStore({ file });
    try {
      for (const limit of [1, 100, panels.length + 5]) expect(await store.panelCounts?.(limit)).toEqual(ranked.slice(0, limit));
    } finally {
      store.close();
    }
  });

  it('counts a release that changes state while the ranking runs once, as pending or as dead', async () => {
    const file = join(dir, 'moving.db');
    const store = sqliteOutboxStore({ file });
    const other = new (loadSqliteDriver())(file);
    try {
      const insert = other.prepare(
        "INSERT INTO release_outbox (panel, body, content_hash, state, next_attempt_at, created_at, updated_at) VALUES (?, '{}', ?, 'pending', 0, 1, 1)",
      );
      // More rows than a slice before it, so the ranking gives the loop a turn before reaching it.
      other.transaction(() => {
        for (let i = 0; i < ROWS_PER_SLICE + 10; i++) insert.run('tenant-a', `a${i}`);
        insert.run('tenant-b', 'h1');
      })();
      // The worker settles the release in the same process, between two turns of the ranking
      // (its first slice is read as it is called, then it waits for a turn).
      const settled = new Promise<void>((resolve) =>
        setImmediate(() => {
          other.prepare("UPDATE release_outbox SET state = 'dead' WHERE content_hash = 'h1'").run();
          resolve();
        }),
      );
      const ranking = store.panelCounts?.(10) as Promise<{ panel: string; pending: number; dead: number }[]>;
      await settled;
      const counted = await ranking;
      expect(counted.find((entry) => entry.panel === 'tenant-b')).toMatchObject({ pending: 0, dead: 1 });
    } finally {
      other.close();
      store.close();
    }
  });
});

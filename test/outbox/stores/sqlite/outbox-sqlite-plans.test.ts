import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { OutboxState } from '../../../../src/outbox/store.js';
import { createReaders } from '../../../../src/outbox/stores/sqlite/sqlite-read.js';
import { closeOutboxDatabase, openOutboxDatabase } from '../../../../src/outbox/stores/sqlite/sqlite-schema.js';
import { sqliteOutboxStore } from '../../../../src/outbox/stores/sqlite/sqlite-store.js';

// What the SQLite store's reads (list, counts) make SQLite read, from its query plans. SQLite is
// synchronous: a read holds the event loop of the app that hosts the console for as long as it
// runs, and a row's state is stored after its body, so a statement that scans the table reads
// every body (with 10,000 releases of the largest size, 130 ms for a page of dead releases that
// finds none). Every list by state must read that state's rows through an index, in id order (no
// sort of every matching row); the counts must come from indexes alone.
const dir = mkdtempSync(join(tmpdir(), 'outbox-sqlite-plans-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The statements createReaders() prepares while `use` runs, with their query plans. */
async function plansOf(use: (readers: ReturnType<typeof createReaders>) => Promise<void>): Promise<Map<string, string[]>> {
  const file = join(dir, `plans-${Date.now()}-${Math.random()}.db`);
  const store = sqliteOutboxStore({ file });
  await store.enqueue({ panel: 'p', remoteTrackId: 't', body: '{"release":{"title":"x"}}', contentHash: 'h' }, 0);
  await store.close();
  const db = openOutboxDatabase(file, 1000, false);
  const prepared = new Set<string>();
  const prepare = db.prepare.bind(db);
  db.prepare = ((sql: string) => {
    prepared.add(sql);
    return prepare(sql);
  }) as typeof db.prepare;
  try {
    await use(createReaders(db));
    const plans = new Map<string, string[]>();
    for (const sql of prepared) {
      if (sql.includes('pragma_table_info') || sql.includes('WHERE id = ?')) continue;
      const names = [...new Set([...sql.matchAll(/@(\w+)/g)].map((match) => match[1] as string))];
      const positional = (sql.match(/\?/g) ?? []).length;
      const explain = prepare(`EXPLAIN QUERY PLAN ${sql}`);
      const rows = (names.length > 0 ? explain.all(Object.fromEntries(names.map((name) => [name, 1]))) : explain.all(...Array(positional).fill(1))) as {
        detail: string;
      }[];
      plans.set(
        sql,
        rows.map((row) => row.detail),
      );
    }
    return plans;
  } finally {
    closeOutboxDatabase(db);
  }
}

describe('sqliteOutboxStore() reads', () => {
  it('lists a state through an index in id order, whatever the other filters: no scan of other states, no sort', async () => {
    const states: (OutboxState | undefined)[] = ['pending', 'dead', 'delivered', 'cancelled', undefined];
    const plans = await plansOf(async (readers) => {
      for (const state of states)
        for (const panel of ['p', undefined])
          for (const track of ['t', undefined]) for (const afterId of [5, undefined]) await readers.list({ state, limit: 10, panel, track, afterId });
    });
    const lists = [...plans].filter(([sql]) => sql.includes('ORDER BY id LIMIT @limit') && !sql.includes('GROUP BY'));
    expect(lists.length).toBeGreaterThan(0);
    for (const [sql, steps] of lists) {
      const context = `${sql}\n  → ${steps.join(' | ')}`;
      // A track's rows (its pending row, its deliveries until retention prunes them) are few: sorting them is cheap.
      if (!sql.includes('remote_track_id = @track')) expect(steps.join(' | '), context).not.toMatch(/TEMP B-TREE/);
      // Without a state, rows are read in id order (every row of any state is one of the list),
      // checking a panel or a track stored before the body; with a state, through an index.
      if (sql.includes('state = @state')) expect(steps.join(' | '), context).toMatch(/^SEARCH release_outbox USING INDEX/);
      // One filter with a state: its own index, the filter a key of the search (an attacker's
      // review held the loop 371 ms with 200,000 delivered rows and a track found nowhere, as the
      // statement walked the state's rows checking each one's track).
      const onlyPanel = sql.includes('panel = @panel') && !sql.includes('@track');
      const onlyTrack = sql.includes('remote_track_id = @track') && !sql.includes('@panel');
      if (sql.includes('state = @state') && onlyPanel) expect(steps.join(' | '), context).toMatch(/\(state=\? AND panel=\?/);
      if (sql.includes('state = @state') && onlyTrack) expect(steps.join(' | '), context).toMatch(/\(state=\? AND remote_track_id=\?/);
    }
  });

  it('counts by state and by panel from indexes alone, in their order, and reads no row but the oldest pending one', async () => {
    const plans = await plansOf(async (readers) => {
      await readers.counts(undefined);
      await readers.counts({ panel: 'p' });
      await readers.oldestPending?.(undefined);
      await readers.oldestPending?.({ panel: 'p' });
      await readers.panelCounts?.(20);
    });
    const counts = [...plans].filter(([sql]) => !sql.includes('ORDER BY id LIMIT @limit'));
    expect(counts.length).toBeGreaterThan(0);
    for (const [sql, steps] of counts) {
      // Counted in the index's order, as read: no sort of every entry (45 ms with 100,000 releases).
      expect(steps.join(' | '), sql).not.toMatch(/TEMP B-TREE/);
      // The list index in id order, for the lowest pending id: it stops at the first row it needs.
      for (const step of steps.filter((step) => /release_outbox/.test(step)))
        expect(step, sql).toMatch(/USING (COVERING INDEX|INTEGER PRIMARY KEY \(rowid=\?\)|INDEX release_outbox_list \(state=\?\))/);
    }
  });

  it('ranks panels through the (state, panel, id) index, a slice at a time: every part an index range, sorting only its slice', async () => {
    const plans = await plansOf(async (readers) => {
      await readers.panelCounts?.(10);
    });
    const parts = [...plans].filter(([sql]) => sql.includes('GROUP BY panel'));
    expect(parts.length).toBe(5);
    for (const [sql, steps] of parts) {
      const context = `${sql}\n  → ${steps.join(' | ')}`;
      expect(steps.join(' | '), context).toMatch(/SEARCH release_outbox USING COVERING INDEX release_outbox_panel_list \(state=\? AND panel[=>]\?/);
      expect(steps.join(' | '), context).not.toMatch(/SCAN release_outbox/);
    }
  });
});

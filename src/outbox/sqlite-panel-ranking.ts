// Ranking a SQLite outbox's panels by their waiting releases, in slices: the store runs in the
// app's own event loop, and one GROUP BY over 50,000 panels (or 200,000, on a metrics scrape) held
// it for 0.2–1.7 s. Each state's panels are read in panel order, a slice at a time, merged like a
// sorted merge-join, and only the `limit` best are kept; the loop gets a turn between slices.
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { SqliteDatabase, SqliteStatement } from './sqlite-driver.js';
import type { PanelCounts } from './store.js';

/** Panels per slice and state: about 5 ms of the loop each (measured with one release per panel). */
export const PANELS_PER_SLICE = 5_000;

interface Grouped {
  panel: string;
  count: number;
  oldestId: number;
}

interface Ranked {
  panel: string;
  pending: number;
  dead: number;
  oldestPendingId: number | undefined;
}

/** SQLite's order of text (BINARY: UTF-8 bytes, which is code point order), which JS's `<` is not. */
const utf8Order = (a: string, b: string): number => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

/** Most pending first, then most dead, then by panel id. */
const before = (a: Ranked, b: Ranked): boolean =>
  a.pending > b.pending || (a.pending === b.pending && (a.dead > b.dead || (a.dead === b.dead && a.panel < b.panel)));

/** `panelColumn`: `''` for a file older than v3 (every row unassigned). */
export function createPanelRanking(db: SqliteDatabase, panelColumn: string) {
  // In the (state, panel, id) index's order: counted as read, no sort.
  const slice: SqliteStatement = db.prepare(
    `SELECT ${panelColumn} AS panel, COUNT(*) AS count, MIN(id) AS oldestId FROM release_outbox
      WHERE state = @state AND ${panelColumn} > @after GROUP BY 1 ORDER BY 1 LIMIT ${PANELS_PER_SLICE}`,
  );
  // The unassigned panel ('') sorts first and is not after any id: read on its own.
  const unassigned: SqliteStatement = db.prepare(
    `SELECT ${panelColumn} AS panel, COUNT(*) AS count, MIN(id) AS oldestId FROM release_outbox WHERE state = @state AND ${panelColumn} = '' GROUP BY 1`,
  );
  const storedAt = db.prepare('SELECT created_at AS at FROM release_outbox WHERE id = ?');

  /** One state's panels in panel order, a slice per call of `next()`. */
  function cursor(state: 'pending' | 'dead') {
    let buffered = unassigned.all({ state }) as Grouped[];
    let after: string | undefined = '';
    return {
      peek: (): Grouped | undefined => buffered[0],
      take: (): Grouped | undefined => buffered.shift(),
      /** Reads the next slice when the buffer ran dry; false once every panel was read. */
      async fill(): Promise<boolean> {
        if (buffered.length > 0) return true;
        if (after === undefined) return false;
        await nextTurn();
        buffered = slice.all({ state, after }) as Grouped[];
        after = buffered.length === PANELS_PER_SLICE ? buffered.at(-1)?.panel : undefined;
        return buffered.length > 0;
      },
    };
  }

  return async function panelCounts(limit: number): Promise<PanelCounts[]> {
    const pending = cursor('pending');
    const dead = cursor('dead');
    const best: Ranked[] = [];
    const keep = (entry: Ranked) => {
      if (best.length === limit && !before(entry, best[best.length - 1] as Ranked)) return;
      let at = best.length;
      while (at > 0 && before(entry, best[at - 1] as Ranked)) at--;
      best.splice(at, 0, entry);
      if (best.length > limit) best.pop();
    };
    for (;;) {
      const [morePending, moreDead] = [await pending.fill(), await dead.fill()];
      if (!morePending && !moreDead) break;
      const p = pending.peek();
      const d = dead.peek();
      const panel = p === undefined ? (d as Grouped).panel : d === undefined || utf8Order(p.panel, d.panel) <= 0 ? p.panel : d.panel;
      const fromPending = p?.panel === panel ? pending.take() : undefined;
      const fromDead = d?.panel === panel ? dead.take() : undefined;
      keep({ panel, pending: fromPending?.count ?? 0, dead: fromDead?.count ?? 0, oldestPendingId: fromPending?.oldestId });
    }
    return best.map(({ oldestPendingId, ...counts }) => ({
      ...counts,
      oldestPendingAt: oldestPendingId === undefined ? undefined : (storedAt.get(oldestPendingId) as { at: number } | undefined)?.at,
    }));
  };
}

// Ranking a SQLite outbox's panels by their waiting releases, in slices: the store runs in the
// app's own event loop, and one GROUP BY over 50,000 panels (or 200,000, on a metrics scrape) held
// it for 0.2–1.7 s, as did 1,000,000 releases of 10 panels. Index entries are read in (panel, id)
// order, a key range at a time, counted by panel in SQLite: each range's pending and dead rows in
// the same event-loop turn (so a row that changes state between turns is counted once), at most
// ROWS_PER_SLICE of each, and only the `limit` best panels are kept; the loop gets a turn
// between ranges.
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { SqliteDatabase } from '../../../db/sqlite-driver.js';
import type { PanelCounts } from '../../store.js';

/** Index entries read per state and slice: a few ms of the loop each. */
export const ROWS_PER_SLICE = 5_000;

interface Key {
  panel: string;
  id: number;
}

interface Group {
  panel: string;
  count: number;
  firstId: number;
  lastId: number;
}

interface Ranked {
  panel: string;
  pending: number;
  dead: number;
  oldestPendingId: number | undefined;
}

/**
 * SQLite's order of text (BINARY: UTF-8 bytes, which is code point order), which JS's `<` (UTF-16
 * units) is not: above U+D7FF, surrogates (code points past U+FFFF) must sort after U+E000–U+FFFF.
 */
function utf8Order(a: string, b: string): number {
  if (a === b) return 0;
  // The two orders differ only where both strings hold a unit from U+D800 up: else the native one.
  if (!HIGH_UNITS.test(a) || !HIGH_UNITS.test(b)) return a < b ? -1 : 1;
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return codePointRank(x) - codePointRank(y);
  }
  return a.length - b.length;
}
const HIGH_UNITS = /[\uD800-\uFFFF]/;
const codePointRank = (unit: number): number => (unit < 0xd800 ? unit : unit < 0xe000 ? unit + 0x2000 : unit - 0x800);
const keyOrder = (a: Key, b: Key): number => utf8Order(a.panel, b.panel) || a.id - b.id;

/** Most pending first, then most dead, then by panel id. */
const before = (a: Ranked, b: Ranked): boolean =>
  a.pending > b.pending || (a.pending === b.pending && (a.dead > b.dead || (a.dead === b.dead && a.panel < b.panel)));

/** The `limit` best panels, kept in order as they come. */
function bestOf(limit: number) {
  const best: Ranked[] = [];
  return {
    best,
    keep(entry: Ranked): void {
      if (best.length === limit && !before(entry, best[best.length - 1] as Ranked)) return;
      // Where it goes: after every entry that ranks before it (binary search; ranks never tie).
      let low = 0;
      let high = best.length;
      while (low < high) {
        const middle = (low + high) >>> 1;
        if (before(best[middle] as Ranked, entry)) low = middle + 1;
        else high = middle;
      }
      best.splice(low, 0, entry);
      if (best.length > limit) best.pop();
    },
  };
}

/**
 * Reads the (state, panel, id) index of schema v5, which every writable file has. A file older
 * than v5, opened read-only (the CLI), is ranked in one statement (`panelColumn`: `''` before v3).
 */
export function createPanelRanking(db: SqliteDatabase, panelColumn: string) {
  const storedAt = db.prepare('SELECT created_at AS at FROM release_outbox WHERE id = ?');
  const withTimes = (best: Ranked[]): PanelCounts[] =>
    best.map(({ oldestPendingId, ...counts }) => ({
      ...counts,
      oldestPendingAt: oldestPendingId === undefined ? undefined : (storedAt.get(oldestPendingId) as { at: number } | undefined)?.at,
    }));
  const indexed = db.prepare("SELECT 1 AS found FROM pragma_index_list('release_outbox') WHERE name = 'release_outbox_panel_list'").get() !== undefined;
  if (!indexed) {
    const all = db.prepare(
      `SELECT ${panelColumn} AS panel, SUM(state = 'pending') AS pending, SUM(state = 'dead') AS dead, MIN(CASE WHEN state = 'pending' THEN id END) AS oldestPendingId
        FROM release_outbox WHERE state IN ('pending', 'dead') GROUP BY 1`,
    );
    return async (limit: number): Promise<PanelCounts[]> => {
      const ranking = bestOf(limit);
      for (const row of all.all() as (Omit<Ranked, 'oldestPendingId'> & { oldestPendingId: number | null })[])
        ranking.keep({ ...row, oldestPendingId: row.oldestPendingId ?? undefined });
      return withTimes(ranking.best);
    };
  }
  // The next index entries of a state after a key (and up to one), counted by panel, each part an
  // index range that stops where it should: the rest of the key's panel, the panels after it (up
  // to the bound's panel), then the bound's panel up to its id. A row-value `(panel, id) > (?, ?)`
  // searches from the panel's first entry, and a bound inside an OR stops no search: both walked
  // a panel's whole index on every slice.
  const counted = (where: string, order: string) =>
    db.prepare(
      `SELECT panel, COUNT(*) AS count, MIN(id) AS firstId, MAX(id) AS lastId FROM (
        SELECT panel, id FROM release_outbox WHERE state = @state AND ${where} ORDER BY ${order} LIMIT @limit
      ) GROUP BY panel ORDER BY panel`,
    );
  const restOfPanel = counted('panel = @panel AND id > @id', 'id');
  const restOfPanelUpTo = counted('panel = @panel AND id > @id AND id <= @toId', 'id');
  const panelsAfter = counted('panel > @panel', 'panel, id');
  const panelsBetween = counted('panel > @panel AND panel < @toPanel', 'panel, id');
  const startOfPanel = counted('panel = @toPanel AND id <= @toId', 'id');
  const countOf = (groups: Group[]) => groups.reduce((sum, group) => sum + group.count, 0);
  /** A state's panels in the next slice; `end`: the last key read, when the slice was full (more may follow). */
  const read = (state: 'pending' | 'dead', after: Key, bound: Key | undefined) => {
    const values = { state, ...after, toPanel: bound?.panel, toId: bound?.id };
    const parts =
      bound === undefined ? [restOfPanel, panelsAfter] : bound.panel === after.panel ? [restOfPanelUpTo] : [restOfPanel, panelsBetween, startOfPanel];
    const groups: Group[] = [];
    for (const part of parts) {
      const left = ROWS_PER_SLICE - countOf(groups);
      if (left <= 0) break;
      groups.push(...(part.all({ ...values, limit: left }) as Group[]));
    }
    const last = groups.at(-1);
    return { groups, end: countOf(groups) === ROWS_PER_SLICE && last ? { panel: last.panel, id: last.lastId } : undefined };
  };

  return async function panelCounts(limit: number): Promise<PanelCounts[]> {
    const ranking = bestOf(limit);
    let open: Ranked | undefined;
    const add = (panel: string, state: 'pending' | 'dead', group: Group) => {
      if (open?.panel !== panel) {
        if (open) ranking.keep(open);
        open = { panel, pending: 0, dead: 0, oldestPendingId: undefined };
      }
      open[state] += group.count;
      if (state === 'pending') open.oldestPendingId = Math.min(open.oldestPendingId ?? group.firstId, group.firstId);
    };
    let after: Key = { panel: '', id: 0 };
    for (;;) {
      // One key range per turn, both states read in it: up to where the one that filled its
      // slice first stopped (the other read again up to there, when it went further).
      let pending = read('pending', after, undefined);
      const dead = read('dead', after, pending.end);
      if (dead.end !== undefined && (pending.end === undefined || keyOrder(dead.end, pending.end) < 0)) pending = read('pending', after, dead.end);
      const end = dead.end ?? pending.end;
      // Both lists come sorted by panel: merged as they are.
      let p = 0;
      let d = 0;
      while (p < pending.groups.length || d < dead.groups.length) {
        const fromPending = pending.groups[p];
        const fromDead = dead.groups[d];
        if (fromDead === undefined || (fromPending !== undefined && utf8Order(fromPending.panel, fromDead.panel) <= 0)) {
          add((fromPending as Group).panel, 'pending', fromPending as Group);
          p++;
        } else {
          add(fromDead.panel, 'dead', fromDead);
          d++;
        }
      }
      if (end === undefined) break;
      after = end;
      await nextTurn();
    }
    if (open) ranking.keep(open);
    return withTimes(ranking.best);
  };
}

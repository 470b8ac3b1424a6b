// Sharing claims fairly between panels: which panels a claim visits, round-robin over them, and where the next claim goes on.

/** The due rows of one visited panel, in the order that panel would send them. */
export interface PanelHeads<T> {
  panel: string;
  rows: readonly T[];
}

/**
 * The panels with pending rows in round-robin order: id order from after `after`, wrapping round
 * to the first and ending with `after` itself. `nextPanel(cursor)` names the first panel with
 * pending rows whose id sorts after `cursor` (an index seek in a database).
 */
export function* panelRing(nextPanel: (cursor: string) => string | undefined, after: string): Generator<string> {
  for (let cursor = after; ; ) {
    const next = nextPanel(cursor);
    if (next === undefined) break;
    cursor = next;
    yield next;
  }
  if (after === '') return;
  for (let cursor = ''; ; ) {
    const next = nextPanel(cursor);
    if (next === undefined || next > after) return;
    cursor = next;
    yield next;
  }
}

export interface VisitLimits {
  /** Rows wanted. */
  limit: number;
  /** Panels visited at most (one query each), beyond those skipped. */
  maxPanels: number;
  skipPanels?: readonly string[] | undefined;
  /** Panels that may send one row only (a probe of a panel held back). */
  probePanels?: readonly string[] | undefined;
}

/**
 * Asks panels of the ring for their due rows until `limit` panels have given some (each gives its
 * first before any gives a second, so more are not needed) or `maxPanels` have been asked. A
 * claim for one free slot costs one or two queries, not one per panel. `''` (rows without a
 * panel) is never visited; panels to skip are passed over without counting. `resumeAfter` is
 * the last panel visited when the ring was not visited whole (undefined when it was).
 */
export function gatherHeads<T>(
  ring: Iterable<string>,
  { limit, maxPanels, skipPanels = [], probePanels = [] }: VisitLimits,
  dueOf: (panel: string, limit: number) => readonly T[],
): { heads: PanelHeads<T>[]; resumeAfter: string | undefined } {
  const skip = new Set(skipPanels);
  const probing = new Set(probePanels);
  const heads: PanelHeads<T>[] = [];
  let visited = 0;
  let last: string | undefined;
  for (const panel of ring) {
    if (panel === '' || skip.has(panel)) continue;
    if (visited === maxPanels || heads.length === limit) return { heads, resumeAfter: last };
    visited++;
    last = panel;
    const rows = dueOf(panel, probing.has(panel) ? 1 : limit);
    if (rows.length > 0) heads.push({ panel, rows });
  }
  return { heads, resumeAfter: undefined };
}

/**
 * Takes every visited panel's first row, then every panel's second, and so on, up to `limit`
 * rows. The next claim goes on after the panel of the last row taken (so the panels a short round
 * left out come first next time); with no row taken, after `resumeAfter` (the last panel visited
 * when the ring was not visited whole), else from the first panel again (undefined).
 */
export function pickFairly<T>(heads: readonly PanelHeads<T>[], limit: number, resumeAfter: string | undefined): { rows: T[]; lastPanel: string | undefined } {
  const rows: T[] = [];
  let lastTaken: string | undefined;
  for (let rank = 0; rows.length < limit; rank++) {
    let tookAny = false;
    for (const { panel, rows: panelRows } of heads) {
      const row = panelRows[rank];
      if (row === undefined || rows.length === limit) continue;
      rows.push(row);
      lastTaken = panel;
      tookAny = true;
    }
    if (!tookAny) break;
  }
  return { rows, lastPanel: lastTaken ?? resumeAfter };
}

// Sharing claims fairly between panels: which panels a claim visits, round-robin over them, and where the next claim goes on.

/** The due rows of one visited panel, in the order that panel would send them. */
export interface PanelHeads<T> {
  panel: string;
  rows: readonly T[];
}

/**
 * The panels a claim visits: those with pending rows, in id order from after `after`, wrapping
 * round to the first (`''`, rows without a panel, is never visited). Panels to skip are passed
 * over without counting; at most `maxPanels` others are visited. `complete` is false when the
 * visit stopped at `maxPanels` with panels left over.
 */
export function panelsToVisit(
  panelsWithPending: Iterable<string>,
  after: string,
  maxPanels: number,
  skip: ReadonlySet<string>,
): { panels: string[]; complete: boolean } {
  const sorted = [...new Set(panelsWithPending)].filter((panel) => panel !== '' && !skip.has(panel)).sort();
  const rotated = [...sorted.filter((panel) => panel > after), ...sorted.filter((panel) => panel <= after)];
  return { panels: rotated.slice(0, maxPanels), complete: rotated.length <= maxPanels };
}

/**
 * Takes every visited panel's first row, then every panel's second, and so on, up to `limit`
 * rows. The next claim goes on after the panel of the last row taken (so the panels a short round
 * left out come first next time); with no row taken, after the last panel visited when the visit
 * was not `complete`, and from the first panel again (undefined) otherwise.
 */
export function pickFairly<T>(heads: readonly PanelHeads<T>[], limit: number, complete: boolean): { rows: T[]; lastPanel: string | undefined } {
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
  return { rows, lastPanel: lastTaken ?? (complete ? undefined : heads.at(-1)?.panel) };
}

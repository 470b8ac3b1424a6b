// What a scrape reads of `panels` mode: counts over every panel (cheap: a few fields each), and
// full readings for a bounded number of panels, those that carry information first (locked,
// in grace, failing, pending), so that 10,000 panels never mean 10,000 × every series or one long
// block of the event loop.
import type { LicenseState } from '../../serve/license-state.js';
import type { PanelReading, PanelsSummary } from '../telemetry.js';

/** What the selection needs of a panel, without computing its status. */
export interface ReadablePanel {
  readonly state: LicenseState;
  /** Its last check failed (its own or a peer's), or its shared store is failing. */
  readonly failing: boolean;
  reading(): PanelReading;
}

/** Lower comes first (0 to 4): the panels an operator looks at. */
export function rank(panel: ReadablePanel): number {
  if (panel.state === 'locked') return 0;
  if (panel.state === 'grace') return 1;
  if (panel.failing) return 2;
  if (panel.state === 'pending') return 3;
  return 4;
}

/** Counts by state over every panel, and how many are failing. */
export function summarize(panels: Iterable<ReadablePanel>): PanelsSummary {
  const byState: Record<LicenseState, number> = { active: 0, grace: 0, locked: 0, pending: 0 };
  let failing = 0;
  for (const panel of panels) {
    byState[panel.state]++;
    if (panel.failing) failing++;
  }
  return { byState, failing };
}

/** Full readings of at most `limit` panels, the most telling first (then in the order given). */
export function selectReadings(panels: Iterable<ReadablePanel>, limit: number): PanelReading[] {
  if (limit <= 0) return [];
  // No rank can give more than `limit`: each bucket stops there (5 × limit references at most).
  const buckets: ReadablePanel[][] = [[], [], [], [], []];
  for (const panel of panels) {
    const bucket = buckets[rank(panel)] as ReadablePanel[];
    if (bucket.length < limit) bucket.push(panel);
  }
  return buckets
    .flat()
    .slice(0, limit)
    .map((panel) => panel.reading());
}

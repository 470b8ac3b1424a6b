// What a scrape reads of `panels` mode: counts over every panel (cheap: a few fields each), and
// full readings for a bounded number of panels, those that carry information first (locked,
// expiring soon, in grace, failing, pending), so that 10,000 panels never mean 10,000 × every
// series or one long block of the event loop.
import type { LicenseState } from '../../serve/license-state.js';
import type { PanelReading, PanelsSummary } from '../telemetry.js';

/** What the selection needs of a panel, without computing its status. */
export interface ReadablePanel {
  readonly state: LicenseState;
  /** Its last check failed (its own or a peer's), or its shared store is failing. */
  readonly failing: boolean;
  /** Its verdict as requests get it: the expiry warning its license has reached, if any. */
  readonly monitor: { readonly entry: { readonly snapshot: { readonly license: { readonly expiryWarning: number | null } } } };
  reading(): PanelReading;
}

/** Above twice every expiry warning (3650 days at most) and one, so that a warning's rank stays below 2. */
const WARNING_SCALE = 8192;

/**
 * Lower comes first: the panels an operator looks at. Locked (0); then those whose license has
 * reached an expiry warning, the nearest warning first and, at one warning, those in grace
 * first (1 to 2); in grace (2), failing (3), pending (4), the rest (5).
 */
export function rank(panel: ReadablePanel): number {
  if (panel.state === 'locked') return 0;
  const warning = panel.monitor.entry.snapshot.license.expiryWarning;
  if (warning !== null) return 1 + (2 * warning + (panel.state === 'grace' ? 0 : 1)) / WARNING_SCALE;
  if (panel.state === 'grace') return 2;
  if (panel.failing) return 3;
  if (panel.state === 'pending') return 4;
  return 5;
}

/**
 * Panels by rank, each rank holding at most `cap` (no rank can give more than a page or a scrape
 * needs): a handful of ranks, plus one per expiry warning.
 */
export class RankBuckets {
  private readonly byRank = new Map<number, ReadablePanel[]>();

  constructor(private readonly cap: number) {}

  add(panel: ReadablePanel): void {
    const key = rank(panel);
    const bucket = this.byRank.get(key);
    if (bucket === undefined) this.byRank.set(key, [panel]);
    else if (bucket.length < this.cap) bucket.push(panel);
  }

  /** The panels kept, lowest rank first, each rank in the order they came. */
  ordered(): ReadablePanel[] {
    return [...this.byRank.keys()].sort((a, b) => a - b).flatMap((key) => this.byRank.get(key) ?? []);
  }
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
  const buckets = new RankBuckets(limit);
  for (const panel of panels) buckets.add(panel);
  return buckets
    .ordered()
    .slice(0, limit)
    .map((panel) => panel.reading());
}

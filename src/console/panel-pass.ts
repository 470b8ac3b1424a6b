// The panels list's one pass over the panels in memory (up to `panels.max`, a million at most): the
// counts by state and the panels of one page, most telling first, read a slice at a time (one
// slice a turn of the event loop, slices.ts); only the panels shown are read in full.
import { RankBuckets } from '../guard/panels/panel-readings.js';
import type { GuardInstruments, PanelReading } from '../guard/telemetry.js';
import type { LicenseState } from '../serve/license-state.js';
import { nextSlice } from './slices.js';

/** Panels looked at per slice: a few milliseconds, however many there are. */
export const PANELS_PER_SLICE = 5000;

export interface PanelsPage {
  /** The page's panels, read in full, most telling first. */
  shown: PanelReading[];
  /** More panels (of the state asked for) come after this page. */
  more: boolean;
  /** Every panel in memory, by state, and how many are failing. */
  byState: Record<LicenseState, number>;
  failing: number | undefined;
}

/** Page `page` (of `pageSize`) of the panels in memory, of `state` or all: locked, expiring soon, in grace and failing first. */
export async function panelsPage(
  instruments: GuardInstruments,
  state: LicenseState | undefined,
  page: number,
  pageSize: number,
  signal?: AbortSignal,
): Promise<PanelsPage> {
  const all = instruments.panels?.();
  if (all === undefined) return fromReadings(instruments, state, page, pageSize);
  // Each rank keeps what the page could need of it: the panels before the page and the page's.
  const wanted = (page + 1) * pageSize;
  const buckets = new RankBuckets(wanted);
  const byState: Record<LicenseState, number> = { active: 0, grace: 0, locked: 0, pending: 0 };
  let failing = 0;
  let matching = 0;
  for (let done = false; !done; ) {
    await nextSlice(signal);
    for (let looked = 0; looked < PANELS_PER_SLICE; looked++) {
      const next = all.next();
      if (next.done) {
        done = true;
        break;
      }
      const panel = next.value;
      byState[panel.state]++;
      if (panel.failing) failing++;
      if (state !== undefined && panel.state !== state) continue;
      matching++;
      buckets.add(panel);
    }
  }
  const shown = buckets
    .ordered()
    .slice(page * pageSize, wanted)
    .map((panel) => panel.reading());
  return { shown, more: matching > wanted, byState, failing };
}

/** One panel's guard (or a guard without the live list): its readings, as they come. */
function fromReadings(instruments: GuardInstruments, state: LicenseState | undefined, page: number, pageSize: number): PanelsPage {
  const readings = instruments.readings(Math.min((page + 1) * pageSize + 1, 1_000)).filter((r) => state === undefined || r.status.state === state);
  const byState: Record<LicenseState, number> = { active: 0, grace: 0, locked: 0, pending: 0 };
  for (const { status } of readings) byState[status.state]++;
  const summary = instruments.summary?.();
  return {
    shown: readings.slice(page * pageSize, (page + 1) * pageSize),
    more: readings.length > (page + 1) * pageSize,
    byState: summary?.byState ?? byState,
    failing: summary?.failing,
  };
}

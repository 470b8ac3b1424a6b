// Finding releases by title. A title lives in each release's body, which no store indexes (and a
// custom store may keep anywhere), so the console reads the list through the outbox's own API in
// id order, a slice at a time (slices.ts: a few milliseconds each, one a turn of the event loop),
// and keeps the releases whose title contains the words asked for. One page view reads at most
// SCAN_ROWS releases or for SCAN_MS, however long the history: the page then says how far it read
// and offers to read on from there, as the next page of any list does.
import type { OutboxEntry, ReleaseOutbox } from '../outbox/outbox.js';
import type { OutboxState } from '../outbox/store.js';
import { listFilters, nextSlice, SLICE_ROWS } from './slices.js';

/** The most releases one page view reads looking for a title. */
export const SCAN_ROWS = 10_000;
/** The most time one page view spends reading (waiting for its turns not counted). */
export const SCAN_MS = 1000;

/** How much one page view may read: SCAN_ROWS and SCAN_MS, but for tests. */
export interface ScanBudget {
  rows: number;
  ms: number;
}

export interface TitleQuery {
  state: OutboxState;
  panel: string | undefined;
  /** Words the title must each contain, in any order and case (compared after Unicode NFKC normalisation). */
  title: string;
  /** Read releases after this id (the previous page's `next`). */
  after: number | undefined;
}

export interface TitleMatches {
  /** At most `pageSize` releases whose title matches, in id order. */
  found: OutboxEntry[];
  /**
   * Where the next page reads on from (an id), or undefined when every release of the list was read.
   * Set when the page filled up, or when SCAN_ROWS were read without filling it.
   */
  next: number | undefined;
  /** The page stopped because it read its budget (SCAN_ROWS or SCAN_MS), not because it filled up. */
  stoppedEarly: boolean;
  /** How many releases the page read. */
  read: number;
}

/** The form in which titles are compared: NFKC (so full-width and composed letters match) and lower case. */
function fold(text: string): string {
  return text.normalize('NFKC').toLocaleLowerCase('und');
}

/** The words of a search, folded: what titleMatches() looks for. */
export function searchWords(text: string): string[] {
  return fold(text)
    .split(/\s+/)
    .filter((word) => word.length > 0);
}

/** Whether a release's title contains every one of `words` (from searchWords), in any order. */
export function titleMatches(title: unknown, words: string[]): boolean {
  if (typeof title !== 'string') return false;
  const folded = fold(title);
  return words.every((word) => folded.includes(word));
}

/**
 * One page of the releases whose title has every word of `query.title`, reading the list from
 * `query.after` a slice at a time until the page fills up, the list ends, or the budget is spent.
 * Rejects with the signal's reason once it is aborted.
 */
export async function findByTitle(
  outbox: ReleaseOutbox,
  query: TitleQuery,
  pageSize: number,
  signal?: AbortSignal,
  budget: ScanBudget = { rows: SCAN_ROWS, ms: SCAN_MS },
): Promise<TitleMatches> {
  const words = searchWords(query.title);
  const found: OutboxEntry[] = [];
  let after = query.after;
  let read = 0;
  let spentMs = 0;
  while (read < budget.rows && spentMs < budget.ms) {
    await nextSlice(signal);
    const started = performance.now();
    const limit = Math.min(SLICE_ROWS, budget.rows - read);
    const batch = await outbox.list({ ...listFilters(query), limit, ...(after === undefined ? {} : { after }) });
    for (const entry of batch) {
      read++;
      after = entry.id;
      if (!titleMatches(entry.release.title, words)) continue;
      found.push(entry);
      // One more than a page: there is a next page, and it reads on after this page's last release.
      if (found.length > pageSize) return { found: found.slice(0, pageSize), next: found[pageSize - 1]?.id, stoppedEarly: false, read };
    }
    spentMs += performance.now() - started;
    if (batch.length < limit) return { found, next: undefined, stoppedEarly: false, read };
  }
  return { found, next: after, stoppedEarly: true, read };
}

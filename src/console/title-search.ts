// Finding releases by title. A title lives in each release's body, which no store indexes (and a
// custom store may keep anywhere), so the console reads the list through the outbox's own API in
// id order, a batch at a time, and keeps the releases whose title contains the words asked for.
// One page view reads at most SCAN_ROWS releases, however long the history: the page then says
// how far it read and offers to read on from there, as the next page of any list does.
import type { OutboxEntry, ReleaseOutbox } from '../outbox/outbox.js';
import type { OutboxState } from '../outbox/store.js';

/** The most releases one page view reads looking for a title. */
export const SCAN_ROWS = 10_000;
/** Releases read per store call (the outbox's `list()` takes at most 1,000). */
const BATCH = 1000;

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
  /** The page stopped because it read SCAN_ROWS releases, not because it filled up. */
  stoppedEarly: boolean;
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

export async function findByTitle(outbox: ReleaseOutbox, query: TitleQuery, pageSize: number): Promise<TitleMatches> {
  const words = searchWords(query.title);
  const found: OutboxEntry[] = [];
  let after = query.after;
  let read = 0;
  while (read < SCAN_ROWS) {
    const limit = Math.min(BATCH, SCAN_ROWS - read);
    const batch = await outbox.list({
      state: query.state,
      limit,
      ...(query.panel === undefined ? {} : { panel: query.panel }),
      ...(after === undefined ? {} : { after }),
    });
    for (const entry of batch) {
      read++;
      after = entry.id;
      if (!titleMatches(entry.release.title, words)) continue;
      found.push(entry);
      // One more than a page: there is a next page, and it reads on after this page's last release.
      if (found.length > pageSize) return { found: found.slice(0, pageSize), next: found[pageSize - 1]?.id, stoppedEarly: false };
    }
    if (batch.length < limit) return { found, next: undefined, stoppedEarly: false };
  }
  return { found, next: after, stoppedEarly: true };
}

// How the console's pages read much without holding the event loop of the app they run in: in
// slices small whatever the data (by rows, and so by bytes), one slice per turn of the event loop
// for the whole process (however many pages read at once), and at most a few title searches at a
// time (each bounded in rows and in time).
import { ConsoleBusyError } from '../errors.js';
import type { OutboxEntry, ReleaseOutbox } from '../outbox/outbox.js';
import type { OutboxState } from '../outbox/store.js';
import { MAX_RELEASE_BYTES } from '../release.js';

/** Bytes of release bodies one slice reads at most: a few milliseconds of reading and parsing them. */
export const SLICE_BYTES = 256 * 1024;
/** Releases one slice reads: as many of the largest release `enqueue()` accepts as SLICE_BYTES hold (9). */
export const SLICE_ROWS = Math.max(1, Math.floor(SLICE_BYTES / MAX_RELEASE_BYTES));
/** Title searches one process runs at once; another is answered 503 (Retry-After) until one ends. */
export const MAX_SEARCHES = 2;

// Readers waiting for their next slice, served one per turn of the event loop, first come first.
const waiting: (() => void)[] = [];
let granting = false;
let searches = 0;

function grantNext(): void {
  granting = false;
  waiting.shift()?.();
  // An immediate queued while immediates run waits for the next turn: I/O is polled in between.
  if (waiting.length > 0) scheduleGrant();
}

function scheduleGrant(): void {
  if (granting) return;
  granting = true;
  setImmediate(grantNext);
}

/**
 * Resolves when the caller may run one slice: at most one slice a turn of the event loop in the
 * whole process, so that pages reading at once take turns rather than add up. Rejects with the
 * signal's reason once it is aborted (the browser went away: nobody reads the page).
 */
export function nextSlice(signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const abort = () => {
      const at = waiting.indexOf(grant);
      if (at >= 0) waiting.splice(at, 1);
      reject(signal?.reason);
    };
    const grant = () => {
      signal?.removeEventListener('abort', abort);
      resolve();
    };
    signal?.addEventListener('abort', abort, { once: true });
    waiting.push(grant);
    scheduleGrant();
  });
}

/** Runs `search` as one of at most MAX_SEARCHES title searches; throws ConsoleBusyError past that. */
export async function asOneSearch<T>(search: () => Promise<T>): Promise<T> {
  if (searches >= MAX_SEARCHES) throw new ConsoleBusyError(MAX_SEARCHES);
  searches++;
  try {
    return await search();
  } finally {
    searches--;
  }
}

/** What a page lists: a state, of one panel or all, of one track or all, after an id. */
export interface ListQuery {
  state: OutboxState;
  panel?: string | undefined;
  track?: string | undefined;
  after?: number | undefined;
}

/** The first `count` releases of a list, read SLICE_ROWS at a time, one slice a turn. */
export async function readSliced(outbox: ReleaseOutbox, query: ListQuery, count: number, signal?: AbortSignal): Promise<OutboxEntry[]> {
  const entries: OutboxEntry[] = [];
  let after = query.after;
  while (entries.length < count) {
    await nextSlice(signal);
    const limit = Math.min(SLICE_ROWS, count - entries.length);
    const batch = await outbox.list({ ...listFilters(query), limit, ...(after === undefined ? {} : { after }) });
    entries.push(...batch);
    if (batch.length < limit) break;
    after = batch.at(-1)?.id;
  }
  return entries;
}

/** The filters of `query` that are set, as `outbox.list()` takes them (but `after`). */
export function listFilters({ state, panel, track }: ListQuery): { state: OutboxState; panel?: string; track?: string } {
  return { state, ...(panel === undefined ? {} : { panel }), ...(track === undefined ? {} : { track }) };
}

// Cluster mode at start-up: read the cluster's record and, when it is not current, take the
// start-up lease or wait (briefly) for the peer that took it — so instances started together make
// one start-up call to the mother, and a slow store never holds the first check back.
import { performance } from 'node:perf_hooks';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What the store calls before a first check may take between them, at most (ms). */
const STARTUP_STORE_BUDGET_MS = 250;
const OVER_BUDGET = Symbol('over budget');

export interface StartupSync {
  /** Reads the record and applies it (never throws: a failure marks the store unavailable). */
  read(): Promise<void>;
  /** Takes a lease: true when this instance runs the check. */
  acquire(name: string, ttlMs: number): Promise<boolean>;
  /** A current record was applied at or after `at` (performance.now()). */
  currentSince(at: number): boolean;
  closed(): boolean;
}

export interface StartupTimes {
  begun: number;
  startupTimeoutMs: number;
  checkTimeoutMs: number;
  now(): number;
}

/** 'current': a current record was adopted, no check needed; 'check': run the first check. */
export async function firstVerdict(sync: StartupSync, { begun, startupTimeoutMs, checkTimeoutMs, now }: StartupTimes): Promise<'current' | 'check'> {
  // The read and the start-up lease share one small budget: a store that is slow (or paused,
  // still looking connected) must not hold the first check back; it starts at once, and what
  // the store answers later is applied as usual.
  const budget = sleep(STARTUP_STORE_BUDGET_MS).then(() => OVER_BUDGET);
  if ((await Promise.race([sync.read(), budget])) === OVER_BUDGET) return 'check';
  if (sync.currentSince(begun)) return 'current';
  // The lease names the minute, so a copy of a genuine value cannot hold start-ups back later.
  const lease = sync.acquire(`startup:${Math.floor(now() / 60_000)}`, checkTimeoutMs + 2000);
  const won = await Promise.race([lease, budget]);
  if (won === OVER_BUDGET || won) return 'check';
  // A peer is running the start-up check: wait for its record, but only for half the time
  // requests wait for a first verdict, so our own check still fits in the rest.
  const until = performance.now() + startupTimeoutMs / 2;
  while (!sync.closed() && performance.now() < until) {
    await sleep(Math.min(100, Math.max(1, until - performance.now())));
    if (sync.currentSince(begun)) return 'current';
    await sync.read();
    if (sync.currentSince(begun)) return 'current';
  }
  return 'check';
}

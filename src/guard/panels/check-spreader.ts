// One timer for the license checks of many panels: each panel is checked once per interval at
// its own phase, so 10,000 panels on 5 minutes make ~33 checks a second, never a burst, and a
// per-second cap holds even when every panel's retry falls due at once (a mother outage).
import { createHash } from 'node:crypto';

export interface CheckSpreaderOptions {
  intervalMs: number;
  now: () => number;
  /**
   * Starts one panel's check; the spreader does not wait for it. `dueAtMs`: the time it was
   * scheduled for (the second), which every instance agrees on, however late its timer fires.
   */
  run: (id: string, dueAtMs: number) => void;
  /** Panels scheduled; the cap is twice the even rate, and at least 10 a second. */
  count: () => number;
}

export interface CheckSpreader {
  /** The panel's next regular check: the next time of its phase at least half an interval from now. */
  scheduleRegular(id: string): void;
  /** A check at `atMs` (a retry); it still waits its turn under the per-second cap. */
  scheduleAt(id: string, atMs: number): void;
  cancel(id: string): void;
  /**
   * Which of the panel's regular slots `atMs` belongs to (the nearest one): the same number on
   * every instance whose clock is within half an interval, so instances can elect one checker per slot.
   */
  slotOf(id: string, atMs: number): number;
  /** Due time of a panel's next check, if one is scheduled. */
  nextAt(id: string): number | undefined;
  /** The most checks started in any one second so far (for the benchmark). */
  peakPerSecond(): number;
  close(): void;
}

const SECOND = 1000;

/** A stable phase in [0, intervalMs) per panel id: spread evenly, the same after a restart. */
function phaseOf(id: string, intervalMs: number): number {
  return createHash('sha256').update(id).digest().readUInt32BE(0) % intervalMs;
}

export function createCheckSpreader({ intervalMs, now, run, count }: CheckSpreaderOptions): CheckSpreader {
  /** Second (epoch s) → panels due then. */
  const buckets = new Map<number, Set<string>>();
  const dueSecond = new Map<string, number>();
  let timer: NodeJS.Timeout | undefined;
  let peak = 0;

  function place(id: string, second: number): void {
    const previous = dueSecond.get(id);
    if (previous !== undefined) buckets.get(previous)?.delete(id);
    dueSecond.set(id, second);
    const bucket = buckets.get(second) ?? new Set<string>();
    buckets.set(second, bucket);
    bucket.add(id);
    arm();
  }

  function arm(): void {
    if (timer !== undefined) return;
    timer = setInterval(tick, SECOND);
    timer.unref();
  }

  function tick(): void {
    const current = Math.floor(now() / SECOND);
    const cap = Math.max(10, Math.ceil((2 * count() * SECOND) / intervalMs));
    const due: [string, number][] = [];
    for (const [second, bucket] of buckets) {
      if (second > current) continue;
      for (const id of bucket) due.push([id, second]);
      buckets.delete(second);
    }
    // Oldest first is not needed for fairness here: what misses this second goes first next second.
    const started = due.slice(0, cap);
    for (const [id] of due.slice(cap)) place(id, current + 1);
    for (const [id, second] of started) {
      dueSecond.delete(id);
      run(id, second * SECOND);
    }
    peak = Math.max(peak, started.length);
    if (buckets.size === 0 && timer !== undefined) {
      clearInterval(timer);
      timer = undefined;
    }
  }

  return {
    scheduleRegular(id) {
      const at = now();
      const phase = phaseOf(id, intervalMs);
      const earliest = at + intervalMs / 2;
      const cycle = Math.ceil((earliest - phase) / intervalMs);
      place(id, Math.floor((cycle * intervalMs + phase) / SECOND));
    },
    scheduleAt(id, atMs) {
      place(id, Math.floor(atMs / SECOND));
    },
    cancel(id) {
      const second = dueSecond.get(id);
      if (second === undefined) return;
      buckets.get(second)?.delete(id);
      dueSecond.delete(id);
    },
    slotOf: (id, atMs) => Math.round((atMs - phaseOf(id, intervalMs)) / intervalMs),
    nextAt(id) {
      const second = dueSecond.get(id);
      return second === undefined ? undefined : second * SECOND;
    },
    peakPerSecond: () => peak,
    close() {
      clearInterval(timer);
      timer = undefined;
      buckets.clear();
      dueSecond.clear();
    },
  };
}

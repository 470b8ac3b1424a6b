// What the console remembers of this instance's activity, in memory and bounded: each panel's last
// checks (for its timeline) and deliveries and failures per minute over the last hour. It listens
// as the metrics do (observers, not event listeners), so it changes nothing the app sees.
import { LRUCache } from 'lru-cache';
import type { CheckRecord } from '../guard/telemetry.js';
import type { OutboxEventName } from '../outbox/events.js';

/** One check this instance ran, as the timeline draws it. */
export interface CheckPoint {
  at: number;
  /** `ok`, `inactive`, or the failure's code. */
  result: string;
  durationMs: number;
}

export interface MinuteCounts {
  /** Start of the minute (ms). */
  at: number;
  delivered: number;
  failed: number;
}

const CHECKS_KEPT = 30;
const PANELS_KEPT = 1000;
const MINUTES_KEPT = 60;

export class ConsoleActivity {
  private readonly checks = new LRUCache<string, CheckPoint[]>({ max: PANELS_KEPT });
  private readonly minutes = new Map<number, MinuteCounts>();

  constructor(private readonly now: () => number) {}

  /** A check ended (from the guard's telemetry). */
  check(record: CheckRecord): void {
    const points = this.checks.get(record.panel) ?? [];
    points.push({ at: this.now(), result: record.result, durationMs: record.durationMs });
    if (points.length > CHECKS_KEPT) points.shift();
    this.checks.set(record.panel, points);
  }

  /** An outbox event (from its telemetry): deliveries, and attempts that failed. */
  outbox(event: OutboxEventName): void {
    if (event !== 'delivered' && event !== 'retrying' && event !== 'dead') return;
    const minute = this.minuteOf(this.now());
    const counts = this.minutes.get(minute) ?? { at: minute, delivered: 0, failed: 0 };
    if (event === 'delivered') counts.delivered++;
    else counts.failed++;
    this.minutes.set(minute, counts);
    for (const at of this.minutes.keys()) if (at <= minute - MINUTES_KEPT * 60_000) this.minutes.delete(at);
  }

  /** The panel's last checks, oldest first. */
  checksOf(panel: string): readonly CheckPoint[] {
    return this.checks.get(panel) ?? [];
  }

  /** The last hour, a minute each, oldest first (minutes without events count zero). */
  lastHour(): MinuteCounts[] {
    const last = this.minuteOf(this.now());
    return Array.from({ length: MINUTES_KEPT }, (_, i) => {
      const at = last - (MINUTES_KEPT - 1 - i) * 60_000;
      return this.minutes.get(at) ?? { at, delivered: 0, failed: 0 };
    });
  }

  private minuteOf(ms: number): number {
    return Math.floor(ms / 60_000) * 60_000;
  }
}

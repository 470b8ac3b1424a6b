// `maxPerSecond`: the pushes this outbox makes to one mother (its base URL) start at least
// 1/maxPerSecond s apart, whichever of its panels they are for. A row waits for its mother's turn
// in its slot, first come first served; the claims skip panels whose mother already has a row
// waiting well ahead (rated-claims.ts), so a slow mother's rows never take every slot.
import { LRUCache } from 'lru-cache';
import { type OptionProblems, optionError, shown } from '../../options.js';
import type { Attempt } from './delivery-attempt.js';

/**
 * A mother is claimed from again this long before its next free turn: long enough for a claim's
 * round trip, so the row for that turn is there when it comes and the mother never sits idle.
 */
export const TURN_LOOKAHEAD_MS = 50;
/** Panels whose mother is remembered (the most recently sent): the claims can skip these while their mother is full. */
const PANELS_REMEMBERED = 1000;

interface Mother {
  /** When the last push to it started (monotonic ms). */
  last: number;
  /** Rows waiting for their turn, first come first served: each resolves true at its turn, false when the outbox stops. */
  queue: ((go: boolean) => void)[];
  timer: NodeJS.Timeout | undefined;
}

export class MotherRate {
  /** Least time between the starts of two pushes to one mother (ms). */
  readonly intervalMs: number;
  private readonly mothers = new Map<string, Mother>();
  /** Panel → the mother its last push went to. */
  private readonly panels = new LRUCache<string, string>({ max: PANELS_REMEMBERED });
  private stopped = false;

  /** `now`: the outbox's clock (epoch ms), for the times the worker is woken at. */
  constructor(
    maxPerSecond: number,
    private readonly now: () => number,
  ) {
    this.intervalMs = 1000 / maxPerSecond;
  }

  /**
   * Waits for the next turn at `mother` (a push of `panel` starts now). Resolves true at the turn;
   * false if the outbox stops first (the row goes back unsent). Turns are timed on the monotonic
   * clock and counted from when each push really started, so a timer that fires late (a busy CPU)
   * never lets the next push follow closer than the interval. `timing.waitedMs` learns how long it waited.
   */
  async turn(panel: string, motherUrl: string | undefined, timing: { waitedMs?: number } = {}): Promise<boolean> {
    const from = performance.now();
    const go = await this.wait(panel, motherUrl);
    timing.waitedMs = performance.now() - from;
    return go;
  }

  private wait(panel: string, motherUrl: string | undefined): Promise<boolean> {
    if (this.stopped) return Promise.resolve(false);
    const key = motherUrl ?? '';
    this.panels.set(panel, key);
    let mother = this.mothers.get(key);
    if (mother === undefined) {
      mother = { last: Number.NEGATIVE_INFINITY, queue: [], timer: undefined };
      this.mothers.set(key, mother);
    }
    if (mother.queue.length === 0 && performance.now() - mother.last >= this.intervalMs) {
      mother.last = performance.now();
      return Promise.resolve(true);
    }
    const waiting = new Promise<boolean>((resolve) => mother.queue.push(resolve));
    this.arm(mother);
    return waiting;
  }

  /**
   * Until when (epoch ms of the outbox's clock) rows of `panel` are not claimed: its mother has a
   * row waiting, and its next free turn is more than TURN_LOOKAHEAD_MS away. Undefined when they
   * may be claimed (or its mother is not known yet).
   */
  fullUntil(panel: string): number | undefined {
    const key = this.panels.peek(panel);
    return key === undefined ? undefined : this.motherFullUntil(key);
  }

  /** The remembered panels whose mother is full now, and the earliest time one of those mothers is claimed from again. */
  fullPanels(): { panels: string[]; until: number | undefined } {
    const full = new Map<string, number>();
    for (const key of this.mothers.keys()) {
      const until = this.motherFullUntil(key);
      if (until !== undefined) full.set(key, until);
    }
    if (full.size === 0) return { panels: [], until: undefined };
    const panels: string[] = [];
    for (const [panel, key] of this.panels.entries()) if (full.has(key)) panels.push(panel);
    return { panels, until: Math.min(...full.values()) };
  }

  /** The outbox stops: every row waiting for its turn goes back unsent at once, and no turn is given any more. */
  stop(): void {
    this.stopped = true;
    for (const mother of this.mothers.values()) {
      clearTimeout(mother.timer);
      mother.timer = undefined;
      for (const resolve of mother.queue.splice(0)) resolve(false);
    }
  }

  private motherFullUntil(key: string): number | undefined {
    const mother = this.mothers.get(key);
    if (mother === undefined || mother.queue.length === 0) return undefined;
    const nowMono = performance.now();
    const nextFree = mother.last + this.intervalMs * (mother.queue.length + 1);
    const openAt = nextFree - TURN_LOOKAHEAD_MS;
    return openAt > nowMono ? this.now() + (openAt - nowMono) : undefined;
  }

  /** Gives the first waiting row its turn once the interval since the last push has passed. */
  private arm(mother: Mother): void {
    if (mother.timer !== undefined || mother.queue.length === 0) return;
    const dueIn = Math.max(0, Math.ceil(mother.last + this.intervalMs - performance.now()));
    // Referenced: a row waits here only while it holds a slot (a bounded wait, see resolveMaxPerSecond).
    mother.timer = setTimeout(() => {
      mother.timer = undefined;
      // A timer may fire a fraction of a millisecond early: never a turn before its time.
      if (performance.now() - mother.last >= this.intervalMs) {
        mother.last = performance.now();
        mother.queue.shift()?.(true);
      }
      this.arm(mother);
    }, dueIn);
  }
}

/**
 * Validates `maxPerSecond` (undefined: no limit). A row waits for its turn in a slot, behind at
 * most `concurrency - 1` others at its mother, so the wait can reach `concurrency` turns: that
 * wait, the push and the time to record it (`marginMs`) must fit in the row's lease.
 */
export function resolveMaxPerSecond(
  value: unknown,
  limits: { concurrency: number; leaseMs: number; pushTimeoutMs: number | undefined; marginMs: number },
  problems: OptionProblems,
): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    problems.add(
      optionError(
        'maxPerSecond',
        `must be a positive number of pushes per second to each mother, received ${shown(value)}`,
        'Pass e.g. 10 (ten a second), 0.5 (one every 2 s), or leave it out for no limit.',
      ),
    );
    return undefined;
  }
  const { concurrency, leaseMs, marginMs } = limits;
  const pushMs = limits.pushTimeoutMs ?? leaseMs / 2;
  const roomMs = leaseMs - marginMs - pushMs;
  const waitMs = (concurrency * 1000) / value;
  if (waitMs <= roomMs) return value;
  const fixes = [`raise \`leaseMs\` to ${Math.ceil(waitMs + pushMs + marginMs)}`];
  const fewest = Math.floor((roomMs * value) / 1000);
  if (fewest >= 1) fixes.unshift(`lower \`concurrency\` to ${fewest}`);
  if (roomMs > 0) fixes.unshift(`raise \`maxPerSecond\` to ${Math.ceil((concurrency * 1e6) / roomMs) / 1000} or more`);
  const fix = `${fixes.slice(0, -1).join(', ')}${fixes.length > 1 ? ', or ' : ''}${fixes.at(-1)}.`;
  problems.add(
    optionError(
      'maxPerSecond',
      `(${value}) is too low for \`concurrency\` ${concurrency}: a release may wait ${Math.ceil(waitMs)} ms for its turn at its mother, and its lease (\`leaseMs\` ${leaseMs}) leaves ${Math.max(0, Math.floor(roomMs))} ms beside the push and the time to record it`,
      fix.charAt(0).toUpperCase() + fix.slice(1),
    ),
  );
  return value;
}

const STOPPED_WAITING = 'not sent: the outbox stopped while it waited for its turn at the mother (maxPerSecond); due again at once';

/** A row whose turn never came (the outbox stopped): back unsent, due at once, no attempt counted. */
export function notSentForRate(nowMs: number, reason = STOPPED_WAITING): Attempt {
  return {
    outcome: { kind: 'retry', nextAttemptAt: nowMs, error: reason, notSent: true },
    error: new Error(reason),
    delayMs: 0,
    needsHuman: false,
  };
}

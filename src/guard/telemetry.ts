// What the guard tells the package's own instruments (metrics): each check it ran and each change
// of state, and a reading of every panel it serves. Observers are not event listeners, so adding
// metrics never silences a log line (an unheard 'error' is logged) or changes what users see.

import type { LicenseState } from '../serve/license-state.js';
import type { DomainPolicy } from '../serve/licensed-domains.js';
import type { GuardSnapshot } from '../serve/snapshot.js';
import type { LicenseStatus } from './license-status.js';
import type { ReadablePanel } from './panels/panel-readings.js';

/** One license check this instance ran, as it ended. */
export interface CheckRecord {
  panel: string;
  /** `ok` (active), `inactive`, or the failure's code (`TIMEOUT`, `AUTH_REJECTED`…). */
  result: string;
  durationMs: number;
}

export interface TransitionRecord {
  panel: string;
  state: LicenseState;
  previous: LicenseState;
}

/** One panel as a scrape reads it. */
export interface PanelReading {
  panel: string;
  status: LicenseStatus;
  /** Time left before the panel locks if no check succeeds (active or grace); 0 when locked or pending. */
  graceLeftMs: number;
  /** Time to the end of the active license's `expires_at` on the mother's clock (negative once passed); null without one. */
  expiresInMs: number | null;
}

/** Hung on the guard under TELEMETRY (a registered symbol, so another copy of the package finds it). */
export interface GuardInstruments {
  readonly telemetry: GuardTelemetry;
  /** True in `panels` mode: readings carry many panels, and metrics label them. */
  readonly multiPanel: boolean;
  /** Cluster mode: a shared store is configured. */
  readonly hasStore: boolean;
  /** Readings of at most `limit` panels (`panels` mode: the most telling first); one panel: its reading. */
  readings(limit: number): PanelReading[];
  /** `panels` mode: counts over every panel in memory (cheap), for the totals. */
  summary?(): PanelsSummary;
  /**
   * `panels` mode: every panel in memory, in the order they came, as a live iterator (panels gone
   * meanwhile are skipped, new ones come last): what the console reads a slice at a time.
   */
  panels?(): IterableIterator<ReadablePanel>;
  /**
   * One panel as its templates and its domain check see it now: one panel's, or, with `panels`,
   * the panel's at `host`.
   */
  view?(host?: string): PanelView | undefined;
}

export interface PanelView {
  /** What templates get now (branding and license locals). */
  snapshot: GuardSnapshot;
  /** The guard's `domains` policy for this panel (which hosts its verdict licenses, and what is done about others). */
  domains: DomainPolicy;
}

export interface PanelsSummary {
  byState: Record<LicenseState, number>;
  /** Panels whose last check failed, or whose shared store is failing. */
  failing: number;
}

export const TELEMETRY: unique symbol = Symbol.for('panel-license-guard.telemetry') as never;

type Observer<T> = (record: T) => void;

export class GuardTelemetry {
  private readonly checkObservers = new Set<Observer<CheckRecord>>();
  private readonly transitionObservers = new Set<Observer<TransitionRecord>>();

  onCheck(observer: Observer<CheckRecord>): () => void {
    this.checkObservers.add(observer);
    return () => this.checkObservers.delete(observer);
  }

  onTransition(observer: Observer<TransitionRecord>): () => void {
    this.transitionObservers.add(observer);
    return () => this.transitionObservers.delete(observer);
  }

  check(record: CheckRecord): void {
    deliver(this.checkObservers, record);
  }

  transition(record: TransitionRecord): void {
    deliver(this.transitionObservers, record);
  }
}

function deliver<T>(observers: Set<Observer<T>>, record: T): void {
  for (const observer of observers) {
    try {
      observer(record);
    } catch {
      // Our own instruments: a failure there must never touch a verdict.
    }
  }
}

/** What a check came to, as `CheckRecord.result` says it. */
export function checkResult(answer: { active: boolean } | undefined, failure: unknown): string {
  if (answer !== undefined) return answer.active ? 'ok' : 'inactive';
  const code = (failure as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' && /^[A-Z_]{1,40}$/.test(code) ? code : 'UNKNOWN';
}

/** Attaches the instruments to a guard without making them part of its enumerable surface. */
export function attachInstruments(target: object, instruments: GuardInstruments): void {
  Object.defineProperty(target, TELEMETRY, { value: instruments, enumerable: false });
}

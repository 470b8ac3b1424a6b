// How `panels` mode tells of its resolver's failures for new hosts (a throw, a timeout, unusable
// credentials) and of the new hosts it turned away as over the rate. Random `Host` headers can
// make these as often as requests come, so they are counted and told as one line per interval,
// never one per request with the attacker's host name in it. An app listening to 'error' still
// hears of the first few of each interval one by one (what a real misconfiguration looks like).
import { PanelHostError } from '../../errors.js';
import { type StructuredLogger, withPrefix } from '../../logger.js';

export type ResolverFailure = 'threw' | 'timedOut' | 'unusable';

/** How often counted failures are told, at most. */
export const REPORT_INTERVAL_MS = 10_000;
/** Failures given to 'error' listeners one by one per interval; the rest are counted. */
const EACH_PER_INTERVAL = 10;

interface Counts {
  threw: number;
  timedOut: number;
  unusable: number;
  busy: number;
}

const NONE: Counts = { threw: 0, timedOut: 0, unusable: 0, busy: 0 };

export interface ResolverReportsOptions {
  logger: StructuredLogger;
  /** Emits on the guard's 'error' listeners; false when it has none. */
  emit: (error: Error) => boolean;
  /** New hosts per second the gate lets through (named in the summary). */
  perSecond: number;
}

export class ResolverReports {
  #counts: Counts = { ...NONE };
  #told = 0;
  #timer: NodeJS.Timeout | undefined;
  #last: string | undefined;

  constructor(private readonly options: ResolverReportsOptions) {}

  /**
   * The resolver failed for a new host: given to 'error' listeners while the interval has room,
   * else counted. `detail` says what went wrong without the host (the summary names none).
   */
  failed(kind: ResolverFailure, error: Error, detail: string): void {
    if (this.#told < EACH_PER_INTERVAL && this.options.emit(error)) {
      this.#told++;
      this.#startInterval();
      return;
    }
    this.#counts[kind]++;
    this.#last = detail;
    this.#tellSoon();
  }

  /** A request for a new host was answered 503: over the rate, or too many first calls at once. */
  busy(): void {
    this.#counts.busy++;
    this.#tellSoon();
  }

  close(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** The first count of a quiet interval is told at once; later ones when the interval ends. */
  #tellSoon(): void {
    if (this.#timer === undefined) {
      this.#tell();
      this.#startInterval();
    }
  }

  #startInterval(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#told = 0;
      if (this.#tell()) this.#startInterval();
    }, REPORT_INTERVAL_MS);
    this.#timer.unref();
  }

  /** Tells what was counted (one line, or one 'error' event), and starts counting again. */
  #tell(): boolean {
    const { threw, timedOut, unusable, busy } = this.#counts;
    if (threw + timedOut + unusable + busy === 0) return false;
    const parts: string[] = [];
    if (threw > 0) parts.push(`threw ${threw}×`);
    if (timedOut > 0) parts.push(`timed out ${timedOut}×`);
    if (unusable > 0) parts.push(`returned unusable credentials ${unusable}×`);
    const failures = parts.length === 0 ? '' : `the panels resolver ${parts.join(', ')} for new hosts (answered 404)`;
    const refused =
      busy === 0
        ? ''
        : `${busy} request(s) for new hosts got 503 with Retry-After: over panels.resolvePerSecond (${this.options.perSecond}/s) or panels.resolveConcurrency`;
    const last = this.#last === undefined ? '' : ` The last: ${this.#last}`;
    const message = `${[failures, refused].filter(Boolean).join('; ')} (since the last report, at most one each ${REPORT_INTERVAL_MS / 1000} s).${last}`;
    this.#counts = { ...NONE };
    this.#last = undefined;
    const summary = new PanelHostError('RESOLVE_FAILED', withPrefix(message));
    if (!this.options.emit(summary)) this.options.logger.warn(summary.message, { event: 'resolve_failed', threw, timedOut, unusable, refused: busy });
    return true;
  }
}

// Reports values refused from the license store without letting a flood of junk flood the log.
import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';

const REPORT_EVERY_MS = 60_000;
/** Only this much of a value is hashed to recognise it again (values are capped at 64 KiB anyway). */
const HASHED_CHARS = 64 * 1024;

/**
 * The same value (read again every `syncIntervalMs`) is reported once; different values at most
 * once a minute, the next report saying how many were left out. Remembers a hash, not the value.
 */
export class RefusalReports {
  private lastDigest = '';
  private lastReport = Number.NEGATIVE_INFINITY;
  private suppressed = 0;

  constructor(private readonly report: (error: unknown) => void) {}

  refused(error: unknown, value: unknown): void {
    const digest = createHash('sha256').update(String(value).slice(0, HASHED_CHARS)).digest('hex');
    if (digest === this.lastDigest) return;
    this.lastDigest = digest;
    const at = performance.now();
    if (at - this.lastReport < REPORT_EVERY_MS) {
      this.suppressed++;
      return;
    }
    this.lastReport = at;
    if (this.suppressed > 0 && error instanceof Error)
      error.message += ` (${this.suppressed} more refused value${this.suppressed === 1 ? '' : 's'} since the last report)`;
    this.suppressed = 0;
    this.report(error);
  }
}

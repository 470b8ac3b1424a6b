// Start-up restore of the single-process `stateFile`: the last verified verdict, authenticated.
import { LocalStateError } from '../errors.js';
import { describeError } from '../logger.js';
import { CLOCK_TOLERANCE_MS } from './grace-clock.js';
import type { GuardConfig } from './guard-options.js';
import type { LicenseMonitor } from './license-monitor.js';
import { readStateFile, type StoredVerdict } from './state-file.js';

/**
 * Restores the last verified verdict from `stateFile`. An inactive one locks; an active one
 * resumes in grace for what is left of it, unless that has run out or the clock is behind the
 * latest time the file records (then the panel waits for a check). A bad file is reported,
 * never fatal, and never trusted.
 */
export async function restoreStateFile(monitor: LicenseMonitor, config: GuardConfig): Promise<void> {
  const { stateFile, stateMac } = config;
  if (!stateFile || !stateMac || monitor.isClosed) return;
  let stored: StoredVerdict | null;
  try {
    stored = await readStateFile(stateFile, config.panelKey, stateMac);
  } catch (error) {
    monitor.report(
      error instanceof LocalStateError
        ? error
        : new LocalStateError('STATE_FILE_REJECTED', `stateFile ${stateFile} could not be read (${describeError(error)}); the panel waits for a check.`),
    );
    return;
  }
  if (!stored || monitor.isClosed || monitor.entry.state !== 'pending') return;
  const { verdict, lastSuccessAt, savedAt } = stored;
  // What fired before the restart has fired: the next check warns of what is new only.
  monitor.warned = stored.warned ?? null;
  if (!verdict.active) {
    // Locking is always safe, whatever the clock says.
    monitor.move('verified-inactive', verdict, lastSuccessAt, verdict.reason ?? 'The license is inactive.');
    return;
  }
  const now = monitor.clock.now();
  const latest = Math.max(savedAt, lastSuccessAt);
  if (latest > now + CLOCK_TOLERANCE_MS) {
    monitor.report(
      new LocalStateError(
        'CLOCK_ROLLBACK',
        `The system clock (${new Date(now).toISOString()}) is behind the time stateFile ${stateFile} recorded (${new Date(latest).toISOString()}); the stored verdict was not resumed. Fix the clock; the next successful check unlocks.`,
      ),
    );
    return;
  }
  monitor.clock.seen(latest);
  monitor.clock.anchor(lastSuccessAt);
  if (monitor.remainingFor(verdict, lastSuccessAt) > 0) {
    monitor.move('restored-active', verdict, lastSuccessAt, null);
    monitor.checkGraceEnd();
  }
}

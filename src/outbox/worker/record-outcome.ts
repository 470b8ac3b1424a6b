// Recording what one push came to, and telling it: the outcome goes to the store (in a batch,
// settle-batcher.ts), then to the listeners as the store answered it (outcome-events.ts).
import type { OutboxEmitter } from '../events.js';
import type { ClaimedRow, DeliveryOutcome, SettleResult } from '../store.js';
import type { Attempt } from './delivery-attempt.js';
import { tellOutcome } from './outcome-events.js';

export interface OutcomeRecorder {
  /**
   * Resolves true when the row is due again at once, for a claim to find: its payload was replaced
   * in flight. A retry is announced by its timer (`wakeAt`); a row whose outcome was not recorded
   * keeps its lease; a stale one is another worker's.
   */
  record(row: ClaimedRow, answered: Attempt, durationMs: number): Promise<boolean>;
}

export function createOutcomeRecorder(options: {
  settle: (row: ClaimedRow, outcome: DeliveryOutcome, nowMs: number) => Promise<SettleResult>;
  events: OutboxEmitter;
  now: () => number;
  wakeAt: (atMs: number) => void;
  reportError: (error: unknown, row: ClaimedRow) => void;
}): OutcomeRecorder {
  const { settle, events, now, wakeAt, reportError } = options;
  return {
    async record(row, answered, durationMs) {
      const { outcome, error } = answered;
      // A row that is not this worker's to send is left alone: its lease runs out for its own worker.
      if ((error as { code?: unknown } | undefined)?.code === 'PANEL_MISMATCH') {
        reportError(error, row);
        return false;
      }
      let result: SettleResult;
      try {
        result = await settle(row, outcome, now());
      } catch (storeError) {
        // Not recorded: the lease runs out and the row is sent again (at-least-once).
        reportError(storeError, row);
        return false;
      }
      if (result === 'stale') return false;
      const told = tellOutcome(events, row, answered, result, durationMs, now);
      if (told.retryAt !== undefined) wakeAt(told.retryAt);
      return told.dueNow;
    },
  };
}

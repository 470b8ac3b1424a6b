// Putting rows claimed ahead back unsent: when the outbox stops, or when a row waited for a slot
// so long that its lease no longer leaves room for a push. The row is due again at once and no
// attempt is counted; until the store has it back, stop() waits.
import type { ClaimedRow, DeliveryOutcome, SettleResult } from '../store.js';

/** What a row claimed ahead but never sent says when it goes back. */
const HANDED_BACK = 'not sent: handed back unclaimed (the outbox stopped, or the row waited too long for a free slot); due again at once';

export function createHandBack(options: {
  settle: (row: ClaimedRow, outcome: DeliveryOutcome, nowMs: number) => Promise<SettleResult>;
  now: () => number;
  reportError: (error: unknown, row: ClaimedRow) => void;
  /** The row is back (or its lease will run out): no longer this worker's. */
  done: (row: ClaimedRow) => void;
}) {
  const { settle, now, reportError, done } = options;
  const going = new Set<Promise<void>>();
  return {
    /** Resolves once the store has it back (or failed to take it: its lease then runs out). */
    handBack(row: ClaimedRow): Promise<void> {
      const nowMs = now();
      const outcome: DeliveryOutcome = { kind: 'retry', nextAttemptAt: nowMs, error: HANDED_BACK, notSent: true };
      const back: Promise<void> = settle(row, outcome, nowMs)
        // Not recorded: the lease runs out and the row is claimed again.
        .then(
          () => undefined,
          (error: unknown) => reportError(error, row),
        )
        .finally(() => {
          going.delete(back);
          done(row);
        });
      going.add(back);
      return back;
    },
    /** Hand-backs under way (stop() waits for them). */
    pending: (): Promise<void>[] => [...going],
  };
}

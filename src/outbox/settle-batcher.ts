// Recording outcomes in batches (group commit): outcomes that arrive while a batch is being
// written wait for it and go together in the next one, so a busy worker writes one statement (and
// one commit) for many releases, and an idle one writes each outcome at once.
import type { ClaimedRow, DeliveryOutcome, OutboxStore, SettleRequest, SettleResult } from './store.js';

/** The most outcomes written in one statement: bounds the statement's size and one failure's reach. */
const MAX_BATCH = 64;

export type Settle = (claim: ClaimedRow, outcome: DeliveryOutcome, nowMs: number) => Promise<SettleResult>;

interface Waiting {
  request: SettleRequest;
  resolve: (result: SettleResult) => void;
  reject: (error: unknown) => void;
}

/**
 * `settle` as the worker calls it. A store without `settleMany` (a custom one) is called once per
 * outcome, as before. If a batch fails, each of its outcomes fails: those rows are sent again once
 * their leases run out (at-least-once), exactly as when one outcome could not be recorded.
 */
export function createSettleBatcher(store: OutboxStore, owner: string): Settle {
  if (!store.settleMany) return async (claim, outcome, nowMs) => store.settle(claim, owner, outcome, nowMs);
  const settleMany = store.settleMany.bind(store);
  let queue: Waiting[] = [];
  let writing = false;

  async function write(): Promise<void> {
    writing = true;
    try {
      while (queue.length > 0) {
        const batch = queue.slice(0, MAX_BATCH);
        queue = queue.slice(MAX_BATCH);
        try {
          const results = await settleMany(
            batch.map((waiting) => waiting.request),
            owner,
          );
          for (const [i, waiting] of batch.entries()) waiting.resolve(results[i] as SettleResult);
        } catch (error) {
          for (const waiting of batch) waiting.reject(error);
        }
      }
    } finally {
      writing = false;
    }
  }

  return (claim, outcome, nowMs) =>
    new Promise<SettleResult>((resolve, reject) => {
      // The first outcome of a quiet spell waits one turn of the event loop: the answers that
      // arrived in the same turn (one poll of the sockets) join it.
      if (queue.length === 0 && !writing) setImmediate(() => void write());
      queue.push({ request: { claim, outcome, nowMs }, resolve, reject });
    });
}

// Recording outcomes in batches (group commit): outcomes that arrive while a batch is being
// written wait for it and go together in the next one, so a busy worker writes one statement (and
// one commit) for many releases, and an idle one writes each outcome at once.
import { PartialSettleError } from '../../errors.js';
import type { ClaimedRow, DeliveryOutcome, OutboxStore, SettleRequest, SettleResult } from '../store.js';

/** The most outcomes written in one statement: bounds the statement's size and one failure's reach. */
const MAX_BATCH = 64;
/**
 * Batches written at once. More than one, so that a batch waiting on a row lock (a caller's
 * transaction replacing that row's payload) never holds up the outcomes behind it.
 */
const MAX_WRITES = 4;

/**
 * The longest an outcome waits for others to share its commit (see `holdWhile`): short against
 * any lease, a few pushes' worth on a quick mother.
 */
const MAX_HOLD_MS = 10;

export type Settle = (claim: ClaimedRow, outcome: DeliveryOutcome, nowMs: number) => Promise<SettleResult>;

export interface SettleBatching {
  /**
   * While true, outcomes wait (at most MAX_HOLD_MS) for more to join their batch: the worker says
   * so while another push is under way whose answer may come before any slot needs them written.
   * At low concurrency each push answers in its own turn of the event loop, so without waiting
   * every outcome would be a commit of its own. `inline`: the store wrote the last batch before
   * answering (SQLite's settleMany returns its results, not a promise), so no push can answer
   * while a batch is being written. @default () => false
   */
  holdWhile?: (waiting: number, inline: boolean) => boolean;
}

interface Waiting {
  request: SettleRequest;
  resolve: (result: SettleResult) => void;
  reject: (error: unknown) => void;
}

/**
 * `settle` as the worker calls it. A store without `settleMany` (a custom one) is called once per
 * outcome, as before. The outcomes of a batch that were not recorded are tried again one at a
 * time; an outcome that still fails is not recorded, and its row is sent again once its lease
 * runs out (at-least-once).
 */
export function createSettleBatcher(store: OutboxStore, owner: string, { holdWhile = () => false }: SettleBatching = {}): Settle {
  if (!store.settleMany) return async (claim, outcome, nowMs) => store.settle(claim, owner, outcome, nowMs);
  const settleMany = store.settleMany.bind(store);
  let queue: Waiting[] = [];
  let writes = 0;
  let scheduled = false;
  let inline = false;

  /**
   * One batch; the outcomes it did not record (all of them when it failed as a whole, those a
   * PartialSettleError leaves undefined) are tried again each on its own (one bad row fails alone).
   */
  async function write(batch: Waiting[]): Promise<void> {
    let results: readonly (SettleResult | undefined)[] = [];
    try {
      const answer = settleMany(
        batch.map((waiting) => waiting.request),
        owner,
      );
      inline = typeof (answer as { then?: unknown }).then !== 'function';
      results = await answer;
      if (results.length !== batch.length) {
        const count = results.length;
        results = [];
        throw new Error(`settleMany() answered ${count} results for ${batch.length} outcomes`);
      }
    } catch (error) {
      if (error instanceof PartialSettleError && error.results.length === batch.length) results = error.results;
    }
    await Promise.all(
      batch.map(({ request: { claim, outcome, nowMs }, resolve, reject }, i) => {
        const recorded = results[i];
        if (recorded !== undefined) return resolve(recorded);
        return Promise.resolve()
          .then(() => store.settle(claim, owner, outcome, nowMs))
          .then(resolve, reject);
      }),
    );
  }

  let holdTimer: NodeJS.Timeout | undefined;
  function flushHeld(): void {
    holdTimer = undefined;
    writeQueued();
  }
  function flush(): void {
    scheduled = false;
    if (queue.length > 0 && queue.length < MAX_BATCH && holdWhile(queue.length, inline)) {
      holdTimer ??= setTimeout(flushHeld, MAX_HOLD_MS);
      return;
    }
    writeQueued();
  }
  function writeQueued(): void {
    clearTimeout(holdTimer);
    holdTimer = undefined;
    while (queue.length > 0 && writes < MAX_WRITES) {
      const batch = queue.slice(0, MAX_BATCH);
      queue = queue.slice(MAX_BATCH);
      writes++;
      void write(batch).finally(() => {
        writes--;
        flush();
      });
    }
  }

  return (claim, outcome, nowMs) =>
    new Promise<SettleResult>((resolve, reject) => {
      queue.push({ request: { claim, outcome, nowMs }, resolve, reject });
      // The outcomes that arrive in the same turn of the event loop (one poll of the sockets)
      // join one batch; while every write is busy, they wait and go together in the next.
      if (!scheduled && writes < MAX_WRITES) {
        scheduled = true;
        setImmediate(flush);
      }
    });
}

// Recording a batch of outcomes one by one, and saying which were recorded when some were not.
// A batch that fails part way (a connection lost after some outcomes committed) must not be
// recorded again whole: an outcome recorded twice reads as 'stale' the second time (so its
// `delivered` event was never emitted), and a payload replaced in flight got its history row twice.
import type { SettleRequest, SettleResult } from './store.js';

/**
 * Thrown by `settleMany()` when only some outcomes were recorded: `results[i]` is the result of
 * the i-th outcome, or undefined when it was not recorded (the first failure is the `cause`). The
 * worker records the undefined ones again, one at a time, and no others. A custom store may throw
 * it too; any other error means nothing of the batch was recorded.
 */
export class PartialSettleError extends Error {
  readonly results: readonly (SettleResult | undefined)[];
  constructor(results: readonly (SettleResult | undefined)[], cause: unknown) {
    const missing = results.filter((result) => result === undefined).length;
    super(`panel-license-guard: ${missing} of ${results.length} outcomes could not be recorded`, { cause });
    this.name = 'PartialSettleError';
    this.results = results;
  }
}

/**
 * Settles each request (`known[i]`, when given, is a result already recorded for the i-th, in one
 * statement for several), waiting for all of them; the results in order, or a PartialSettleError
 * naming those recorded when any failed.
 */
export async function settleEach(
  settles: readonly SettleRequest[],
  settleOne: (request: SettleRequest) => Promise<SettleResult>,
  known: readonly (SettleResult | undefined)[] = [],
): Promise<SettleResult[]> {
  const outcomes = await Promise.allSettled(settles.map((request, i) => (known[i] !== undefined ? Promise.resolve(known[i]) : settleOne(request))));
  const failed = outcomes.find((outcome) => outcome.status === 'rejected');
  if (failed === undefined) return outcomes.map((outcome) => (outcome as PromiseFulfilledResult<SettleResult>).value);
  const results = outcomes.map((outcome) => (outcome.status === 'fulfilled' ? outcome.value : undefined));
  // Nothing recorded at all: the plain error, as a single failed statement would give.
  if (results.every((result) => result === undefined)) throw failed.reason;
  throw new PartialSettleError(results, failed.reason);
}

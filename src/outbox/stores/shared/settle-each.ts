// Recording a batch of outcomes one by one, and saying which were recorded when some were not.
// A batch that fails part way (a connection lost after some outcomes committed) must not be
// recorded again whole: an outcome recorded twice reads as 'stale' the second time (so its
// `delivered` event was never emitted), and a payload replaced in flight got its history row twice.
import { PartialSettleError } from '../../../errors.js';
import type { SettleRequest, SettleResult } from '../../store.js';

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

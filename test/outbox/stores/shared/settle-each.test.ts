import { describe, expect, it } from 'vitest';
import { PartialSettleError } from '../../../../src/errors.js';
import type { SettleRequest, SettleResult } from '../../../../src/outbox/store.js';
import { settleEach } from '../../../../src/outbox/stores/shared/settle-each.js';

// settleMany() on PostgreSQL and MySQL records some outcomes one at a time; when some of those
// fail, it must say which were recorded, so that the worker records again only the others.
const request = (id: number): SettleRequest => ({
  claim: { id, panel: 'p', remoteTrackId: `t-${id}`, body: '{}', contentHash: 'h', attempts: 0 },
  outcome: { kind: 'delivered', releaseId: id },
  nowMs: 0,
});

describe('settleEach', () => {
  it('answers every result in order when all are recorded, taking those already known as they are', async () => {
    const called: number[] = [];
    const settleOne = async ({ claim }: SettleRequest): Promise<SettleResult> => {
      called.push(claim.id);
      return 'applied';
    };
    await expect(settleEach([request(1), request(2), request(3)], settleOne, ['superseded', undefined, undefined])).resolves.toEqual([
      'superseded',
      'applied',
      'applied',
    ]);
    expect(called).toEqual([2, 3]);
  });

  it('names the outcomes recorded when some fail, after every one has finished', async () => {
    let finished = 0;
    const settleOne = async ({ claim }: SettleRequest): Promise<SettleResult> => {
      await new Promise((resolve) => setTimeout(resolve, claim.id));
      finished++;
      if (claim.id === 2) throw new Error('connection lost');
      return 'applied';
    };
    const error = await settleEach([request(1), request(2), request(30)], settleOne, []).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PartialSettleError);
    expect((error as PartialSettleError).results).toEqual(['applied', undefined, 'applied']);
    expect(((error as PartialSettleError).cause as Error).message).toBe('connection lost');
    // Not before the slowest had finished: the worker must not record it again while it runs.
    expect(finished).toBe(3);
  });

  it('rejects with the plain error when nothing was recorded', async () => {
    const settleOne = async (): Promise<SettleResult> => {
      throw new Error('database down');
    };
    await expect(settleEach([request(1), request(2)], settleOne)).rejects.toThrow('database down');
    await expect(settleEach([request(1), request(2)], settleOne)).rejects.not.toBeInstanceOf(PartialSettleError);
  });
});

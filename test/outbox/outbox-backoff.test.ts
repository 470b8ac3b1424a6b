import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { retryDelayMs } from '../../src/outbox/backoff.js';

const base = { baseDelayMs: 1000, maxDelayMs: 15 * 60_000 };
const fixed = (value: number) => () => value;

describe('retryDelayMs()', () => {
  describe('with full jitter', () => {
    it('draws the first delay from [0, baseDelayMs)', () => {
      expect(retryDelayMs({ ...base, attempt: 1, random: fixed(0) })).toBe(0);
      expect(retryDelayMs({ ...base, attempt: 1, random: fixed(0.5) })).toBe(500);
      expect(retryDelayMs({ ...base, attempt: 1, random: fixed(0.999_999) })).toBe(999);
    });

    it('doubles the window after every failure', () => {
      const ceilings = [1, 2, 3, 4, 5].map((attempt) => retryDelayMs({ ...base, attempt, random: fixed(0.999_999_9) }) + 1);
      expect(ceilings).toEqual([1000, 2000, 4000, 8000, 16000]);
    });

    it('caps the window at maxDelayMs, however many failures', () => {
      for (const attempt of [11, 20, 1100, Number.MAX_SAFE_INTEGER]) {
        expect(retryDelayMs({ ...base, attempt, random: fixed(0.999_999_9) })).toBeLessThanOrEqual(base.maxDelayMs);
      }
      expect(retryDelayMs({ ...base, attempt: 40, random: fixed(0.5) })).toBe(base.maxDelayMs / 2);
    });

    it('stays within [0, min(cap, base·2^(n-1))] for any draw', () => {
      fc.assert(
        fc.property(fc.integer({ min: 1, max: 2000 }), fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true }), (attempt, draw) => {
          const delay = retryDelayMs({ ...base, attempt, random: fixed(draw) });
          const ceiling = Math.min(base.maxDelayMs, base.baseDelayMs * 2 ** (attempt - 1));
          return Number.isInteger(delay) && delay >= 0 && delay <= ceiling;
        }),
      );
    });
  });

  describe('with Retry-After', () => {
    it('never comes back sooner than the mother asked', () => {
      expect(retryDelayMs({ ...base, attempt: 1, random: fixed(0), retryAfterMs: 7000 })).toBe(7000);
      expect(retryDelayMs({ ...base, attempt: 1, random: fixed(0.5), retryAfterMs: 100 })).toBe(500);
    });

    it('cuts an absurd Retry-After to maxDelayMs', () => {
      expect(retryDelayMs({ ...base, attempt: 1, random: fixed(0), retryAfterMs: 86_400_000 })).toBe(base.maxDelayMs);
    });

    it('ignores a zero, negative or non-finite Retry-After', () => {
      for (const retryAfterMs of [0, -5, Number.NaN, Number.POSITIVE_INFINITY]) {
        expect(retryDelayMs({ ...base, attempt: 1, random: fixed(0.25), retryAfterMs })).toBe(250);
      }
    });
  });
});

// The checks that settle disputed records (dispute-checks.ts): at once, then at most one a minute,
// a dispute within the minute deferred to its end rather than dropped, nothing after close().
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DisputeChecks } from '../../../src/guard/cluster/dispute-checks.js';

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('DisputeChecks', () => {
  it('checks at once, then defers a dispute within the minute to its end instead of dropping it', () => {
    const checkNow = vi.fn();
    const disputes = new DisputeChecks(checkNow);
    disputes.ask();
    expect(checkNow).toHaveBeenCalledTimes(1);
    // A replay spends the minute; a genuine dispute 5 s later is checked when the minute is up.
    vi.advanceTimersByTime(5_000);
    disputes.ask();
    disputes.ask();
    expect(checkNow).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(54_999);
    expect(checkNow).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(1);
    expect(checkNow).toHaveBeenCalledTimes(2);
    // A minute after that one, a new dispute is checked at once again.
    vi.advanceTimersByTime(60_000);
    disputes.ask();
    expect(checkNow).toHaveBeenCalledTimes(3);
  });

  it('makes no deferred check after close()', () => {
    const checkNow = vi.fn();
    const disputes = new DisputeChecks(checkNow);
    disputes.ask();
    disputes.ask();
    disputes.close();
    vi.advanceTimersByTime(120_000);
    disputes.ask();
    expect(checkNow).toHaveBeenCalledTimes(1);
  });
});

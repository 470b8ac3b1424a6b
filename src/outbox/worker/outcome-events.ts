// What a recorded attempt tells the outbox's listeners: 'delivered', 'dead' or 'retrying', and
// 'error' when a human is needed (rejected credentials), and what it means for the worker's timer.

import type { OutboxEmitter } from '../events.js';
import type { ClaimedRow, SettleResult } from '../store.js';
import type { Attempt } from './delivery-attempt.js';

/** `dueNow`: the row is due again at once (a payload replaced in flight); `retryAt`: when a retry is due. */
export interface Told {
  dueNow: boolean;
  retryAt: number | undefined;
}

/**
 * Emits what `answered` (the attempt at `row`, recorded as `result`, never `stale`) means. Called
 * once per recorded attempt, so each event is emitted once: a record found already made by this
 * worker (its first answer lost) is `applied` too (rules.ts).
 */
export function tellOutcome(events: OutboxEmitter, row: ClaimedRow, answered: Attempt, result: SettleResult, durationMs: number, now: () => number): Told {
  const { outcome, error, delayMs, needsHuman } = answered;
  const { id, panel, remoteTrackId } = row;
  const attempts = outcome.kind === 'retry' && outcome.notSent === true ? row.attempts : row.attempts + 1;
  if (outcome.kind === 'delivered') {
    const unconfirmed = outcome.note;
    const superseded = result === 'superseded';
    events.emit('delivered', { id, panel, remoteTrackId, releaseId: outcome.releaseId, attempts, durationMs, superseded, unconfirmed });
    return { dueNow: superseded, retryAt: undefined };
  }
  const failure = error ?? new Error(outcome.error);
  if (needsHuman) events.emit('error', { error: failure, id, panel, remoteTrackId });
  if (outcome.kind === 'dead' && result === 'applied') {
    events.emit('dead', { id, panel, remoteTrackId, attempts, error: failure, message: outcome.error, durationMs });
    return { dueNow: false, retryAt: undefined };
  }
  // A retry, or a refused payload whose replacement is now due: either way the row goes round again.
  const nextAttemptAt = outcome.kind === 'retry' ? outcome.nextAttemptAt : now();
  const retryDelay = outcome.kind === 'retry' ? delayMs : 0;
  events.emit('retrying', { id, panel, remoteTrackId, attempts, delayMs: retryDelay, nextAttemptAt, error: failure, durationMs });
  return { dueNow: false, retryAt: nextAttemptAt };
}

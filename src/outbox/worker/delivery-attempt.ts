// One attempt at a claimed row: find its sender, ask the back-off whether it may go, push it, and
// say what its outcome means for the row (delivered, retry when, dead) and for its panel's holds.

import type { StatusObserving } from '../../client/mother-client.js';
import { tracedPush } from '../../tracing/outbox-spans.js';
import { motherName } from '../../tracing/span-attributes.js';
import { retryDelayMs } from '../backoff.js';
import type { Pauses } from '../operations/pauses.js';
import type { ResolvedOutboxConfig } from '../options.js';
import type { PanelHolds } from '../panels/panel-holds.js';
import type { PanelRouting } from '../panels/panel-routing.js';
import type { ReleaseSender } from '../release-sender.js';
import type { ClaimedRow, DeliveryOutcome } from '../store.js';
import { asError, classifyFailure, type FailureAction } from './failure.js';
import { type MotherRate, notSentForRate } from './mother-rate.js';

export interface Attempt {
  outcome: DeliveryOutcome;
  error: Error | undefined;
  delayMs: number;
  /** Credentials rejected (401) or missing for the panel: reported through 'error' too. */
  needsHuman: boolean;
}

/** Whether an attempt's row was sent, to which mother, and whether it was admitted as a probe. */
export interface SentTo {
  sent: boolean;
  mother: string | undefined;
  probe: boolean;
  /** How long it waited for its mother's turn (`maxPerSecond`): not part of the push's duration. */
  waitedMs?: number;
}

/** The base URL of the mother a sender sends to (a client of your own may not say). */
const motherOf = (sender: unknown): string | undefined => {
  const baseUrl = (sender as { baseUrl?: unknown }).baseUrl;
  return typeof baseUrl === 'string' ? baseUrl : undefined;
};

/** A MotherClient tells the span the HTTP status through its options; another sender ignores them. */
type StatusReporting = { pushSerializedRelease(body: string, options: StatusObserving): ReturnType<ReleaseSender['pushSerializedRelease']> };

type AttemptConfig = Pick<ResolvedOutboxConfig, 'baseDelayMs' | 'maxDelayMs' | 'authRetryDelayMs' | 'random' | 'now' | 'unresolvedRetryMs' | 'tracing'> & {
  /** With `maxPerSecond`: the turns at each mother. */
  rate?: MotherRate | undefined;
  /** What operators paused: a row that waited for its turn meanwhile goes back unsent. */
  pauses?: Pick<Pauses, 'isPaused'>;
};

/** `attempt(row, sentTo)`: `sentTo` learns the mother the row went to, and whether it went as a probe. */
export function createAttempts(config: AttemptConfig, routing: PanelRouting, holds: PanelHolds) {
  const { now, tracing } = config;

  function afterFailure(row: ClaimedRow, action: Exclude<FailureAction, { action: 'accepted' }>, error: Error, mother: string | undefined): Attempt {
    const nowMs = now();
    const reason = error.message;
    const attempts = row.attempts + 1;
    if (action.action === 'dead') {
      holds.answered(row.panel, mother); // the mother answered, so it is up
      return { outcome: { kind: 'dead', error: reason }, error, delayMs: 0, needsHuman: false };
    }
    if (action.action === 'auth') {
      // Every row of this panel would get the same 401: hold the panel, not just this row. The
      // mother answered, so it is up.
      const delayMs = config.authRetryDelayMs;
      holds.holdFor(row.panel, delayMs);
      if (mother !== undefined) holds.motherAnswered(mother);
      return { outcome: { kind: 'retry', nextAttemptAt: nowMs + delayMs, error: reason }, error, delayMs, needsHuman: true };
    }
    const backoff = { baseDelayMs: config.baseDelayMs, maxDelayMs: config.maxDelayMs, random: config.random, retryAfterMs: action.retryAfterMs };
    const delayMs = retryDelayMs({ ...backoff, attempt: attempts });
    // The mother is most likely failing for every row: back off the panel as a whole, so a large
    // backlog probes a dead mother a few times instead of once per row. An outage, a timeout or a
    // 5xx counts against the mother too (held once two panels fail there); a 429 answers for
    // this panel's key only, and the mother is up.
    const status = (error as { status?: unknown }).status;
    if (status === 429) {
      holds.failed(row.panel, row.id, action.retryAfterMs);
      if (mother !== undefined) holds.motherAnswered(mother);
    } else holds.failed(row.panel, row.id, action.retryAfterMs, mother);
    return { outcome: { kind: 'retry', nextAttemptAt: nowMs + delayMs, error: reason }, error, delayMs, needsHuman: false };
  }

  /**
   * The row's mother is held after failures, or as many probes as may be are in flight: the row
   * is put back unsent (no attempt counted) until then.
   */
  function deferred(row: ClaimedRow, mother: string | undefined, until: number, wasProbe: boolean): Attempt {
    holds.deferred(row.panel, until, mother, wasProbe);
    const reason =
      mother === undefined || !holds.motherHeld(mother)
        ? 'not sent: its panel is failing and other probes are in flight; tried again shortly'
        : `not sent: the mother at ${mother} is failing (releases of several panels failed there); sent when it answers again`;
    const outcome: DeliveryOutcome = { kind: 'retry', nextAttemptAt: until, error: reason, notSent: true };
    return { outcome, error: new Error(reason), delayMs: Math.max(0, until - now()), needsHuman: false };
  }

  /** No credentials for the row's panel (unknown to the resolver, or not this worker's): nothing is sent. */
  function unsendable(row: ClaimedRow, error: Error): Attempt {
    const delayMs = config.unresolvedRetryMs;
    holds.holdFor(row.panel, delayMs);
    // Nothing was sent: not an attempt.
    return { outcome: { kind: 'retry', nextAttemptAt: now() + delayMs, error: error.message, notSent: true }, error, delayMs, needsHuman: true };
  }

  /** `sentTo` learns the mother the row went to, and whether it went as a probe (which ends with the attempt). */
  async function attempt(row: ClaimedRow, sentTo: SentTo): Promise<Attempt> {
    let releaseId: unknown;
    let mother: string | undefined;
    try {
      const sender = await routing.senderFor(row.panel);
      mother = motherOf(sender);
      // Its mother's turn first (waited in this slot, not an attempt); then the back-off, as it stands by then.
      if (config.rate !== undefined && !(await config.rate.turn(row.panel, mother, sentTo))) return notSentForRate(now());
      // Paused while it waited for its turn: back unsent (claims skip the panel until resumed).
      if (config.rate !== undefined && config.pauses?.isPaused(row.panel))
        return notSentForRate(now(), 'not sent: delivery was paused while it waited for its turn');
      const admission = holds.admit(row.panel, row.id, mother);
      if (!admission.send) return deferred(row, mother, admission.until, admission.wasProbe);
      sentTo.sent = true;
      sentTo.mother = mother;
      sentTo.probe = admission.probe;
      try {
        const answer =
          tracing === undefined
            ? await sender.pushSerializedRelease(row.body)
            : await tracedPush(tracing, row, motherName(sender), (options) => (sender as StatusReporting).pushSerializedRelease(row.body, options));
        releaseId = (answer as { release_id?: unknown } | undefined)?.release_id;
      } catch (error) {
        const action = classifyFailure(error);
        if (action.action !== 'accepted') return afterFailure(row, action, asError(error), mother);
        return accepted(row, undefined, `the mother accepted it, but its answer was unusable: ${asError(error).message.replace(/\.$/, '')}`, mother);
      }
    } catch (error) {
      return unsendable(row, asError(error));
    }
    // A custom client resolved, so the mother answered 2xx: accepted, whatever the id looks like.
    if (typeof releaseId === 'number' && Number.isInteger(releaseId)) return accepted(row, releaseId, undefined, mother);
    return accepted(row, undefined, 'the client resolved without an integer release_id', mother);
  }

  /** The mother took the release: recorded as delivered, never resent (with a note when unconfirmed). */
  function accepted(row: ClaimedRow, releaseId: number | undefined, note: string | undefined, mother: string | undefined): Attempt {
    holds.answered(row.panel, mother);
    const outcome: DeliveryOutcome = note === undefined ? { kind: 'delivered', releaseId } : { kind: 'delivered', releaseId, note };
    return { outcome, error: undefined, delayMs: 0, needsHuman: false };
  }

  return attempt;
}

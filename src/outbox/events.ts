// Typed events of the release outbox. Unlike EventEmitter, an unheard 'error' is logged, never thrown.

/** A release reached the mother. */
export interface DeliveredEvent {
  id: number;
  remoteTrackId: string | undefined;
  /**
   * The mother's `release_id`; undefined when it answered 2xx with a body that could not be read
   * (see `unconfirmed`).
   */
  releaseId: number | undefined;
  /**
   * Set when the mother answered 2xx but the body was not a valid `{ ok, release_id }` (or could
   * not be read in full): a 2xx means the mother accepted the push, so the release is recorded
   * as delivered without a `release_id` and never sent again automatically. Says why.
   */
  unconfirmed: string | undefined;
  /** Attempts it took, this one included. */
  attempts: number;
  /**
   * True when the delivered payload had been replaced while it was in flight: the mother got the
   * older payload, and the newer one stays pending under the same `id` (sent next).
   */
  superseded: boolean;
}

/** An attempt failed and the release will be tried again. */
export interface RetryingEvent {
  id: number;
  remoteTrackId: string | undefined;
  /** Failed attempts so far. */
  attempts: number;
  /** Milliseconds until the next attempt. */
  delayMs: number;
  /** Epoch milliseconds of the next attempt. */
  nextAttemptAt: number;
  error: Error;
}

/** The mother refused a release for good (422, 405, 400, redirect…); it stays stored as `dead`. */
export interface DeadEvent {
  id: number;
  remoteTrackId: string | undefined;
  attempts: number;
  error: Error;
  /** The reason as stored in `lastError`, e.g. the mother's 422 message. */
  message: string;
}

/** Something needs a human: the mother rejected our credentials (401), or the store failed. */
export interface OutboxErrorEvent {
  error: Error;
  /** The row concerned, if any. */
  id: number | undefined;
  remoteTrackId: string | undefined;
}

/** A retention pass deleted old delivered or dead rows. */
export interface PrunedEvent {
  deleted: number;
  /** How long the pass took, in milliseconds (it runs in small batches, between other work). */
  durationMs: number;
}

export interface OutboxEvents {
  delivered: DeliveredEvent;
  retrying: RetryingEvent;
  dead: DeadEvent;
  error: OutboxErrorEvent;
  pruned: PrunedEvent;
}

export type OutboxEventName = keyof OutboxEvents;
export type OutboxListener<E extends OutboxEventName> = (event: OutboxEvents[E]) => void;

/** Where the outbox reports what it cannot hand to a listener. `console` fits. */
export interface OutboxLogger {
  warn(message: string, ...details: unknown[]): void;
  error(message: string, ...details: unknown[]): void;
}

export interface OutboxEmitter {
  on<E extends OutboxEventName>(event: E, listener: OutboxListener<E>): void;
  off<E extends OutboxEventName>(event: E, listener: OutboxListener<E>): void;
  emit<E extends OutboxEventName>(event: E, payload: OutboxEvents[E]): void;
}

const PREFIX = 'panel-license-guard: release outbox:';

export function createOutboxEmitter(logger: OutboxLogger): OutboxEmitter {
  const listeners = new Map<OutboxEventName, Set<(payload: never) => void>>();
  return {
    on(event, listener) {
      const set = listeners.get(event) ?? new Set();
      set.add(listener as (payload: never) => void);
      listeners.set(event, set);
    },
    off(event, listener) {
      listeners.get(event)?.delete(listener as (payload: never) => void);
    },
    emit(event, payload) {
      const set = listeners.get(event);
      if (!set || set.size === 0) {
        // A dead release or a rejected key must not go unnoticed just because nobody subscribed.
        if (event === 'error') logger.error(`${PREFIX} ${(payload as OutboxErrorEvent).error.message}`);
        if (event === 'dead') logger.warn(`${PREFIX} release #${(payload as DeadEvent).id} is dead: ${(payload as DeadEvent).message}`);
        const { unconfirmed, id } = payload as Partial<DeliveredEvent>;
        if (event === 'delivered' && unconfirmed) logger.warn(`${PREFIX} release #${id} recorded as delivered without a release_id: ${unconfirmed}`);
        return;
      }
      for (const listener of [...set]) {
        try {
          (listener as (payload: OutboxEvents[typeof event]) => void)(payload);
        } catch (error) {
          // A throwing listener must not break delivery bookkeeping.
          logger.error(`${PREFIX} a '${event}' listener threw`, error);
        }
      }
    },
  };
}

// Typed events of the release outbox. Unlike EventEmitter, an unheard 'error' is logged, never thrown.
import { describeError, type Logger, type StructuredLogger } from '../logger.js';

/** A release reached the mother. */
export interface DeliveredEvent {
  id: number;
  /** The panel the release was stored for (`client.panelId`, or your id with `panels`). */
  panel: string;
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
  /** How long this attempt's push took, in milliseconds. */
  durationMs: number;
  /**
   * True when the delivered payload had been replaced while it was in flight: the mother got the
   * older payload, and the newer one stays pending under the same `id` (sent next).
   */
  superseded: boolean;
}

/** An attempt failed and the release will be tried again. */
export interface RetryingEvent {
  id: number;
  /** The panel the release was stored for (`client.panelId`, or your id with `panels`). */
  panel: string;
  remoteTrackId: string | undefined;
  /** Failed attempts so far. */
  attempts: number;
  /** Milliseconds until the next attempt. */
  delayMs: number;
  /** Epoch milliseconds of the next attempt. */
  nextAttemptAt: number;
  error: Error;
  /** How long this attempt's push took, in milliseconds. */
  durationMs: number;
}

/** The mother refused a release for good (422, 405, 400, redirect…); it stays stored as `dead`. */
export interface DeadEvent {
  id: number;
  /** The panel the release was stored for (`client.panelId`, or your id with `panels`). */
  panel: string;
  remoteTrackId: string | undefined;
  attempts: number;
  error: Error;
  /** The reason as stored in `lastError`, e.g. the mother's 422 message. */
  message: string;
  /** How long this attempt's push took, in milliseconds. */
  durationMs: number;
}

/** Something needs a human: the mother rejected our credentials (401), or the store failed. */
export interface OutboxErrorEvent {
  error: Error;
  /** The row concerned, if any. */
  id: number | undefined;
  /** The panel concerned, if any. */
  panel?: string | undefined;
  remoteTrackId: string | undefined;
}

/** A retention pass deleted old delivered or dead rows. */
export interface PrunedEvent {
  deleted: number;
  /** How long the pass took, in milliseconds (it runs in small batches, between other work). */
  durationMs: number;
}

/** An operator (or your code) cancelled a pending release in this process: it is never sent. */
export interface CancelledEvent {
  id: number;
  panel: string;
  remoteTrackId: string | undefined;
  /** Why, as given to `cancel` (kept as the row's `lastError`). */
  reason: string;
}

/** Delivery was paused or resumed from this process (`panel` undefined: the whole outbox). */
export interface PauseEvent {
  panel: string | undefined;
}

export interface OutboxEvents {
  delivered: DeliveredEvent;
  retrying: RetryingEvent;
  dead: DeadEvent;
  error: OutboxErrorEvent;
  pruned: PrunedEvent;
  cancelled: CancelledEvent;
  paused: PauseEvent;
  resumed: PauseEvent;
}

export type OutboxEventName = keyof OutboxEvents;
export type OutboxListener<E extends OutboxEventName> = (event: OutboxEvents[E]) => void;

/** Where the outbox reports what it cannot hand to a listener. `console` fits. */
export type OutboxLogger = Logger;

export interface OutboxEmitter {
  on<E extends OutboxEventName>(event: E, listener: OutboxListener<E>): void;
  off<E extends OutboxEventName>(event: E, listener: OutboxListener<E>): void;
  emit<E extends OutboxEventName>(event: E, payload: OutboxEvents[E]): void;
  /**
   * For the package's own instruments (metrics): sees every event before the listeners, and
   * is not a listener, so an unheard 'dead' or 'error' is still logged. Returns the way to stop.
   */
  observe(observer: OutboxObserver): () => void;
}

/** Where an outbox keeps `{ observe }` for the package's own instruments (a registered symbol). */
/** What the metrics module reads from an outbox (behind OUTBOX_TELEMETRY). */
export interface OutboxTelemetry {
  observe: (observer: OutboxObserver) => () => void;
  /** The outbox serves many panels (`panels`): per-panel series carry information. */
  manyPanels: boolean;
  /** Up to `limit` of the panels this instance holds back after failures. */
  failingPanels: (limit: number) => string[];
}

export const OUTBOX_TELEMETRY: unique symbol = Symbol.for('panel-license-guard.outbox-telemetry') as never;

export type OutboxObserver = <E extends OutboxEventName>(event: E, payload: OutboxEvents[E]) => void;

const PREFIX = 'panel-license-guard: release outbox:';

export function createOutboxEmitter(logger: StructuredLogger): OutboxEmitter {
  const listeners = new Map<OutboxEventName, Set<(payload: never) => void>>();
  const observers = new Set<OutboxObserver>();
  return {
    observe(observer) {
      observers.add(observer);
      return () => observers.delete(observer);
    },
    on(event, listener) {
      const set = listeners.get(event) ?? new Set();
      set.add(listener as (payload: never) => void);
      listeners.set(event, set);
    },
    off(event, listener) {
      listeners.get(event)?.delete(listener as (payload: never) => void);
    },
    emit(event, payload) {
      for (const observer of observers) {
        try {
          observer(event, payload);
        } catch {
          // Our own instruments: a failure there must never touch delivery.
        }
      }
      const set = listeners.get(event);
      if (!set || set.size === 0) {
        logUnheard(logger, event, payload);
        return;
      }
      for (const listener of [...set]) {
        try {
          (listener as (payload: OutboxEvents[typeof event]) => void)(payload);
        } catch (error) {
          // A throwing listener must not break delivery bookkeeping.
          logger.error(`${PREFIX} a '${event}' listener threw: ${describeError(error)}`, { event: 'listener_threw', listener: event });
        }
      }
    },
  };
}

/** A dead release or a rejected key must not go unnoticed just because nobody subscribed. */
function logUnheard<E extends OutboxEventName>(logger: StructuredLogger, event: E, payload: OutboxEvents[E]): void {
  if (event === 'error') {
    const { error, id, panel } = payload as OutboxErrorEvent;
    const code = (error as { code?: unknown }).code;
    logger.error(`${PREFIX} ${error.message}`, { event: 'outbox_error', code: typeof code === 'string' ? code : undefined, release: id, panel });
  } else if (event === 'dead') {
    const { id, panel, attempts, message, error } = payload as DeadEvent;
    const code = (error as { code?: unknown }).code;
    logger.warn(`${PREFIX} release #${id} is dead after ${attempts} attempt${attempts === 1 ? '' : 's'}; the mother said: ${message}`, {
      event: 'release_dead',
      code: typeof code === 'string' ? code : undefined,
      release: id,
      attempt: attempts,
      panel,
    });
  } else if (event === 'delivered') {
    const { unconfirmed, id, attempts } = payload as DeliveredEvent;
    if (unconfirmed)
      logger.warn(`${PREFIX} release #${id} is recorded as delivered without a release_id (${unconfirmed})`, {
        event: 'release_unconfirmed',
        release: id,
        attempt: attempts,
      });
  }
}

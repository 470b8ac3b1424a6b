// What a LicenseMonitor tells: its entry and change events, and how they and its errors reach the
// host app's listeners (single-panel mode) or, in `panels` mode, the guard's through the panel's
// relay. Functions, not an object per monitor: a process may hold 100,000 panels' monitors.
import type { EventEmitter } from 'node:events';
import type { LicenseResponse } from '../client/license-response.js';
import { errorCodeOf } from '../errors.js';
import { describeError, type LogFields, withPrefix } from '../logger.js';
import type { LicenseState } from '../serve/license-state.js';
import type { GuardSnapshot } from '../serve/snapshot.js';
import type { ExpiringEvent } from './expiry-warnings.js';
import type { GuardConfig } from './guard-options.js';

/** One cache entry per panel: the last verified verdict, when it came, and the derived view. */
export interface VerdictEntry {
  readonly state: LicenseState;
  readonly verdict: LicenseResponse | undefined;
  /** Local time (ms) the verdict was received. */
  readonly lastSuccessAt: number | null;
  /** The mother's `server_time` in that verdict. */
  readonly serverTime: number | null;
  readonly reason: string | null;
  readonly snapshot: GuardSnapshot;
}

/** The events a monitor tells its listeners (besides 'error'). */
export type MonitorEvent = 'change' | 'lock' | 'unlock' | 'expiring';

export interface ChangeEvent {
  state: LicenseState;
  previous: LicenseState;
  reason: string | null;
  /** `panels` mode: the panel's id (a hash of base URL and key, never the key). */
  panel?: string;
  /** `panels` mode: the hosts this instance knows for the panel (up to 100). */
  hosts?: string[];
}

/** `panels` mode: where a panel's monitor sends its events and errors (the guard's listeners, with the panel id). */
export interface MonitorRelay {
  /** A new entry: what requests get may have changed. */
  moved(): void;
  event(name: MonitorEvent, payload: ChangeEvent | ExpiringEvent): void;
  /** Returns false when nobody listens there: the monitor logs the error instead. */
  error(error: unknown): boolean;
}

export type Listener = (payload: unknown) => void;

/**
 * Calls each listener on its own: one that throws (whatever it throws) is logged, never turns a
 * verified verdict into a failed check, and does not keep the next listener from running.
 */
export function emitSafely(
  emitter: EventEmitter | undefined,
  relay: MonitorRelay | undefined,
  config: Pick<GuardConfig, 'logger' | 'panelKey'>,
  event: MonitorEvent | 'error',
  payload: unknown,
): void {
  const listeners = (emitter?.rawListeners(event) ?? []) as Listener[];
  if (relay !== undefined && event !== 'error') listeners.push((payload) => relay.event(event, payload as ChangeEvent | ExpiringEvent));
  for (const listener of listeners) {
    try {
      listener.call(emitter, payload);
    } catch (error) {
      config.logger.error(`panel-license-guard: a '${event}' listener threw: ${describeError(error)}`, {
        event: 'listener_threw',
        listener: event,
        panel: config.panelKey || undefined,
      });
    }
  }
}

/**
 * An error to 'error' listeners when there are any — in `panels` mode the guard's own first, with
 * the panel id — else to the logger with structured fields (`event` defaults to the error's code
 * in snake case).
 */
export function reportError(
  emitter: EventEmitter | undefined,
  relay: MonitorRelay | undefined,
  config: Pick<GuardConfig, 'logger' | 'panelKey'>,
  state: LicenseState,
  error: Error,
  fields: Partial<LogFields>,
): void {
  if (relay?.error(error)) return;
  if ((emitter?.listenerCount('error') ?? 0) > 0) {
    emitSafely(emitter, relay, config, 'error', error);
    return;
  }
  const code = errorCodeOf(error);
  config.logger.warn(withPrefix(describeError(error)), {
    event: code === 'UNKNOWN' ? 'error' : code.toLowerCase(),
    code: code === 'UNKNOWN' ? undefined : code,
    state,
    panel: config.panelKey || undefined,
    ...fields,
  });
}

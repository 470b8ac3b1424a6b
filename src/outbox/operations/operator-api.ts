// The outbox methods operators use: cancel a release (or a track's), pause and resume delivery,
// and read the feed of deliveries in the order they were recorded.

import { shown } from '../../options.js';
import { isWellFormedText } from '../../text.js';
import type { OutboxEmitter } from '../events.js';
import type { PanelScoping } from '../panels/panel-scope.js';
import type { CancelAnswer, OutboxStore } from '../store.js';
import type { DeliveryWorker } from '../worker/worker-contract.js';
import { type DeliveryFeed, feedReader } from './delivery-feed.js';
import type { PausedNow, Pauses } from './pauses.js';

/**
 * What `cancel` / `cancelTrack` came to. `cancelled`: never sent. `delivered`: too late, the
 * mother has it (`releaseId`): withdraw it there. `dead` / `already-cancelled`: it was not going
 * out anyway. `in-flight`: with `{ wait: false }`, a worker is sending it right now; nothing
 * changed. `not-found`: no such release (of this panel).
 */
export interface CancelResult {
  outcome: 'cancelled' | 'delivered' | 'dead' | 'already-cancelled' | 'in-flight' | 'not-found';
  id: number | undefined;
  releaseId: number | undefined;
}

export interface CancelOptions {
  /** With `panels`: the panel the release (or track) is of. */
  panel?: string;
  /**
   * When a worker is sending the release right now, wait for that attempt to end (at most its
   * lease) and then cancel it if it did not reach the mother. `false`: answer `in-flight` at once.
   * @default true
   */
  wait?: boolean;
  /** Kept as the release's `lastError`. @default 'cancelled by an operator' */
  reason?: string;
}

/** How long a waiting cancel rests between looks at a release in flight. */
const IN_FLIGHT_LOOK_MS = [20, 50, 100, 250];
/** Beyond the lease's end: a lease ends on the store's clock, which may run a little behind ours. */
const LEASE_SLACK_MS = 2_000;

export interface OperatorDeps {
  store: OutboxStore;
  scoping: PanelScoping;
  events: OutboxEmitter;
  pauses: Pauses;
  now: () => number;
  /** This process's worker: kicked on resume; gives back a row it holds unsent (waiting for a slot). */
  worker: Pick<DeliveryWorker, 'kick' | 'takeBack' | 'handBack'>;
  assertOpen: (method: string) => void;
}

export function operatorApi(deps: OperatorDeps) {
  const { store, scoping, events, pauses, now } = deps;

  function needs<K extends 'cancel' | 'controls' | 'setControl' | 'deliveries'>(method: string, name: K): NonNullable<OutboxStore[K]> {
    const found = store[name];
    if (typeof found !== 'function') throw new TypeError(`panel-license-guard: ${method}() needs a store with ${name}() (every built-in store has it).`);
    return found.bind(store) as NonNullable<OutboxStore[K]>;
  }

  async function cancelWhere(
    method: string,
    target: { id?: number; track?: string; panel: string | undefined },
    options: CancelOptions,
  ): Promise<CancelResult> {
    deps.assertOpen(method);
    const cancel = needs(method, 'cancel');
    const reason = options.reason ?? 'cancelled by an operator';
    if (typeof reason !== 'string' || reason.length === 0 || reason.length > 500)
      throw new TypeError(`panel-license-guard: ${method}() \`reason\` must be a non-empty string of at most 500 characters, received ${shown(reason)}.`);
    let answer: CancelAnswer = await cancel({ ...target, nowMs: now(), note: reason });
    for (let look = 0; answer.result === 'in-flight' && options.wait !== false; look++) {
      // Held by this process's worker but not sent yet (claimed ahead): given back unsent, then cancelled.
      const held = answer.id === undefined ? undefined : deps.worker.takeBack(answer.id);
      if (held !== undefined) {
        await deps.worker.handBack(held);
        answer = await cancel({ ...target, nowMs: now(), note: reason });
        continue;
      }
      // The attempt under way ends with its outcome recorded, or its lease runs out.
      if (now() > (answer.leaseExpiresAt ?? 0) + LEASE_SLACK_MS) break;
      await new Promise((resolve) => setTimeout(resolve, IN_FLIGHT_LOOK_MS[Math.min(look, IN_FLIGHT_LOOK_MS.length - 1)]));
      answer = await cancel({ ...target, nowMs: now(), note: reason });
    }
    if (answer.result === 'cancelled' && answer.id !== undefined) {
      const [row] = await store.list({ state: undefined, limit: 1, id: answer.id });
      events.emit('cancelled', { id: answer.id, panel: row?.panel ?? target.panel ?? '', remoteTrackId: row?.remoteTrackId, reason });
    }
    return { outcome: outcomeOf(answer), id: answer.id, releaseId: answer.state === 'delivered' ? answer.releaseId : undefined };
  }

  async function setPause(method: string, panel: unknown, paused: boolean): Promise<void> {
    deps.assertOpen(method);
    needs(method, 'setControl');
    const { panel: scoped } = scoping.scope(method, panel);
    await pauses.set(scoped, paused, now());
    events.emit(paused ? 'paused' : 'resumed', { panel: scoped });
    if (!paused) deps.worker.kick();
  }

  const feed: DeliveryFeed = feedReader({ store, scoping, now, assertOpen: deps.assertOpen, needs });

  return {
    cancel(id: number, options: CancelOptions = {}): Promise<CancelResult> {
      if (!Number.isSafeInteger(id) || id < 1)
        throw new TypeError(`panel-license-guard: cancel() needs a release id (a positive integer), received ${shown(id)}.`);
      return cancelWhere('cancel', { id, panel: scoping.scope('cancel', options.panel).panel }, options);
    },
    cancelTrack(remoteTrackId: string, options: CancelOptions = {}): Promise<CancelResult> {
      if (typeof remoteTrackId !== 'string' || remoteTrackId.length === 0 || remoteTrackId.length > 500 || !isWellFormedText(remoteTrackId))
        throw new TypeError(
          `panel-license-guard: cancelTrack() needs a remote_track_id (a non-empty string of at most 500 characters of well-formed Unicode), received ${shown(remoteTrackId)}.`,
        );
      const { panel } = scoping.scope('cancelTrack', options.panel);
      if (panel === undefined)
        throw new TypeError("panel-license-guard: cancelTrack() with `panels` needs `{ panel }`: a remote_track_id is one panel's, not every panel's.");
      return cancelWhere('cancelTrack', { track: remoteTrackId, panel }, options);
    },
    pause: (query: { panel?: string } = {}) => setPause('pause', query.panel, true),
    resume: (query: { panel?: string } = {}) => setPause('resume', query.panel, false),
    async paused(): Promise<PausedNow> {
      deps.assertOpen('paused');
      needs('paused', 'controls');
      await pauses.refresh(true);
      return pauses.now();
    },
    deliveries: feed.deliveries,
    forgetFeed: feed.forgetFeed,
  };
}

function outcomeOf(answer: CancelAnswer): CancelResult['outcome'] {
  if (answer.result !== 'not-pending') return answer.result;
  if (answer.state === 'cancelled') return 'already-cancelled';
  return answer.state === 'delivered' ? 'delivered' : 'dead';
}

export type OperatorApi = ReturnType<typeof operatorApi>;

// Fakes for tests of the delivery worker: a sender whose pushes wait at a gate, and a SQLite store
// whose claims and batched settles are recorded (the store itself is the real one).
import type { ReleaseOutbox } from '../../src/outbox/outbox.js';
import type { ReleaseSender } from '../../src/outbox/release-sender.js';
import type { ClaimRequest, OutboxStore, SettleRequest } from '../../src/outbox/store.js';
import { sqliteOutboxStore } from '../../src/outbox/stores/sqlite/sqlite-store.js';

/** The panel id the fake sender stands for. */
export const PANEL = 'panel-ahead';

/** Enqueues releases of tracks t-0 … t-(count − 1), one after another. */
export async function enqueueTracks(outbox: ReleaseOutbox, count: number): Promise<void> {
  for (let i = 0; i < count; i++) await outbox.enqueue({ title: `Track ${i}`, remote_track_id: `t-${i}` });
}

/** A sender whose pushes all wait at a gate; `open()` answers every push waiting, and later ones at once while open. */
export function gatedSender(timeoutMs = 5000) {
  let waiting: (() => void)[] = [];
  let isOpen = false;
  let active = 0;
  let mostActive = 0;
  const bodies: string[] = [];
  const sender: ReleaseSender = {
    panelId: PANEL,
    timeoutMs,
    async pushSerializedRelease(body) {
      mostActive = Math.max(mostActive, ++active);
      if (!isOpen) await new Promise<void>((resolve) => waiting.push(resolve));
      active--;
      bodies.push(body);
      return { ok: true, release_id: bodies.length };
    },
  };
  const answerWaiting = () => {
    const now = waiting;
    waiting = [];
    for (const resolve of now) resolve();
  };
  return {
    sender,
    bodies,
    active: () => active,
    mostActive: () => mostActive,
    answerWaiting,
    open() {
      isOpen = true;
      answerWaiting();
    },
  };
}

/** The SQLite store, counting claims and batched settles; `later` answers settleMany() with a promise, as a server's store does. */
export function watchedStore(file: string, { later = false } = {}) {
  const inner = sqliteOutboxStore({ file });
  const claims: ClaimRequest[] = [];
  const batches: SettleRequest[][] = [];
  const store: OutboxStore = {
    ...inner,
    claimDue(request) {
      claims.push(request);
      return inner.claimDue(request);
    },
    settleMany(settles, owner) {
      batches.push([...settles]);
      const results = (inner.settleMany as NonNullable<OutboxStore['settleMany']>)(settles, owner);
      return later ? Promise.resolve(results) : results;
    },
  };
  return { store, inner, claims, batches };
}

// An in-memory outbox store: same rules as the SQLite store, nothing survives the process (tests, demos).
import { enqueueResult, mayPrune, mayRequeue, planEnqueue, planSettle, type RowUpdate } from './rules.js';
import { OUTBOX_STATES, type OutboxState, type OutboxStore, refuseTransaction, type StoredRow } from './store.js';

interface MemoryRow extends StoredRow {
  /** Order of deliveries within the store; the highest one per track is what the mother holds. */
  deliveredSeq: number | undefined;
  historyOf: number | undefined;
}

/** Creates a store that keeps rows in a Map. Rows are copied in and out, as a database would. */
export function createMemoryOutboxStore(): OutboxStore {
  const rows = new Map<number, MemoryRow>();
  let lastId = 0;
  let lastDeliveredSeq = 0;
  let closed = false;

  function open(): Map<number, MemoryRow> {
    if (closed) throw new Error('panel-license-guard: this outbox store is closed.');
    return rows;
  }

  function rowsOfTrack(remoteTrackId: string): MemoryRow[] {
    return [...open().values()].filter((row) => row.remoteTrackId === remoteTrackId);
  }

  function apply(row: MemoryRow, update: RowUpdate, nowMs: number): void {
    Object.assign(row, update, { leaseOwner: undefined, leaseExpiresAt: undefined, updatedAt: nowMs });
    if (update.state === 'delivered') row.deliveredSeq = ++lastDeliveredSeq;
  }

  function insert(fields: Omit<MemoryRow, 'id'>): number {
    const id = ++lastId;
    open().set(id, { id, ...fields });
    return id;
  }

  const toStored = ({ deliveredSeq: _seq, historyOf: _of, ...row }: MemoryRow): StoredRow => ({ ...row });

  return {
    enqueue(row, nowMs, options) {
      refuseTransaction('memory', options);
      let newestPending: MemoryRow | undefined;
      let latestDelivered: MemoryRow | undefined;
      if (row.remoteTrackId !== undefined) {
        for (const candidate of rowsOfTrack(row.remoteTrackId)) {
          if (candidate.state === 'pending') newestPending = candidate;
          if (candidate.state === 'delivered' && (candidate.deliveredSeq ?? 0) > (latestDelivered?.deliveredSeq ?? -1)) {
            latestDelivered = candidate;
          }
        }
      }
      const plan = planEnqueue(row, newestPending, latestDelivered);
      if (plan.action === 'replace-pending' && newestPending) {
        Object.assign(newestPending, { body: row.body, contentHash: row.contentHash, updatedAt: nowMs });
      }
      const insertedId =
        plan.action === 'insert'
          ? insert({
              ...row,
              state: 'pending',
              attempts: 0,
              nextAttemptAt: nowMs,
              lastError: undefined,
              releaseId: undefined,
              leaseOwner: undefined,
              leaseExpiresAt: undefined,
              createdAt: nowMs,
              updatedAt: nowMs,
              deliveredAt: undefined,
              deliveredSeq: undefined,
              historyOf: undefined,
            })
          : undefined;
      return enqueueResult(plan, insertedId);
    },

    claimDue({ owner, limit, nowMs, leaseMs, exclude = [] }) {
      const sending = new Set(exclude);
      const tracksWithOlderPending = new Set<string>();
      const due: MemoryRow[] = [];
      for (const row of open().values()) {
        if (row.state !== 'pending') continue;
        const blocked = row.remoteTrackId !== undefined && tracksWithOlderPending.has(row.remoteTrackId);
        if (row.remoteTrackId !== undefined) tracksWithOlderPending.add(row.remoteTrackId);
        const leased = row.leaseExpiresAt !== undefined && row.leaseExpiresAt > nowMs;
        if (!blocked && !leased && !sending.has(row.id) && row.nextAttemptAt <= nowMs) due.push(row);
      }
      due.sort((a, b) => a.nextAttemptAt - b.nextAttemptAt || a.id - b.id);
      return due.slice(0, limit).map((row) => {
        Object.assign(row, { leaseOwner: owner, leaseExpiresAt: nowMs + leaseMs });
        return { id: row.id, remoteTrackId: row.remoteTrackId, body: row.body, contentHash: row.contentHash, attempts: row.attempts };
      });
    },

    settle(claim, owner, outcome, nowMs) {
      const row = open().get(claim.id);
      const plan = planSettle(row, claim, owner, outcome, nowMs);
      if (plan.history) {
        const { body, contentHash, releaseId, attempts } = plan.history;
        insert({
          remoteTrackId: claim.remoteTrackId,
          body,
          contentHash,
          state: 'delivered',
          attempts,
          nextAttemptAt: nowMs,
          lastError: undefined,
          releaseId,
          leaseOwner: undefined,
          leaseExpiresAt: undefined,
          createdAt: nowMs,
          updatedAt: nowMs,
          deliveredAt: nowMs,
          deliveredSeq: ++lastDeliveredSeq,
          historyOf: claim.id,
        });
      }
      if (row && plan.update) apply(row, plan.update, nowMs);
      return plan.result;
    },

    counts() {
      const counts = Object.fromEntries(OUTBOX_STATES.map((state) => [state, 0])) as Record<OutboxState, number>;
      for (const row of open().values()) counts[row.state]++;
      return counts;
    },

    oldestPending() {
      let oldest: number | undefined;
      for (const row of open().values()) if (row.state === 'pending' && (oldest === undefined || row.createdAt < oldest)) oldest = row.createdAt;
      return oldest;
    },

    list({ state, limit, id }) {
      const listed: StoredRow[] = [];
      for (const row of open().values()) {
        if (listed.length >= limit) break;
        if ((state === undefined || row.state === state) && (id === undefined || row.id === id)) listed.push(toStored(row));
      }
      return listed;
    },

    requeueDead(id, nowMs) {
      let requeued = 0;
      for (const row of open().values()) {
        if (row.state !== 'dead' || (id !== undefined && row.id !== id) || !mayRequeue(row, open().values())) continue;
        apply(row, { state: 'pending', attempts: 0, nextAttemptAt: nowMs, lastError: row.lastError, releaseId: undefined, deliveredAt: undefined }, nowMs);
        requeued++;
      }
      return requeued;
    },

    prune({ deliveredBefore, deadBefore, afterId, limit }) {
      const examined = [...open().values()].filter((row) => row.id > afterId).slice(0, limit);
      let highestId: number | undefined;
      for (const id of rows.keys()) highestId = Math.max(highestId ?? id, id);
      const latest = new Map<string, MemoryRow>();
      for (const row of open().values()) {
        if (row.state !== 'delivered' || row.remoteTrackId === undefined) continue;
        const seen = latest.get(row.remoteTrackId);
        if (!seen || (row.deliveredSeq ?? 0) > (seen.deliveredSeq ?? 0)) latest.set(row.remoteTrackId, row);
      }
      let deleted = 0;
      for (const row of examined) {
        const latestOfTrack = row.remoteTrackId === undefined ? undefined : latest.get(row.remoteTrackId);
        if (mayPrune(row, latestOfTrack, deliveredBefore, deadBefore) && rows.delete(row.id)) deleted++;
      }
      return { deleted, lastId: examined.at(-1)?.id, highestId };
    },

    close() {
      closed = true;
      rows.clear();
    },
  };
}

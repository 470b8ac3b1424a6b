// An in-memory outbox store: same rules as the SQLite store, nothing survives the process (tests, demos).

import { ADOPTION_SUPERSEDED, enqueueResult, mayBeRecordedHistory, mayPrune, mayRequeue, planEnqueue, planSettle, type RowUpdate } from '../../rules.js';
import {
  type ClaimedRow,
  OUTBOX_STATES,
  type OutboxState,
  type OutboxStore,
  type PanelCounts,
  type PanelScope,
  refuseTransaction,
  type SettleResult,
  type StoredRow,
  UNASSIGNED_PANEL,
} from '../../store.js';
import { gatherHeads, panelRing, pickFairly } from '../shared/fair-claim.js';
import { memoryOperations, type OperatedRow } from './memory-operations.js';

interface MemoryRow extends OperatedRow {
  /** Order of deliveries within the store; the highest one per track is what the mother holds. */
  deliveredSeq: number | undefined;
  historyOf: number | undefined;
  traceContext?: string | undefined; // handed back on claims, never listed
}

/** What adoption and requeues clear: no release_id, no delivery, no lease. */
const UNSETTLED = { releaseId: undefined, deliveredAt: undefined, leaseOwner: undefined } as const;
/** A new row: never tried, leased, delivered or placed in the feed. */
const NEVER_TRIED = {
  ...UNSETTLED,
  attempts: 0,
  lastError: undefined,
  leaseExpiresAt: undefined,
  deliveredSeq: undefined,
  historyOf: undefined,
  feedPosition: undefined,
} as const;

/** Creates a store that keeps rows in a Map. Rows are copied in and out, as a database would. */
export function memoryOutboxStore(): OutboxStore {
  const rows = new Map<number, MemoryRow>();
  /** Every row's id, ascending (as they are given): a page after an id starts there, not at the first row. */
  let ids: number[] = [];
  let lastId = 0;
  let lastDeliveredSeq = 0;
  let closed = false;

  function open(): Map<number, MemoryRow> {
    if (closed) throw new Error('panel-license-guard: this outbox store is closed.');
    return rows;
  }

  function rowsOfTrack(panel: string, remoteTrackId: string): MemoryRow[] {
    return [...open().values()].filter((row) => row.panel === panel && row.remoteTrackId === remoteTrackId);
  }

  const inScope = (row: MemoryRow, scope: PanelScope | undefined) => scope?.panel === undefined || row.panel === scope.panel;
  const trackKey = (row: { panel: string; remoteTrackId: string | undefined }) => `${row.panel}\n${row.remoteTrackId}`;

  /** Pending rows that may be sent now, per panel, in due order; a track's newer row waits for its older one. */
  function dueRows(nowMs: number, exclude: readonly number[], accept: (panel: string) => boolean): Map<string, MemoryRow[]> {
    const sending = new Set(exclude);
    const tracksWithOlderPending = new Set<string>();
    const due = new Map<string, MemoryRow[]>();
    for (const row of open().values()) {
      if (row.state !== 'pending' || !accept(row.panel)) continue;
      const blocked = row.remoteTrackId !== undefined && tracksWithOlderPending.has(trackKey(row));
      if (row.remoteTrackId !== undefined) tracksWithOlderPending.add(trackKey(row));
      const leased = row.leaseExpiresAt !== undefined && row.leaseExpiresAt > nowMs;
      if (blocked || leased || sending.has(row.id) || row.nextAttemptAt > nowMs) continue;
      const list = due.get(row.panel);
      if (list) list.push(row);
      else due.set(row.panel, [row]);
    }
    for (const list of due.values()) list.sort((a, b) => a.nextAttemptAt - b.nextAttemptAt || a.id - b.id);
    return due;
  }

  function lease(row: MemoryRow, owner: string, until: number): ClaimedRow {
    Object.assign(row, { leaseOwner: owner, leaseExpiresAt: until });
    const { id, panel, remoteTrackId, body, contentHash, attempts, traceContext } = row;
    return { id, panel, remoteTrackId, body, contentHash, attempts, traceContext };
  }

  function apply(row: MemoryRow, update: RowUpdate, nowMs: number): void {
    Object.assign(row, update, { leaseExpiresAt: undefined, updatedAt: nowMs });
    if (update.state === 'delivered') row.deliveredSeq = ++lastDeliveredSeq;
  }

  function insert(fields: Omit<MemoryRow, 'id'>): number {
    const id = ++lastId;
    open().set(id, { id, ...fields });
    ids.push(id);
    return id;
  }

  /** Where the first id above `afterId` is in `ids`. */
  function firstAfter(afterId: number): number {
    let low = 0;
    let high = ids.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if ((ids[middle] as number) <= afterId) low = middle + 1;
      else high = middle;
    }
    return low;
  }

  const toStored = ({ deliveredSeq: _seq, historyOf: _of, feedPosition: _at, traceContext: _trace, ...row }: MemoryRow): StoredRow => ({ ...row });

  const store: OutboxStore = {
    ...memoryOperations(open),
    enqueue(row, nowMs, options) {
      refuseTransaction('memory', options);
      let newestPending: MemoryRow | undefined;
      let latestDelivered: MemoryRow | undefined;
      let newestDeadId: number | undefined;
      if (row.remoteTrackId !== undefined) {
        for (const candidate of rowsOfTrack(row.panel, row.remoteTrackId)) {
          if (candidate.state === 'pending') newestPending = candidate;
          if (candidate.state === 'dead') newestDeadId = Math.max(newestDeadId ?? 0, candidate.id);
          if (candidate.state === 'delivered' && (candidate.deliveredSeq ?? 0) > (latestDelivered?.deliveredSeq ?? -1)) {
            latestDelivered = candidate;
          }
        }
      }
      const plan = planEnqueue(row, newestPending, latestDelivered, newestDeadId);
      if (plan.action === 'replace-pending' && newestPending)
        Object.assign(newestPending, { body: row.body, contentHash: row.contentHash, traceContext: row.traceContext, updatedAt: nowMs });
      const insertedId =
        plan.action === 'insert' ? insert({ ...row, ...NEVER_TRIED, state: 'pending', nextAttemptAt: nowMs, createdAt: nowMs, updatedAt: nowMs }) : undefined;
      return enqueueResult(plan, insertedId);
    },

    claimDue({ owner, panel, limit, nowMs, leaseMs, exclude = [] }) {
      const due = dueRows(nowMs, exclude, (rowPanel) => rowPanel === panel).get(panel) ?? [];
      return due.slice(0, limit).map((row) => lease(row, owner, nowMs + leaseMs));
    },

    claimFair({ owner, limit, nowMs, leaseMs, exclude = [], after, maxPanels, skipPanels, probePanels }) {
      // Sorted panels with pending rows, stepped through as a database steps through its index.
      const pending = [...new Set([...open().values()].filter((row) => row.state === 'pending').map((row) => row.panel))].sort();
      const nextPanel = (cursor: string) => pending.find((panel) => panel > cursor);
      const due = dueRows(nowMs, exclude, () => true);
      const visit = { limit, maxPanels, skipPanels, probePanels };
      const { heads, resumeAfter } = gatherHeads(panelRing(nextPanel, after), visit, (panel, most) => (due.get(panel) ?? []).slice(0, most));
      const { rows, lastPanel } = pickFairly(heads, limit, resumeAfter);
      return { rows: rows.map((row) => lease(row, owner, nowMs + leaseMs)), lastPanel };
    },

    settle(claim, owner, outcome, nowMs) {
      const rows = open();
      const row = rows.get(claim.id);
      const recorded =
        mayBeRecordedHistory(row, claim, owner, outcome) &&
        [...rows.values()].some(
          (other) =>
            other.historyOf === claim.id &&
            other.state === 'delivered' &&
            other.contentHash === claim.contentHash &&
            other.leaseOwner === owner &&
            other.releaseId === outcome.releaseId,
        );
      const plan = planSettle(row, claim, owner, outcome, nowMs, recorded);
      if (plan.history) {
        const { body, contentHash, releaseId, attempts } = plan.history;
        insert({
          panel: claim.panel,
          remoteTrackId: claim.remoteTrackId,
          body,
          contentHash,
          state: 'delivered',
          attempts,
          nextAttemptAt: nowMs,
          lastError: undefined,
          releaseId,
          // Who recorded it, as on any delivered row: a record retried after a lost answer finds it.
          leaseOwner: owner,
          leaseExpiresAt: undefined,
          createdAt: nowMs,
          updatedAt: nowMs,
          deliveredAt: nowMs,
          deliveredSeq: ++lastDeliveredSeq,
          historyOf: claim.id,
          feedPosition: undefined,
        });
      }
      if (row && plan.update) apply(row, plan.update, nowMs);
      return plan.result;
    },

    recheck(held) {
      return held.flatMap(({ id, contentHash }) => {
        const row = open().get(id);
        const unchanged = !row || (row.state === 'pending' && row.contentHash === contentHash);
        return unchanged ? [] : [{ id, state: row.state, body: row.body, contentHash: row.contentHash }];
      });
    },

    settleMany(settles, owner) {
      return settles.map(({ claim, outcome, nowMs }) => store.settle(claim, owner, outcome, nowMs) as SettleResult);
    },

    counts(scope) {
      const counts = Object.fromEntries(OUTBOX_STATES.map((state) => [state, 0])) as Record<OutboxState, number>;
      for (const row of open().values()) if (inScope(row, scope)) counts[row.state]++;
      return counts;
    },

    oldestPending(scope) {
      let oldest: number | undefined;
      for (const row of open().values())
        if (row.state === 'pending' && inScope(row, scope) && (oldest === undefined || row.createdAt < oldest)) oldest = row.createdAt;
      return oldest;
    },

    list({ state, limit, id, panel, track, afterId }) {
      const listed: StoredRow[] = [];
      const candidates = id === undefined ? ids : [id];
      for (let at = afterId === undefined || id !== undefined ? 0 : firstAfter(afterId); at < candidates.length && listed.length < limit; at++) {
        const row = open().get(candidates[at] as number);
        if (row === undefined) continue;
        const wanted = (state === undefined || row.state === state) && inScope(row, { panel });
        if (wanted && (track === undefined || row.remoteTrackId === track) && (afterId === undefined || row.id > afterId)) listed.push(toStored(row));
      }
      return listed;
    },

    panelCounts(limit) {
      const byPanel = new Map<string, PanelCounts>();
      for (const row of open().values()) {
        if (row.state === 'delivered' || row.state === 'cancelled') continue;
        const counts = byPanel.get(row.panel) ?? { panel: row.panel, pending: 0, dead: 0, oldestPendingAt: undefined };
        byPanel.set(row.panel, counts);
        if (row.state === 'dead') counts.dead++;
        else {
          counts.pending++;
          counts.oldestPendingAt = Math.min(counts.oldestPendingAt ?? row.createdAt, row.createdAt);
        }
      }
      return [...byPanel.values()].sort((a, b) => b.pending - a.pending || b.dead - a.dead || (a.panel < b.panel ? -1 : 1)).slice(0, limit);
    },

    adoptUnassigned(panel, nowMs) {
      let adopted = 0;
      for (const row of open().values()) {
        if (row.panel !== UNASSIGNED_PANEL) continue;
        const taken =
          row.state === 'pending' && row.remoteTrackId !== undefined && rowsOfTrack(panel, row.remoteTrackId).some((other) => other.state === 'pending');
        const { attempts, nextAttemptAt } = row;
        if (taken) apply(row, { ...UNSETTLED, state: 'dead', attempts, nextAttemptAt, lastError: ADOPTION_SUPERSEDED }, nowMs);
        row.panel = panel;
        adopted++;
      }
      return adopted;
    },

    requeueDead(id, nowMs, scope) {
      let requeued = 0;
      for (const row of open().values()) {
        if (row.state !== 'dead' || (id !== undefined && row.id !== id) || !inScope(row, scope) || !mayRequeue(row, open().values())) continue;
        apply(row, { ...UNSETTLED, state: 'pending', attempts: 0, nextAttemptAt: nowMs, lastError: row.lastError }, nowMs);
        requeued++;
      }
      return requeued;
    },

    prune(request) {
      const { afterId, limit } = request;
      const examined = [...open().values()].filter((row) => row.id > afterId).slice(0, limit);
      let highestId: number | undefined;
      for (const id of rows.keys()) highestId = Math.max(highestId ?? id, id);
      const latest = new Map<string, MemoryRow>();
      for (const row of open().values()) {
        if (row.state !== 'delivered' || row.remoteTrackId === undefined) continue;
        const seen = latest.get(trackKey(row));
        if (!seen || (row.deliveredSeq ?? 0) > (seen.deliveredSeq ?? 0)) latest.set(trackKey(row), row);
      }
      let deleted = 0;
      for (const row of examined) {
        const latestOfTrack = row.remoteTrackId === undefined ? undefined : latest.get(trackKey(row));
        if (mayPrune(row, latestOfTrack, request) && rows.delete(row.id)) deleted++;
      }
      if (deleted > 0) ids = ids.filter((kept) => rows.has(kept));
      return { deleted, lastId: examined.at(-1)?.id, highestId };
    },

    close() {
      closed = true;
      rows.clear();
      ids = [];
    },
  };
  return store;
}

/** @deprecated Renamed {@link memoryOutboxStore} (one naming scheme for every store: `<backend>OutboxStore`); this name goes in the next minor version. */
export const createMemoryOutboxStore = memoryOutboxStore;

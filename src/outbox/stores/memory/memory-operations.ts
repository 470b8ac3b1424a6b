// What operators do to the memory store: cancel a pending release, keep control values (pauses,
// feed positions), and hand out feed positions to deliveries in the order they were recorded.

import type { OutboxState, StoredRow } from '../../store.js';
import type { OperatorStore } from '../../store-operations.js';
import { checkControl } from '../shared/control-values.js';

/** The memory store's row, as these operations need it. */
export interface OperatedRow extends StoredRow {
  feedPosition: number | undefined;
}

/** The operations over the store's rows (`rows()` throws once the store is closed). */
export function memoryOperations(rows: () => Map<number, OperatedRow>): Required<OperatorStore> {
  const controls = new Map<string, string>();
  let lastPosition = 0;

  function target({ id, panel, track }: { id?: number | undefined; panel?: string | undefined; track?: string | undefined }): OperatedRow | undefined {
    if (id !== undefined) {
      const row = rows().get(id);
      return row && (panel === undefined || row.panel === panel) ? row : undefined;
    }
    let newest: OperatedRow | undefined;
    for (const row of rows().values()) {
      if (row.panel !== panel || row.remoteTrackId !== track) continue;
      if (row.state === 'pending') return row;
      if (!newest || row.id > newest.id) newest = row;
    }
    return newest;
  }

  return {
    cancel(request) {
      const row = target(request);
      if (!row) return { result: 'not-found', id: undefined, state: undefined };
      const answer = { id: row.id, state: row.state as OutboxState };
      if (row.state !== 'pending') return { result: 'not-pending', ...answer, releaseId: row.releaseId };
      if (row.leaseOwner !== undefined && row.leaseExpiresAt !== undefined && row.leaseExpiresAt > request.nowMs)
        return { result: 'in-flight', ...answer, leaseExpiresAt: row.leaseExpiresAt };
      Object.assign(row, { state: 'cancelled', lastError: request.note, leaseOwner: undefined, leaseExpiresAt: undefined, updatedAt: request.nowMs });
      return { result: 'cancelled', id: row.id, state: 'cancelled' };
    },

    controls() {
      rows();
      return Object.fromEntries(controls);
    },

    setControl(name, value) {
      rows();
      checkControl(name, value);
      if (value === undefined) controls.delete(name);
      else controls.set(name, value);
    },

    deliveries({ after, limit, panel }) {
      const unplaced = [...rows().values()].filter((row) => row.state === 'delivered' && row.feedPosition === undefined);
      unplaced.sort((a, b) => (a.deliveredAt ?? 0) - (b.deliveredAt ?? 0) || a.id - b.id);
      for (const row of unplaced) row.feedPosition = ++lastPosition;
      const found = [...rows().values()].filter(
        (row) => row.feedPosition !== undefined && row.feedPosition > after && (panel === undefined || row.panel === panel),
      );
      found.sort((a, b) => (a.feedPosition as number) - (b.feedPosition as number));
      return found.slice(0, limit).map((row) => ({
        position: row.feedPosition as number,
        id: row.id,
        panel: row.panel,
        remoteTrackId: row.remoteTrackId,
        releaseId: row.releaseId,
        contentHash: row.contentHash,
        deliveredAt: row.deliveredAt as number,
      }));
    },
  };
}

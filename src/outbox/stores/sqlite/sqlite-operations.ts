// What operators do to a SQLite outbox: cancel a release, and the control values every process
// shares (pauses, feed positions). Each write is on disk once it resolves, like an enqueue.

import type { SqliteDatabase, SqliteStatement } from '../../../db/sqlite-driver.js';
import { describeError } from '../../../logger.js';
import type { OutboxState, OutboxStore } from '../../store.js';
import { type CancelAnswer, type CancelRequest, CONTROL_NAME_MAX } from '../../store-operations.js';
import { FEED_COUNTER } from './sqlite-feed.js';
import type { WalSync } from './sqlite-wal-sync.js';

/** The longest control value (a feed position, a pause flag). */
export const CONTROL_VALUE_MAX = 64;

const TARGET = 'id, panel, state, lease_expires_at AS leaseExpiresAt, release_id AS releaseId FROM release_outbox';
export const OPERATION_SQL = {
  byId: `SELECT ${TARGET} WHERE id = ?`,
  // A track's pending row (its oldest, should adoption have left two: the one sent first, as in
  // the memory store), else its newest row of any state: both a seek on the (panel,
  // remote_track_id, state, id) index.
  pendingOfTrack: `SELECT ${TARGET} WHERE panel = ? AND remote_track_id = ? AND state = 'pending' ORDER BY id LIMIT 1`,
  newestOfTrack: `SELECT ${TARGET} WHERE panel = ? AND remote_track_id = ? ORDER BY id DESC LIMIT 1`,
  cancel: `UPDATE release_outbox SET state = 'cancelled', last_error = @note, lease_owner = NULL, lease_expires_at = NULL, updated_at = @now
    WHERE id = @id AND state = 'pending'`,
  // The feed's counter (sqlite-feed.ts) shares the table but is the store's own, not a control.
  controls: `SELECT name, value FROM release_outbox_controls WHERE name <> '${FEED_COUNTER}'`,
  setControl: `INSERT INTO release_outbox_controls (name, value, updated_at) VALUES (@name, @value, @now)
    ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
  dropControl: 'DELETE FROM release_outbox_controls WHERE name = ?',
};

interface Target {
  id: number;
  panel: string;
  state: OutboxState;
  leaseExpiresAt: number | null;
  releaseId: number | null;
}

/** Throws a TypeError naming the limit a control name or value breaks. */
export function checkControl(name: unknown, value: unknown): void {
  if (typeof name !== 'string' || name === '' || name.length > CONTROL_NAME_MAX)
    throw new TypeError(`panel-license-guard: a control name must be a string of 1 to ${CONTROL_NAME_MAX} characters (CONTROL_NAME_MAX).`);
  if (name === FEED_COUNTER) throw new TypeError(`panel-license-guard: "${FEED_COUNTER}" is the store's own feed counter, not a control; pick another name.`);
  if (value !== undefined && (typeof value !== 'string' || value.length > CONTROL_VALUE_MAX))
    throw new TypeError(
      `panel-license-guard: the value of control "${name}" must be a string of at most ${CONTROL_VALUE_MAX} characters, or undefined to remove it.`,
    );
}

/**
 * Runs a write so that it is on disk when the promise resolves: committed with synchronous=NORMAL,
 * then the WAL synced in libuv's pool (sqlite-wal-sync.ts), sharing the sync with enqueues; with
 * FULL on the node thread where there is no WAL (`:memory:`). Once a sync failed nothing more is
 * committed (what follows an unsynced frame may be lost with it), as for enqueues.
 */
export function durableWrites(wal: WalSync | undefined, withFullSync: <T>(write: () => T) => T) {
  return async <T>(write: () => T): Promise<T> => {
    if (wal === undefined) return withFullSync(write);
    const failed = wal.failed();
    if (failed) throw notSynced(failed, 'was not made');
    const result = write();
    await wal.durable().catch((error: unknown) => {
      throw notSynced(error, 'may or may not be on disk');
    });
    return result;
  };
}

function notSynced(error: unknown, what: string): Error {
  return new Error(
    `panel-license-guard: the outbox file could not be synced to disk (${describeError(error)}); this change ${what}. ` +
      'No more writes are accepted until the outbox is closed and opened again (check the disk).',
    { cause: error },
  );
}

type Durably = ReturnType<typeof durableWrites>;

/** cancel, controls and setControl of a writable store. */
export function createOperations(db: SqliteDatabase, durably: Durably): Required<Pick<OutboxStore, 'cancel' | 'controls' | 'setControl'>> {
  const statements = Object.fromEntries(Object.entries(OPERATION_SQL).map(([name, sql]) => [name, db.prepare(sql)])) as Record<
    keyof typeof OPERATION_SQL,
    SqliteStatement
  >;
  const answer = (result: CancelAnswer['result'], row: Target, extra: Partial<CancelAnswer> = {}): CancelAnswer => ({
    result,
    id: row.id,
    state: row.state,
    ...(row.state === 'delivered' ? { releaseId: row.releaseId ?? undefined } : {}),
    ...extra,
  });
  // In an IMMEDIATE transaction: the write lock is taken before the row is read, so a claim (which
  // takes it too) either leased the row before (in-flight) or finds it cancelled after.
  const cancel = db.transaction(({ id, panel, track, nowMs, note }: CancelRequest): CancelAnswer => {
    let row: Target | undefined;
    if (id !== undefined) {
      row = statements.byId.get(id) as Target | undefined;
      if (row !== undefined && panel !== undefined && row.panel !== panel) row = undefined;
    } else if (panel !== undefined && track !== undefined) {
      row = (statements.pendingOfTrack.get(panel, track) ?? statements.newestOfTrack.get(panel, track)) as Target | undefined;
    } else throw new TypeError('panel-license-guard: cancel() needs an `id`, or a `panel` and a `track`.');
    if (row === undefined) return { result: 'not-found', id: undefined, state: undefined };
    if (row.state !== 'pending') return answer('not-pending', row);
    // Leased as claims reckon it (sqlite-sql.ts, `due`): on the outbox's clock, which gave the lease.
    if (row.leaseExpiresAt !== null && row.leaseExpiresAt > nowMs) return answer('in-flight', row, { leaseExpiresAt: row.leaseExpiresAt });
    statements.cancel.run({ id: row.id, note, now: nowMs });
    return answer('cancelled', { ...row, state: 'cancelled' });
  });
  return {
    cancel: (request) => durably(() => cancel.immediate(request)),
    controls: () => Object.fromEntries((statements.controls.all() as { name: string; value: string }[]).map(({ name, value }) => [name, value])),
    async setControl(name, value, nowMs) {
      checkControl(name, value);
      await durably(() => (value === undefined ? statements.dropControl.run(name) : statements.setControl.run({ name, value, now: nowMs })));
    },
  };
}

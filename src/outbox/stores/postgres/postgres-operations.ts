// What operators do to a PostgreSQL outbox: cancel a release (one statement, atomic against
// claims), shared control values, and the feed of deliveries in the order they committed.

import type { OutboxState } from '../../store.js';
import type { CancelAnswer, CancelRequest, FeedRequest, FeedRow } from '../../store-operations.js';
import { checkControl } from '../shared/control-values.js';
import { feedRow } from '../shared/sql-rows.js';
import { FEED_COUNTER, operationStatements } from './postgres-operations-sql.js';
import { type PgPool, type PgQueryable, privilegeError, type TableNames } from './postgres-schema.js';
import { num, orNull, type Row } from './postgres-sql.js';

/** Delivered rows given positions per statement: one statement's locks and WAL stay small. */
export const STAMP_BATCH = 5_000;
/**
 * Batches one feed read stamps at most (100,000 rows): the first read after a long time without
 * one (or after the upgrade) is bounded, and the next read goes on where it stopped.
 */
const MAX_STAMP_BATCHES = 20;
/** A cancel that found no pending row reads the row again; it may have become pending meanwhile. */
const CANCEL_ROUNDS = 5;

export interface PgOperationsContext {
  pool: PgPool;
  names: TableNames;
  leaseClock: 'database' | 'outbox';
  ready(): Promise<void>;
  inTransaction<T>(work: (client: PgQueryable) => Promise<T>): Promise<T>;
}

export function createPostgresOperations({ pool, names, leaseClock, ready, inTransaction }: PgOperationsContext) {
  const sql = operationStatements(names, leaseClock);

  async function cancel(request: CancelRequest): Promise<CancelAnswer> {
    const { id, panel, track, nowMs, note } = request;
    if (id === undefined && (panel === undefined || track === undefined))
      throw new TypeError('panel-license-guard: cancel needs an `id`, or a `panel` and a `track`.');
    await ready();
    const [statement, key] = id !== undefined ? [sql.cancelById, [id, orNull(panel)]] : [sql.cancelByTrack, [panel, track]];
    for (let round = 0; round < CANCEL_ROUNDS; round++) {
      const locked = (await pool.query(statement, [note, nowMs, ...key])).rows[0];
      if (locked?.done) return { result: 'cancelled', id: Number(locked.id), state: 'cancelled' };
      if (locked && locked.lease_ends !== null)
        return { result: 'in-flight', id: Number(locked.id), state: 'pending', leaseExpiresAt: Number(locked.lease_ends) };
      if (locked) continue;
      // Nothing pending in the statement's snapshot: say what the row (the track's newest) is.
      const row: Row | undefined = (await pool.query(id !== undefined ? sql.rowById : sql.newestOfTrack, key)).rows[0];
      if (row === undefined) return { result: 'not-found', id: undefined, state: undefined };
      const state = row.state as OutboxState;
      // Pending after all: stored (or requeued) after that snapshot; cancel it now.
      if (state === 'pending') continue;
      return { result: 'not-pending', id: Number(row.id), state, releaseId: num(row.release_id) };
    }
    throw new Error(`panel-license-guard: the outbox row to cancel kept changing (${CANCEL_ROUNDS} tries); try again.`);
  }

  async function controls(): Promise<Record<string, string>> {
    await ready();
    const values: Record<string, string> = {};
    for (const row of (await pool.query(sql.controls)).rows) values[row.name as string] = row.value as string;
    return values;
  }

  async function setControl(name: string, value: string | undefined, nowMs: number): Promise<void> {
    checkControl(name, value);
    // Set lower, two deliveries would be given one position (the unique index then refuses every stamp).
    if (name === FEED_COUNTER) throw new TypeError(`panel-license-guard: the control "${FEED_COUNTER}" is the store's own (the last feed position given).`);
    await ready();
    if (value === undefined) await pool.query(sql.removeControl, [name]);
    else await pool.query(sql.setControl, [name, value, nowMs]);
  }

  /** Stamps one batch under the counter's lock; returns how many rows it stamped and the counter after. */
  const stampBatch = () =>
    inTransaction(async (client) => {
      let top = (await client.query(sql.lockCounter)).rows[0]?.top;
      if (top === undefined) {
        await client.query(sql.createCounter);
        top = (await client.query(sql.lockCounter)).rows[0]?.top;
      }
      const given = (await client.query(sql.stamp, [top, STAMP_BATCH])).rows.map((row) => Number(row.feed_position));
      const after = Math.max(Number(top), ...given);
      if (given.length > 0) await client.query(sql.moveCounter, [String(after)]);
      return { stamped: given.length, top: after };
    });

  /**
   * Runs reads of a page of positions in order. Without statistics (a new table, autovacuum off)
   * PostgreSQL takes `panel = $3` to match 0.5 % of rows and, for a page larger than that guess,
   * gathers every row of the panel after the cursor in a bitmap and sorts them: 1,600 pages per
   * page of 1,000 with 100,000 deliveries ahead, against 36 walking the index in order.
   */
  const inIndexOrder = <T>(work: (client: PgQueryable) => Promise<T>) =>
    inTransaction(async (client) => {
      await client.query('SET LOCAL enable_bitmapscan = off');
      return work(client);
    });

  /** Whether a page of `limit` deliveries after `after` already has positions. */
  async function pageReady({ after, limit, panel }: FeedRequest, top: number): Promise<boolean> {
    if (panel === undefined) return top - after >= limit;
    const found = await inIndexOrder((client) => client.query(sql.panelAfter, [after, limit, panel]));
    return Number(found.rows[0]?.n ?? 0) >= limit;
  }

  async function deliveries(request: FeedRequest): Promise<FeedRow[]> {
    await ready();
    const { after, limit, panel } = request;
    // Most reads find every delivery already stamped: one index probe, no lock taken. A reader
    // behind the head finds its page already there and leaves the stamping to those at the head.
    if ((await pool.query(sql.unstamped)).rows[0]?.waiting) {
      let top = Number((await pool.query(sql.readCounter)).rows[0]?.top ?? 0);
      for (let batch = 0; batch < MAX_STAMP_BATCHES && !(await pageReady(request, top)); batch++) {
        const stamping = await stampBatch();
        top = stamping.top;
        if (stamping.stamped < STAMP_BATCH) break;
      }
    }
    const { rows } = await inIndexOrder((client) =>
      panel === undefined ? client.query(sql.feed, [after, limit]) : client.query(sql.feedOfPanel, [after, limit, panel]),
    );
    return rows.map(feedRow);
  }

  // A user granted only what older versions needed lacks privileges on the controls table: say which.
  const explained =
    <A extends unknown[], R>(call: (...args: A) => Promise<R>) =>
    (...args: A): Promise<R> =>
      call(...args).catch((error: unknown) => Promise.reject(privilegeError(names, error)));
  return { cancel: explained(cancel), controls: explained(controls), setControl: explained(setControl), deliveries: explained(deliveries) };
}

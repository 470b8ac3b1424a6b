// What operators do to the MySQL/MariaDB outbox: cancel one release, keep control values every
// process shares (pauses, feed positions), and read the feed of deliveries in commit order.

import type { OutboxState } from '../../store.js';
import type { CancelAnswer, CancelRequest, FeedRequest, FeedRow, OperatorStore } from '../../store-operations.js';
import { checkControl } from '../shared/control-values.js';
import { feedRow } from '../shared/sql-rows.js';
import { fitText, type MysqlValue, rowCount, run } from './mysql-params.js';
import { headerOf, type MysqlQueryable, type MysqlResult, type MysqlTableNames, type Row, rowsOf } from './mysql-schema.js';
import { num } from './mysql-sql.js';

/** The controls row holding the highest feed position given so far; locked while positions are given. */
export const FEED_COUNTER = 'feed-position';
/** The most delivered rows given positions by one statement (measured: 0.45 s for 5,000 on MariaDB 10.11). */
export const STAMP_BATCH = 5000;
/** The fewest a call gives (when that many wait), however small its page. */
const STAMP_LEAST = 100;
const LAST_ERROR_BYTES = 65_535;

/**
 * MariaDB's EMPTY_STRING_IS_NULL (set on a pooled session) turns an empty parameter into NULL:
 * an empty name or value is made again from a computed empty string, which the mode leaves alone.
 */
const text = "COALESCE(?, LEFT('-', 0))";

export function mysqlOperationStatements({ table: t, controls }: MysqlTableNames, now: string) {
  // The lease is over (or was never taken) on the clock claims reckon with (`now`: one value).
  const row = `SELECT id, panel, state, release_id, lease_expires_at,
      (lease_owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at <= ${now}) AS free FROM ${t}`;
  const feed = `SELECT feed_position, id, panel, remote_track_id, release_id, content_hash, delivered_at FROM ${t}`;
  return {
    // Locking reads: a claim that locked the row first is waited for, then seen leased; a claim
    // after this one skips the row (SKIP LOCKED), then finds it cancelled. Values: now, then the keys.
    byId: `${row} WHERE id = ? FOR UPDATE`,
    pendingOfTrack: `${row} WHERE panel = ? AND pending_track = ? FOR UPDATE`,
    pendingOfUnassignedTrack: `${row} WHERE CHAR_LENGTH(panel) = 0 AND pending_track = ? FOR UPDATE`,
    newestOfTrack: `SELECT id, state, release_id FROM ${t} WHERE panel = ? AND remote_track_id = ? ORDER BY id DESC LIMIT 1`,
    newestOfUnassignedTrack: `SELECT id, state, release_id FROM ${t} WHERE CHAR_LENGTH(panel) = 0 AND remote_track_id = ? ORDER BY id DESC LIMIT 1`,
    cancel: `UPDATE ${t} SET state = 'cancelled', last_error = ?, lease_owner = NULL, lease_expires_at = NULL, updated_at = ? WHERE id = ? AND state = 'pending'`,
    controls: `SELECT name, value FROM ${controls}`,
    setControl: `INSERT INTO ${controls} (name, value, updated_at) VALUES (${text}, ${text}, ?)
      ON DUPLICATE KEY UPDATE value = VALUES(value), updated_at = VALUES(updated_at)`,
    removeControl: `DELETE FROM ${controls} WHERE name = ${text}`,
    // Whether any delivery waits for a position (the `feed` index; no lock).
    unstamped: `SELECT 1 FROM ${t} WHERE state = 'delivered' AND feed_position IS NULL LIMIT 1`,
    // The counter's row, created if missing, locked until the transaction ends (as a track's lock).
    lockCounter: `INSERT INTO ${controls} (name, value, updated_at) VALUES ('${FEED_COUNTER}', '0', ?) ON DUPLICATE KEY UPDATE name = name`,
    counter: `SELECT value FROM ${controls} WHERE name = '${FEED_COUNTER}' FOR UPDATE`,
    // The oldest waiting deliveries (delivery time, then id), read in the `feed` index and stopped
    // at the batch, then numbered after the counter. Values: batch, counter.
    stamp: `UPDATE ${t} AS target JOIN (
        SELECT id, ROW_NUMBER() OVER (ORDER BY delivered_at, id) AS n FROM (
          SELECT id, delivered_at FROM ${t} WHERE state = 'delivered' AND feed_position IS NULL ORDER BY delivered_at, id LIMIT ?) AS waiting
      ) AS batch ON batch.id = target.id
      SET target.feed_position = ? + batch.n`,
    // The highest position given (read in the index): a stamped row deleted meanwhile by retention
    // must not have its position given again.
    highest: `SELECT COALESCE(MAX(feed_position), 0) AS top FROM ${t} WHERE state = 'delivered'`,
    setCounter: `UPDATE ${controls} SET value = ?, updated_at = ? WHERE name = '${FEED_COUNTER}'`,
    // Values: after, limit (and first the panel).
    feed: `${feed} WHERE state = 'delivered' AND feed_position > ? ORDER BY feed_position LIMIT ?`,
    feedOfPanel: `${feed} WHERE panel = ? AND feed_position > ? ORDER BY feed_position LIMIT ?`,
    feedOfUnassigned: `${feed} WHERE state = 'delivered' AND CHAR_LENGTH(panel) = 0 AND feed_position > ? ORDER BY feed_position LIMIT ?`,
  };
}

type InTransaction = <T>(work: (connection: MysqlQueryable) => Promise<T>) => Promise<T>;

export interface MysqlOperationsContext {
  names: MysqlTableNames;
  /** The host's now on the lease clock (mysql-sql.ts, `now`): takes one value. */
  now: string;
  /** A statement on any connection of the pool. */
  query(text: string, values: readonly MysqlValue[]): Promise<MysqlResult>;
  inTransaction: InTransaction;
}

const answerOf = (result: CancelAnswer['result'], row: Row): CancelAnswer => ({
  result,
  id: Number(row.id),
  state: row.state as OutboxState,
  ...(result === 'in-flight' ? { leaseExpiresAt: num(row.lease_expires_at) } : {}),
  ...(result === 'not-pending' ? { releaseId: num(row.release_id) } : {}),
});

export function createMysqlOperations({ names, now, query, inTransaction }: MysqlOperationsContext): Required<OperatorStore> {
  const sql = mysqlOperationStatements(names, now);

  /** Under the row's lock: cancel it if pending and free, else say why not. */
  async function cancelRow(connection: MysqlQueryable, found: Row, { nowMs, note }: CancelRequest): Promise<CancelAnswer> {
    if (found.state !== 'pending') return answerOf('not-pending', found);
    if (Number(found.free) !== 1) return answerOf('in-flight', found);
    await run(connection, sql.cancel, [fitText(note, LAST_ERROR_BYTES), nowMs, Number(found.id)]);
    return { result: 'cancelled', id: Number(found.id), state: 'cancelled' };
  }

  /** Gives positions to waiting deliveries (enough for a page of `limit` after `after`), under the counter's lock. */
  const stamp = (after: number, limit: number) =>
    inTransaction(async (connection) => {
      await run(connection, sql.lockCounter, [Date.now()]);
      const base = Number(rowsOf(await run(connection, sql.counter))[0]?.value ?? 0);
      let counter = base;
      // About as many as the page needs (a backlog is given positions page by page, so no call
      // waits for all of it), or every waiting delivery if fewer: the work of one call is bounded.
      for (let given = 0; given < Math.max(limit, STAMP_LEAST); ) {
        const batch = Math.min(STAMP_BATCH, Math.max(STAMP_LEAST, after + limit - counter));
        const stamped = headerOf(await run(connection, sql.stamp, [rowCount(batch), counter])).affectedRows;
        counter = Math.max(counter, Number(rowsOf(await run(connection, sql.highest))[0]?.top ?? 0));
        given += stamped;
        if (stamped < batch || counter >= after + limit) break;
      }
      if (counter !== base) await run(connection, sql.setCounter, [String(counter), Date.now()]);
    });

  return {
    cancel: (request) =>
      inTransaction(async (connection) => {
        const { id, panel, track, nowMs } = request;
        if (id !== undefined) {
          const [found] = rowsOf(await run(connection, sql.byId, [nowMs, id]));
          if (found === undefined || (panel !== undefined && found.panel !== panel)) return { result: 'not-found', id: undefined, state: undefined };
          return cancelRow(connection, found, request);
        }
        if (panel === undefined || track === undefined) throw new TypeError('panel-license-guard: cancel needs an `id`, or a `panel` and a `track`.');
        const [pending] = rowsOf(
          await run(connection, panel === '' ? sql.pendingOfUnassignedTrack : sql.pendingOfTrack, panel === '' ? [nowMs, track] : [nowMs, panel, track]),
        );
        if (pending !== undefined) return cancelRow(connection, pending, request);
        const [newest] = rowsOf(await run(connection, panel === '' ? sql.newestOfUnassignedTrack : sql.newestOfTrack, panel === '' ? [track] : [panel, track]));
        return newest === undefined ? { result: 'not-found', id: undefined, state: undefined } : answerOf('not-pending', newest);
      }),
    async controls() {
      const values: Record<string, string> = {};
      for (const r of rowsOf(await query(sql.controls, []))) values[String(r.name)] = String(r.value);
      return values;
    },
    async setControl(name, value, nowMs) {
      // The limits every store applies, said the same way (the columns hold exactly these).
      checkControl(name, value);
      if (value === undefined) await query(sql.removeControl, [name]);
      else await query(sql.setControl, [name, value, nowMs]);
    },
    async deliveries({ after, limit, panel }: FeedRequest): Promise<FeedRow[]> {
      // Nothing waits for a position: no lock taken (a delivery committed after this look gets
      // its position, above every position given, on a later call).
      if (rowsOf(await query(sql.unstamped, [])).length > 0) await stamp(after, limit);
      const read =
        panel === undefined
          ? query(sql.feed, [after, rowCount(limit)])
          : panel === ''
            ? query(sql.feedOfUnassigned, [after, rowCount(limit)])
            : query(sql.feedOfPanel, [panel, after, rowCount(limit)]);
      return rowsOf(await read).map(feedRow);
    },
  };
}

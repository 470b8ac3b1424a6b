// MySQL and MariaDB: the writes an enqueue makes in a caller's transaction, each checking in the statement itself that
// it runs inside that transaction. An enqueue left running when its library ends the transaction
// (not awaited in the callback) would otherwise write on its own (autocommit) after the ROLLBACK,
// or inside the next transaction opened on that connection: the release would go out although
// the caller's transaction rolled back. Checked between statements it could still slip in, since
// the library's ROLLBACK may reach the connection between any two of them.
import type { MysqlStatements } from './mysql-sql.js';

/**
 * MySQL and MariaDB have no id of the transaction a statement runs in, and `@@in_transaction`
 * is true in the next user's transaction on a pooled connection as well. So the enqueue writes a
 * marker row of its own first (its random token, in the tracks table; the insert's answer says
 * it went into an open transaction), and each write requires that marker: a row no other transaction can see while the caller's is
 * open, gone if it rolled back. A write that runs after a ROLLBACK, on its own or in the next
 * transaction on that connection, finds no marker and writes nothing, takes no lock and locks no
 * row; the enqueue sees it (no row inserted, none updated under the track's lock). The chain's last enqueue deletes the marker.
 * Values of each guarded write: its own, then the marker's panel and token.
 */
export interface MysqlGuardedWrites {
  insertPending: string;
  replacePayload: string;
  /** The track's lock, and the locking reads under it: none taken in another transaction. */
  lockTrack: string;
  newestPending: string;
  latestDelivered: string;
  newestDead: string;
  /** Writes the marker (values: MARKER_PANEL, token). */
  mark: string;
  /** Deletes it again (the same values). */
  unmark: string;
  /** Reads it: a row while the transaction that wrote it is still the connection's (the same values). */
  marked: string;
}

/** The marker rows' panel: never a panel of rows (those are in the outbox table), only of lock rows. */
export const MARKER_PANEL = 'panel-license-guard:enqueue-marker';

export function mysqlGuardedWrites(sql: MysqlStatements, tracks: string): MysqlGuardedWrites {
  const marked = `EXISTS (SELECT 1 FROM ${tracks} WHERE panel = ? AND remote_track_id = ?)`;
  const insertPending = sql.insertPending.replace(/VALUES \(([\s\S]*)\)\s*$/, (_match, values: string) => `SELECT ${values} FROM DUAL WHERE ${marked}`);
  if (insertPending === sql.insertPending) throw new Error('panel-license-guard: cannot guard insertPending: its SQL changed.');
  // A locking read guarded too: in a transaction without the marker it returns nothing, and
  // READ COMMITTED lets go of the rows it looked at (the caller's transaction must be READ
  // COMMITTED, or take them under the track's lock, which needs the marker itself).
  const guardedRead = (statement: string, before: RegExp): string => {
    const text = statement.replace(before, (found) => ` AND ${marked} ${found.trimStart()}`);
    if (text === statement) throw new Error('panel-license-guard: cannot guard a locking read: its SQL changed.');
    return text;
  };
  const lockTrack = sql.lockTrack.replace(/VALUES \(\?, \?\)/, `SELECT ?, ? FROM DUAL WHERE ${marked}`);
  if (lockTrack === sql.lockTrack) throw new Error('panel-license-guard: cannot guard lockTrack: its SQL changed.');
  return {
    insertPending,
    replacePayload: `${sql.replacePayload} AND ${marked}`,
    lockTrack,
    newestPending: guardedRead(sql.newestPending, /\s+FOR UPDATE$/),
    latestDelivered: guardedRead(sql.latestDelivered, /\s+ORDER BY[\s\S]*$/),
    newestDead: guardedRead(sql.newestDead, /\s+ORDER BY[\s\S]*$/),
    mark: `INSERT INTO ${tracks} (panel, remote_track_id) VALUES (?, ?)`,
    unmark: `DELETE FROM ${tracks} WHERE panel = ? AND remote_track_id = ?`,
    marked: `SELECT 1 FROM ${tracks} WHERE panel = ? AND remote_track_id = ?`,
  };
}

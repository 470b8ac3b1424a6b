// Enqueueing on MySQL/MariaDB: in a transaction of its own, or inside the caller's open
// transaction (the transactional outbox). Either way under the track's lock, reading what is
// committed now, so hosts and transactions apply the de-duplication rules one after another.
import { randomBytes } from 'node:crypto';
import { enqueueResult, needsNewestDead, planEnqueue } from '../../rules.js';
import type { EnqueueResult, NewOutboxRow } from '../../store.js';
import { type CallerChain, callerChains } from '../shared/caller-chains.js';
import { isStatementsOnly } from '../shared/statement-transaction.js';
import { afterLastStatement, endedEnqueue, endedUnder, OUTSIDE_TRANSACTION, type TransactionWatch, UNTOLD, watched } from '../shared/transaction-watch.js';
import { connectionTurns, trackTurns } from '../shared/turns.js';
import { MARKER_PANEL, mysqlGuardedWrites } from './mysql-caller-guards.js';
import { failedIn, inTransactionFlagOf, isOpen, TRANSACTION_STATUS } from './mysql-caller-status.js';
import { run } from './mysql-params.js';
import { headerOf, type MysqlQueryable, type MysqlTableNames, privilegeError, rowsOf, TABLE_EXISTS } from './mysql-schema.js';
import { type MysqlStatements, num, orNull } from './mysql-sql.js';

export interface MysqlEnqueueContext {
  names: MysqlTableNames;
  sql: MysqlStatements;
  ready(): Promise<void>;
  inTransaction<T>(work: (connection: MysqlQueryable) => Promise<T>): Promise<T>;
}

export interface MysqlEnqueuer {
  alone(row: NewOutboxRow, now: number): Promise<EnqueueResult>;
  /** `watch`: what the caller's library tells of its transaction's end (transaction-watch.ts). */
  inCallerTransaction(connection: MysqlQueryable, row: NewOutboxRow, now: number, watch: TransactionWatch, turns: object): Promise<EnqueueResult>;
  /** The tables are known to exist (after migrate()): callers' transactions need not ask. */
  tableExists(): void;
  /** Resolves once no enqueue of this process is in progress. */
  idle(): Promise<void>;
}

/**
 * Through a library's `query`, what a write did is read back with a statement of its own, never
 * from the answer (statement-transaction.ts: the caller's statements may come between).
 */
const readBack = (connection: MysqlQueryable): boolean => isStatementsOnly(connection);

export function createMysqlEnqueuer({ names, sql, ready, inTransaction }: Omit<MysqlEnqueueContext, 'pool'>): MysqlEnqueuer {
  let tableKnown = false;
  const onConnection = connectionTurns<object>();
  const chains = callerChains<object>();
  const guarded = mysqlGuardedWrites(sql, names.tracks);
  const inTransactionFlag = inTransactionFlagOf();
  /** Transaction objects (through `query`) already proved to be open transactions. */
  const proven = new WeakSet<object>();

  /** The rules, applied to what is committed now, under the track's lock (held to the transaction's end). */
  async function enqueueWith(connection: MysqlQueryable, row: NewOutboxRow, now: number, marker?: readonly [string, string]): Promise<EnqueueResult> {
    const writes = marker && guarded;
    const { panel, remoteTrackId: track } = row;
    if (track === undefined) return enqueueResult({ action: 'insert' }, await insertPending(connection, row, now, marker));
    // In a caller's transaction, the lock and the locking reads require the marker too: none is
    // taken in the next request's transaction on the connection (mysql-caller-guards.ts).
    const guard = marker ?? [];
    await run(connection, writes ? writes.lockTrack : sql.lockTrack, [panel, track, ...guard]);
    const [pending] = rowsOf(await run(connection, writes ? writes.newestPending : sql.newestPending, [panel, track, ...guard]));
    const [delivered] = rowsOf(await run(connection, writes ? writes.latestDelivered : sql.latestDelivered, [panel, track, ...guard]));
    const newestPending = pending && { id: Number(pending.id), contentHash: pending.content_hash as string };
    const latestDelivered = delivered && {
      id: Number(delivered.id),
      contentHash: delivered.content_hash as string,
      releaseId: num(delivered.release_id),
      historyOf: num(delivered.history_of),
    };
    const dead = needsNewestDead(row, newestPending, latestDelivered)
      ? rowsOf(await run(connection, writes ? writes.newestDead : sql.newestDead, [panel, track, ...guard]))[0]
      : undefined;
    const plan = planEnqueue(row, newestPending, latestDelivered, num(dead?.id));
    if (plan.action === 'replace-pending') {
      const values = [row.body, row.contentHash, now, orNull(row.traceContext), plan.id, ...(marker ?? [])];
      const replaced = headerOf(await run(connection, writes?.replacePayload ?? sql.replacePayload, values));
      // Under the track's lock the pending row is there: only the guard can leave it as it was.
      const changed = readBack(connection)
        ? rowsOf(await run(connection, sql.replacedRow, [plan.id, row.contentHash, now])).length
        : Number(replaced.affectedRows);
      if (writes && changed === 0) throw new Error(OUTSIDE_TRANSACTION);
    }
    return enqueueResult(plan, plan.action === 'insert' ? await insertPending(connection, row, now, marker) : undefined);
  }

  /** `marker`: in a caller's transaction, the enqueue's marker row (mysql-caller-guards.ts), which the insert requires. */
  async function insertPending(connection: MysqlQueryable, row: NewOutboxRow, now: number, marker?: readonly [string, string]): Promise<number> {
    const values = [row.panel, orNull(row.remoteTrackId), row.body, row.contentHash, now, now, now, orNull(row.traceContext), ...(marker ?? [])];
    const inserted = headerOf(await run(connection, marker ? guarded.insertPending : sql.insertPending, values));
    const id = readBack(connection)
      ? Number(rowsOf(await run(connection, sql.insertedRow, [row.panel, orNull(row.remoteTrackId), row.contentHash, now]))[0]?.id ?? 0)
      : Number(inserted.insertId);
    if (marker && id === 0) throw new Error(OUTSIDE_TRANSACTION);
    return id;
  }

  /** Whether the tables exist, asked through the caller's connection (a CREATE there would commit their transaction). */
  async function assertTableThrough(connection: MysqlQueryable): Promise<void> {
    if (tableKnown) return;
    const found = rowsOf(await run(connection, TABLE_EXISTS, [names.database ?? null, names.migrationsName]));
    if (Number(found[0]?.n) === 0)
      throw new Error(
        `panel-license-guard: the outbox table ${names.shown} does not exist yet; call \`await store.migrate()\` at start-up, before enqueuing in a transaction (creating it inside yours would commit it: MySQL commits before any CREATE).`,
      );
    tableKnown = true;
  }

  /**
   * In the caller's transaction. No savepoint is held across the enqueue: releasing it would also
   * release every savepoint the caller made meanwhile (a nested transaction of its query builder
   * run while the enqueue is in flight), and rolling back to it would undo the caller's statements
   * sent meanwhile. A statement of ours that fails is undone alone by the server (the caller's
   * transaction goes on), but for a deadlock, which rolls back the whole transaction: the call
   * rejects saying which. A connection outside START TRANSACTION is refused (each statement would
   * commit on its own, outside the caller's work).
   */
  async function enqueueInCallerTransaction(
    caller: MysqlQueryable,
    row: NewOutboxRow,
    now: number,
    watch: TransactionWatch,
    chain: CallerChain,
    turns: object,
  ): Promise<EnqueueResult> {
    // An earlier enqueue of this chain found the caller's transaction ended: this one's turn came
    // after it, on a connection that may be the next request's now.
    if (chain.ended !== undefined) return endedEnqueue<EnqueueResult>(watch, undefined, chain.ended);
    // Each statement first asks the caller's library whether its transaction is still open.
    const connection = watched(caller, watch);
    let written: EnqueueResult | undefined;
    // The chain's marker: proved by its first enqueue, required by every later one's writes.
    const marker = chain.marker ?? ([MARKER_PANEL, randomBytes(16).toString('hex')] as const);
    try {
      await assertTableThrough(connection);
      if (chain.marker === undefined) await markInTransaction(connection, marker, chain, turns);
      written = await enqueueWith(connection, row, now, marker);
      // The last statement says whether the transaction is still the caller's: the chain's last
      // enqueue takes the marker away (none deleted: it was gone), and with a library that tells
      // nothing of the transaction's end, every other one looks for it.
      if (chain.waiting === 1) {
        chain.marker = undefined;
        if (readBack(connection)) {
          if (rowsOf(await run(connection, guarded.marked, marker)).length === 0) throw new Error(OUTSIDE_TRANSACTION);
          await run(connection, guarded.unmark, marker);
        } else if (Number(headerOf(await run(connection, guarded.unmark, marker)).affectedRows) === 0) throw new Error(OUTSIDE_TRANSACTION);
      } else if (watch === UNTOLD && rowsOf(await run(connection, guarded.marked, marker)).length === 0) throw new Error(OUTSIDE_TRANSACTION);
    } catch (error) {
      if (endedUnder(error, watch)) {
        chain.ended = error;
        // A marker written after the end (on its own, or in the next transaction on the
        // connection) is taken away again where it can be.
        await run(connection, guarded.unmark, marker).catch(() => {});
        return endedEnqueue(watch, written, error);
      }
      throw await failedIn(caller, privilegeError(names, error));
    }
    return afterLastStatement(watch, written as EnqueueResult);
  }

  /**
   * Writes the chain's marker, right after asking whether a transaction is open: the two go out
   * together, so nothing the app sends comes between them. With autocommit off, the insert itself
   * would open a transaction (its answer then says "in a transaction" after the caller's ROLLBACK
   * too): a statement that touches no table, sent first, says whether the caller's is still open.
   * A marker written outside the caller's transaction is taken away again, and the connection
   * refused.
   */
  async function markInTransaction(connection: MysqlQueryable, marker: readonly [string, string], chain: CallerChain, turns: object): Promise<void> {
    if (isStatementsOnly(connection)) return markThroughQuery(connection, marker, chain, turns);
    const asked = connection.query(TRANSACTION_STATUS);
    const marked = run(connection, guarded.mark, marker);
    asked.catch(() => {});
    marked.catch(() => {});
    let open: boolean;
    try {
      open = isOpen(headerOf(await asked).serverStatus) && isOpen(headerOf(await marked).serverStatus);
    } catch (error) {
      // The marker may have gone in although the question failed: take it away where it can be.
      await marked.then(() => run(connection, guarded.unmark, marker)).catch(() => {});
      throw error;
    }
    if (!open) {
      await run(connection, guarded.unmark, marker).catch(() => {});
      chain.ended = new Error('no open transaction');
      throw new TypeError(
        'panel-license-guard: `transaction` is a connection with no open transaction: call `await connection.beginTransaction()` (or START TRANSACTION) first, so the release commits or rolls back with your rows. Nothing was stored. (With autocommit off, a transaction only begins with its first statement that reads or writes a table; begin it explicitly. If it had one, it already ended: an enqueue not awaited inside it?)',
      );
    }
    chain.marker = marker;
  }

  /**
   * Through a library's `query`, whose answers carry no server status: MariaDB's
   * `@@in_transaction` says whether a transaction is open before the marker goes in (with
   * autocommit off, the insert would open one of its own); then the marker must be invisible from
   * the store's own connection — a marker another session can read was committed on its own, by a
   * `query` that runs outside any transaction.
   */
  async function markThroughQuery(connection: MysqlQueryable, marker: readonly [string, string], chain: CallerChain, turns: object): Promise<void> {
    let open = (await inTransactionFlag(connection)) !== false;
    if (open) {
      await run(connection, guarded.mark, marker);
      // Once per transaction object: a later proof would need a connection of the store's pool,
      // which enqueues waiting for this transaction's track locks may all hold meanwhile.
      if (!proven.has(turns)) open = (await inTransaction(async (own) => rowsOf(await run(own, guarded.marked, marker)))).length === 0;
      if (open) proven.add(turns);
    }
    if (open) {
      chain.marker = marker;
      return;
    }
    await run(connection, guarded.unmark, marker).catch(() => {});
    chain.ended = new Error('no open transaction');
    throw new TypeError(
      'panel-license-guard: `query` ran its statements outside any open transaction (each committed on its own): pass the transaction your callback was given (`tx`), and a `query` that runs statements on it. Nothing was stored. (If it had one, it already ended: an enqueue not awaited inside it?)',
    );
  }

  /** Leaves the chain; its last enqueue takes a marker still there away (after a refusal; in the caller's transaction, if it still can). */
  async function leaveChain(caller: MysqlQueryable, turns: object, chain: CallerChain, watch: TransactionWatch): Promise<void> {
    if (!chains.leave(turns, chain) || chain.marker === undefined || chain.ended !== undefined) return;
    await run(watched(caller, watch), guarded.unmark, chain.marker).catch(() => {});
  }

  // Enqueues of one track take turns in this process, so they apply in call order as in the other
  // stores (between hosts, the track's lock orders them). Different tracks go side by side.
  const byTrack = trackTurns();
  function enqueueAlone(row: NewOutboxRow, now: number): Promise<EnqueueResult> {
    const run = () => ready().then(() => inTransaction((connection) => enqueueWith(connection, row, now)));
    return row.remoteTrackId === undefined ? run() : byTrack.run(`${row.panel}\n${row.remoteTrackId}`, run);
  }

  return {
    alone: enqueueAlone,
    // Enqueues on one connection take turns: their statements would interleave on it.
    inCallerTransaction(connection, row, now, watch, turns) {
      // The chain is joined now, at call time: a turn that comes after the caller's transaction
      // ended must not prove the next request's transaction instead (caller-chains.ts).
      const chain = chains.join(turns);
      return onConnection(turns, () =>
        enqueueInCallerTransaction(connection, row, now, watch, chain, turns).finally(() => leaveChain(connection, turns, chain, watch)),
      );
    },
    tableExists() {
      tableKnown = true;
    },
    async idle() {
      await byTrack.idle();
    },
  };
}

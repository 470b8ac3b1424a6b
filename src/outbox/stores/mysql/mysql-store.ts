// The outbox store on MySQL 8 / MariaDB 10.6+: shared by any number of hosts, claims with FOR
// UPDATE SKIP LOCKED, and enqueue inside the caller's own transaction (the transactional outbox).
import { OptionProblems, optionError, optionNames, rejectUnknownOptions, shown } from '../../../options.js';
import { ADOPTION_SUPERSEDED, mayBeRecordedHistory, planSettle, type RowUpdate } from '../../rules.js';
import type { EnqueueOptions, OutboxState, OutboxStore, SettleRequest } from '../../store.js';
import { onCallerTransaction } from '../shared/caller-transaction.js';
import { settleEach } from '../shared/settle-each.js';
import { explainedStore } from '../shared/sql-work.js';
import { createMysqlClaims } from './mysql-claims.js';
import { createMysqlEnqueuer } from './mysql-enqueue.js';
import { databaseFailure } from './mysql-errors.js';
import { createMysqlOperations } from './mysql-operations.js';
import { fitText, MAX_LIST, type MysqlValue, padded, rowCount, run } from './mysql-params.js';
import {
  headerOf,
  inTransaction as inTransactionOn,
  isRetriable,
  type MysqlPool,
  type MysqlQueryable,
  migrate,
  mysqlTableNames,
  privilegeError,
  rowsOf,
  validIdentifier,
  withConnection,
} from './mysql-schema.js';
import { mysqlStatements, num, orNull, panelScope, storedRow } from './mysql-sql.js';

export interface MysqlOutboxStoreOptions {
  /** A `mysql2/promise` pool (`mysql.createPool(...)`). The store borrows connections; it never ends the pool. */
  pool: MysqlPool;
  /** Database (schema) of the tables. @default the pool's database */
  database?: string;
  /** Name of the table (with `<table>_tracks`, `<table>_controls` and `<table>_migrations` beside it). @default 'release_outbox' */
  table?: string;
  /**
   * The clock leases and due times are reckoned on. `'database'`: the server's, the one clock all
   * hosts share. `'outbox'`: the time the outbox passes (its `now` option), for tests that
   * simulate time. @default 'database'
   */
  leaseClock?: 'database' | 'outbox';
}

/** An OutboxStore on MySQL or MariaDB; `migrate()` creates its tables (every other call does on first use too). */
export interface MysqlOutboxStore extends OutboxStore {
  /** Creates the tables when missing. Call it at start-up when you enqueue inside your own transactions. */
  migrate(): Promise<void>;
}

const DUPLICATE_KEY = 1062;
/** What `last_error` (a TEXT) holds, in bytes of UTF-8. */
const LAST_ERROR_BYTES = 65_535;
const TABLE_RULE = 'must be a lower-case SQL name (letters, digits, _; at most 50) not ending in "_migrations", "_tracks" or "_controls"';

export function mysqlOutboxStore(options: MysqlOutboxStoreOptions): MysqlOutboxStore {
  if (typeof options !== 'object' || options === null)
    throw optionError('options', 'must be an object', "Pass { pool: mysql.createPool(...) } from 'mysql2/promise'.");
  const problems = new OptionProblems();
  rejectUnknownOptions(
    'mysqlOutboxStore',
    options,
    optionNames<MysqlOutboxStoreOptions>({ pool: true, database: true, table: true, leaseClock: true }),
    problems,
  );
  const leaseClock = options.leaseClock ?? 'database';
  if (leaseClock !== 'database' && leaseClock !== 'outbox')
    problems.add(optionError('leaseClock', `must be 'database' or 'outbox', received ${shown(leaseClock)}`, "Leave it out to use the database's clock."));
  const { pool } = options;
  if (
    typeof pool?.getConnection !== 'function' ||
    typeof pool.query !== 'function' ||
    typeof pool.execute !== 'function' ||
    typeof (pool as { then?: unknown }).then === 'function'
  )
    problems.add(
      optionError('pool', 'is not a mysql2/promise pool', "Pass `mysql.createPool({ uri })` with `import mysql from 'mysql2/promise'` (npm install mysql2)."),
    );
  const table = options.table ?? 'release_outbox';
  if (typeof table !== 'string' || !validIdentifier(table) || table.length > 50 || /_(migrations|tracks|controls)$/.test(table))
    problems.add(optionError('table', TABLE_RULE, 'Pass e.g. "release_outbox".'));
  if (options.database !== undefined && (typeof options.database !== 'string' || !validIdentifier(options.database)))
    problems.add(optionError('database', 'must be a lower-case SQL name (letters, digits, _; at most 64)', "Leave it out to use the pool's database."));
  problems.throwIfAny('mysqlOutboxStore');

  const names = mysqlTableNames(options.database, table);
  const sql = mysqlStatements(names, leaseClock);
  let migrated: Promise<void> | undefined;
  const ready = () => {
    migrated ??= migrate(pool, names).catch((error: unknown) => {
      migrated = undefined; // try again on the next call (the database may be back, or granted)
      throw error;
    });
    return migrated;
  };
  const inTransaction = async <T>(work: (connection: MysqlQueryable) => Promise<T>) => {
    await ready();
    return inTransactionOn(pool, work);
  };
  const enqueuer = createMysqlEnqueuer({ names, sql, ready, inTransaction });
  const claims = createMysqlClaims(sql, inTransaction);
  /** A statement on any of the pool's connections, its values apart from its text. */
  const query = async (text: string, values: readonly MysqlValue[]) => {
    await ready();
    // On a connection of its own (as pool.execute() takes one), checked like a transaction's.
    return withConnection(pool, (connection) => run(connection, text, values));
  };

  const updateValues = (update: RowUpdate, nowMs: number, id: number): MysqlValue[] => {
    const { state, attempts, nextAttemptAt, lastError, releaseId, deliveredAt, leaseOwner } = update;
    const next = Number.isNaN(nextAttemptAt) ? null : nextAttemptAt;
    const error = lastError === undefined ? null : fitText(lastError, LAST_ERROR_BYTES);
    return [state, attempts, next, nowMs, error, orNull(releaseId), orNull(deliveredAt), state, orNull(leaseOwner), nowMs, id];
  };

  /** The common case in one statement: the row is as this worker claimed it. Otherwise under the track's lock. */
  async function settle(...[claim, owner, outcome, nowMs]: Parameters<OutboxStore['settle']>) {
    const asClaimed = planSettle(
      { state: 'pending', contentHash: claim.contentHash, leaseOwner: owner, nextAttemptAt: Number.NaN, releaseId: undefined },
      claim,
      owner,
      outcome,
      nowMs,
    );
    if (asClaimed.update && !asClaimed.history) {
      const values = [...updateValues(asClaimed.update, nowMs, claim.id), claim.contentHash, owner];
      const applied = await query(sql.settleAsClaimed, values);
      if (headerOf(applied).affectedRows === 1) return asClaimed.result;
    }
    return inTransaction(async (connection) => {
      if (claim.remoteTrackId !== undefined) await run(connection, sql.lockTrack, [claim.panel, claim.remoteTrackId]);
      const [current] = rowsOf(await run(connection, sql.snapshot, [claim.id]));
      const snapshot = current && {
        state: current.state as OutboxState,
        contentHash: current.content_hash as string,
        leaseOwner: (current.lease_owner as string | null) ?? undefined,
        nextAttemptAt: Number(current.next_attempt_at),
        releaseId: num(current.release_id),
      };
      const recorded =
        mayBeRecordedHistory(snapshot, claim, owner, outcome) &&
        rowsOf(
          await run(connection, sql.recordedHistory, [claim.panel, orNull(claim.remoteTrackId), claim.id, claim.contentHash, owner, orNull(outcome.releaseId)]),
        ).length > 0;
      const plan = planSettle(snapshot, claim, owner, outcome, nowMs, recorded);
      if (plan.history) {
        const { body, contentHash, attempts, releaseId } = plan.history;
        const values = [claim.panel, orNull(claim.remoteTrackId), body, contentHash, attempts, nowMs, orNull(releaseId), claim.id, nowMs, nowMs, nowMs, owner];
        await run(connection, sql.insertDelivered, values);
      }
      if (plan.update) await run(connection, sql.settle, updateValues(plan.update, nowMs, claim.id));
      return plan.result;
    });
  }

  const store: MysqlOutboxStore = {
    migrate: async () => {
      await ready();
      enqueuer.tableExists();
    },
    enqueue(row, nowMs, enqueueOptions?: EnqueueOptions) {
      const transaction = enqueueOptions?.transaction;
      if (transaction === undefined) return enqueuer.alone(row, nowMs);
      return onCallerTransaction(
        transaction,
        'mysql',
        (connection, watch, turns) => enqueuer.inCallerTransaction(connection, row, nowMs, watch, turns),
        enqueueOptions?.query,
      );
    },
    ...claims,
    ...createMysqlOperations({ names, now: sql.now, query, inTransaction }),
    settle,
    settleMany: (settles: readonly SettleRequest[], owner: string) => settleEach(settles, ({ claim, outcome, nowMs }) => settle(claim, owner, outcome, nowMs)),
    async recheck(held) {
      if (held.length === 0) return [];
      // Padded to a few shapes with copies of the last row (the same answer, few prepared statements).
      const rows = padded(
        held.map((_, index) => index),
        0,
      ).map((index) => held[index] as (typeof held)[number]);
      const values = [...rows.map(({ id }) => id), ...rows.flatMap(({ id, contentHash }) => [id, contentHash])];
      return rowsOf(await query(sql.recheck(rows.length), values)).map((r) => ({
        id: Number(r.id),
        state: r.state as OutboxState,
        body: r.body as string,
        contentHash: r.content_hash as string,
      }));
    },
    async counts(scope) {
      const counts: Record<OutboxState, number> = { pending: 0, delivered: 0, dead: 0, cancelled: 0 };
      for (const r of rowsOf(await query(sql.counts, panelScope(scope?.panel)))) counts[r.state as OutboxState] = Number(r.n);
      return counts;
    },
    async oldestPending(scope) {
      return num(rowsOf(await query(sql.oldestPending, panelScope(scope?.panel)))[0]?.at);
    },
    async list({ state, limit, id, panel, track, afterId }) {
      const pair = (value: string | number | undefined) => [orNull(value), orNull(value)];
      const values = [...pair(state), ...pair(id), ...panelScope(panel), ...pair(track), ...pair(afterId), rowCount(limit)];
      return rowsOf(await query(sql.list, values)).map(storedRow);
    },
    async panelCounts(limit) {
      return rowsOf(await query(sql.panelCounts, [rowCount(limit)])).map((r) => ({
        panel: r.panel as string,
        pending: Number(r.pending),
        dead: Number(r.dead),
        oldestPendingAt: num(r.oldest_pending_at),
      }));
    },
    adoptUnassigned: (panel, nowMs) =>
      inTransaction(async (connection) => {
        const superseded = rowsOf(await run(connection, sql.supersededUnassigned, [panel])).map((r) => Number(r.id));
        for (let start = 0; start < superseded.length; start += MAX_LIST) {
          const ids = padded(superseded.slice(start, start + MAX_LIST), 0);
          await run(connection, sql.markSuperseded(ids.length), [ADOPTION_SUPERSEDED, nowMs, ...ids]);
        }
        return headerOf(await run(connection, sql.adopt, [panel])).affectedRows;
      }),
    async requeueDead(id, nowMs, scope) {
      let requeued = 0;
      for (const dead of rowsOf(await query(sql.deadRows, [orNull(id), orNull(id), ...panelScope(scope?.panel)]))) {
        const track = dead.remote_track_id as string | null;
        requeued += await inTransaction(async (connection) => {
          if (track !== null) {
            await run(connection, sql.lockTrack, [dead.panel as string, track]);
            // rules.ts, mayRequeue: a newer row of the track (other than this row's own history) keeps it dead.
            const newer = await run(connection, sql.newerOfTrack, [dead.panel as string, track, Number(dead.id), Number(dead.id)]);
            if (rowsOf(newer).length > 0) return 0;
          }
          return headerOf(await run(connection, sql.requeue, [nowMs, nowMs, Number(dead.id)])).affectedRows;
        }).catch((error: unknown) => {
          // A pending row of the track was committed meanwhile: that newer content wins.
          if (Number((error as { errno?: unknown }).errno) === DUPLICATE_KEY) return 0;
          throw error;
        });
      }
      return requeued;
    },
    async prune({ deliveredBefore, deadBefore, feedHold, afterId, limit }) {
      // Without DELETE on the table, say which privilege is missing (retention runs every hour).
      const range = rowsOf(await query(sql.pruneRange, [afterId, rowCount(limit)]))[0];
      const [lastId, highestId] = [num(range?.last_id), num(range?.highest_id)];
      if (lastId === undefined) return { deleted: 0, lastId, highestId };
      const hold = [orNull(feedHold), orNull(feedHold)];
      const found = rowsOf(await query(sql.prunable, [afterId, lastId, deadBefore, deliveredBefore, ...hold])).map((r) => Number(r.id));
      if (found.length === 0) return { deleted: 0, lastId, highestId };
      const ids = padded(found, 0);
      const deleted = await run(pool, sql.prune(ids.length), [...ids, deadBefore, deliveredBefore, ...hold]).catch((error: unknown) =>
        Promise.reject(privilegeError(names, error)),
      );
      return { deleted: headerOf(deleted).affectedRows, lastId, highestId };
    },
    async close() {
      // The pool is the caller's: ending it here would break their other queries.
      await enqueuer.idle();
    },
  };
  // A deadlock or lock wait passes through as it is: the callers that meet one try again.
  return explainedStore(store, (error, work) => (isRetriable(error) ? error : databaseFailure(error, work, pool, names.shown)));
}

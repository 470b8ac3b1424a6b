// Enqueueing on MySQL/MariaDB: in a transaction of its own, or inside the caller's open
// transaction (the transactional outbox). Either way under the track's lock, reading what is
// committed now, so hosts and transactions apply the de-duplication rules one after another.
import { IN_TRANSACTION, undoToSavepoint } from './caller-transaction.js';
import { run } from './mysql-params.js';
import { headerOf, type MysqlQueryable, type MysqlTableNames, rowsOf, TABLE_EXISTS } from './mysql-schema.js';
import { type MysqlStatements, num, orNull } from './mysql-sql.js';
import { enqueueResult, needsNewestDead, planEnqueue } from './rules.js';
import type { EnqueueResult, NewOutboxRow } from './store.js';
import { connectionTurns, trackTurns } from './turns.js';

export interface MysqlEnqueueContext {
  names: MysqlTableNames;
  sql: MysqlStatements;
  ready(): Promise<void>;
  inTransaction<T>(work: (connection: MysqlQueryable) => Promise<T>): Promise<T>;
}

export interface MysqlEnqueuer {
  alone(row: NewOutboxRow, now: number): Promise<EnqueueResult>;
  inCallerTransaction(connection: MysqlQueryable, row: NewOutboxRow, now: number): Promise<EnqueueResult>;
  /** The tables are known to exist (after migrate()): callers' transactions need not ask. */
  tableExists(): void;
  /** Resolves once no enqueue of this process is in progress. */
  idle(): Promise<void>;
}

export function createMysqlEnqueuer({ names, sql, ready, inTransaction }: Omit<MysqlEnqueueContext, 'pool'>): MysqlEnqueuer {
  let tableKnown = false;
  let savepoints = 0;
  const onConnection = connectionTurns<MysqlQueryable>();

  /** The rules, applied to what is committed now, under the track's lock (held to the transaction's end). */
  async function enqueueWith(connection: MysqlQueryable, row: NewOutboxRow, now: number): Promise<EnqueueResult> {
    const { panel, remoteTrackId: track } = row;
    if (track === undefined) return enqueueResult({ action: 'insert' }, await insertPending(connection, row, now));
    await run(connection, sql.lockTrack, [panel, track]);
    const [pending] = rowsOf(await run(connection, sql.newestPending, [panel, track]));
    const [delivered] = rowsOf(await run(connection, sql.latestDelivered, [panel, track]));
    const newestPending = pending && { id: Number(pending.id), contentHash: pending.content_hash as string };
    const latestDelivered = delivered && {
      id: Number(delivered.id),
      contentHash: delivered.content_hash as string,
      releaseId: num(delivered.release_id),
      historyOf: num(delivered.history_of),
    };
    const dead = needsNewestDead(row, newestPending, latestDelivered) ? rowsOf(await run(connection, sql.newestDead, [panel, track]))[0] : undefined;
    const plan = planEnqueue(row, newestPending, latestDelivered, num(dead?.id));
    if (plan.action === 'replace-pending') await run(connection, sql.replacePayload, [row.body, row.contentHash, now, plan.id]);
    return enqueueResult(plan, plan.action === 'insert' ? await insertPending(connection, row, now) : undefined);
  }

  async function insertPending(connection: MysqlQueryable, row: NewOutboxRow, now: number): Promise<number> {
    const values = [row.panel, orNull(row.remoteTrackId), row.body, row.contentHash, now, now, now];
    return Number(headerOf(await run(connection, sql.insertPending, values)).insertId);
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
   * In the caller's transaction, inside a savepoint of its own: if our statements fail, the
   * caller's transaction is left as it was (usable), and the call rejects. A connection outside
   * START TRANSACTION is refused (each statement would commit on its own, outside the caller's work).
   */
  async function enqueueInCallerTransaction(connection: MysqlQueryable, row: NewOutboxRow, now: number): Promise<EnqueueResult> {
    const savepoint = `panel_license_outbox_${++savepoints}`;
    let status: number | undefined;
    try {
      status = headerOf(await connection.query(`SAVEPOINT ${savepoint}`)).serverStatus;
    } catch (error) {
      throw new TypeError('panel-license-guard: `transaction` must be a mysql2 connection inside an open transaction (after START TRANSACTION).', {
        cause: error,
      });
    }
    // Through Kysely the answer carries no server status: its transaction is open (Kysely refuses
    // one that has ended). Whatever the session's sql_mode, the values below travel apart from the SQL.
    if (((status ?? IN_TRANSACTION) & IN_TRANSACTION) === 0)
      throw new TypeError(
        'panel-license-guard: `transaction` is a connection with no open transaction: call `await connection.beginTransaction()` (or START TRANSACTION) first, so the release commits or rolls back with your rows.',
      );
    try {
      await assertTableThrough(connection);
      const result = await enqueueWith(connection, row, now);
      await connection.query(`RELEASE SAVEPOINT ${savepoint}`);
      return result;
    } catch (error) {
      throw await undoToSavepoint(connection, savepoint, error);
    }
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
    inCallerTransaction: (connection, row, now) => onConnection(connection, () => enqueueInCallerTransaction(connection, row, now)),
    tableExists() {
      tableKnown = true;
    },
    async idle() {
      await byTrack.idle();
    },
  };
}

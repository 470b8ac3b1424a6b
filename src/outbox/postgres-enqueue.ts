// Enqueueing on PostgreSQL: on its own (each statement commits), or inside the caller's open
// transaction (the transactional outbox). No lock: the one-pending-row index arbitrates hosts.
import { undoToSavepoint } from './caller-transaction.js';
import { createFreshInserts } from './postgres-fresh-inserts.js';
import type { PgQueryable } from './postgres-schema.js';
import { num, orNull, type PgStoreContext } from './postgres-sql.js';
import { enqueueResult, planEnqueue } from './rules.js';
import type { EnqueueLease, EnqueueResult, NewOutboxRow } from './store.js';
import { connectionTurns, trackTurns } from './turns.js';

/** How often a read-then-write is retried when the track changed in between. */
const MAX_REREADS = 10;

export interface PostgresEnqueuer {
  /** `lease`: see EnqueueLease (taken only by the one-statement insert of a new track). */
  alone(row: NewOutboxRow, now: number, lease?: EnqueueLease): Promise<EnqueueResult>;
  inCallerTransaction(client: PgQueryable, row: NewOutboxRow, now: number): Promise<EnqueueResult>;
  /** The table is known to exist (after migrate()): callers' transactions need not ask. */
  tableExists(): void;
  /** Resolves once no enqueue of this process is in progress. */
  idle(): Promise<void>;
}

export function createPostgresEnqueuer({ pool, names, hot, ready }: PgStoreContext): PostgresEnqueuer {
  let tableKnown = false;
  let savepoints = 0;
  const onClient = connectionTurns<PgQueryable>();
  const freshInsert = createFreshInserts(pool, hot);

  /**
   * No lock and no transaction of its own: a new or changed track is one INSERT; otherwise read
   * the track's rows, apply the rules, write only if they still hold. A unique index allows one pending row per track, so when another host (or an
   * open transaction, once it commits) got there first, the insert does nothing and we read again.
   */
  async function enqueueWith(client: PgQueryable, row: NewOutboxRow, now: number, lease?: EnqueueLease): Promise<EnqueueResult> {
    const track = row.remoteTrackId;
    if (track === undefined) return enqueueResult({ action: 'insert' }, await insertPending(client, row, now));
    // On its own, with the other enqueues of this turn (one statement); in a caller's transaction, alone.
    const fresh =
      client === pool
        ? await freshInsert({ ...row, remoteTrackId: track }, now, lease)
        : num((await client.query(hot.insertIfNew, [track, row.body, row.contentHash, now, row.panel, null, null])).rows[0]?.id);
    if (fresh === undefined) return enqueueByRules(client, { ...row, remoteTrackId: track }, now);
    if (lease && client === pool) lease.taken(fresh);
    return enqueueResult({ action: 'insert' }, fresh);
  }

  /** Reads the track's rows, applies the rules and writes only if they still hold (no lock). */
  async function enqueueByRules(client: PgQueryable, row: NewOutboxRow & { remoteTrackId: string }, now: number): Promise<EnqueueResult> {
    const track = row.remoteTrackId;
    for (let round = 0; round < MAX_REREADS; round++) {
      const found = (await client.query(hot.trackRows, [track, row.panel])).rows[0];
      const plan = planEnqueue(
        row,
        found?.pending_id == null ? undefined : { id: Number(found.pending_id), contentHash: found.pending_hash as string },
        found?.delivered_id == null
          ? undefined
          : {
              id: Number(found.delivered_id),
              contentHash: found.delivered_hash as string,
              releaseId: num(found.release_id),
              historyOf: num(found.delivered_history_of),
            },
        num(found?.dead_id),
      );
      if (plan.action === 'replace-pending') {
        if ((await client.query(hot.replacePayload, [plan.id, row.body, row.contentHash, now])).rowCount === 1) return enqueueResult(plan, undefined);
        continue;
      }
      if (plan.action !== 'insert') return enqueueResult(plan, undefined);
      const inserted = await insertPending(client, row, now);
      if (inserted !== undefined) return enqueueResult(plan, inserted);
    }
    throw new Error(`panel-license-guard: track ${JSON.stringify(track)} kept changing while this release was enqueued (${MAX_REREADS} tries); try again.`);
  }

  async function insertPending(client: PgQueryable, row: NewOutboxRow, now: number): Promise<number | undefined> {
    return num((await client.query(hot.insertPending, [orNull(row.remoteTrackId), row.body, row.contentHash, now, row.panel])).rows[0]?.id);
  }

  /** Whether the table exists, asked through the caller's client (no second connection). */
  async function assertTableThrough(client: PgQueryable): Promise<void> {
    if (tableKnown) return;
    const found = await client.query('SELECT to_regclass($1) IS NOT NULL AS present', [names.table]);
    if (!found.rows[0]?.present)
      throw new Error(
        `panel-license-guard: the outbox table ${names.table} does not exist yet; call \`await store.migrate()\` at start-up, before enqueuing in a transaction.`,
      );
    tableKnown = true;
  }

  /**
   * In the caller's transaction, inside a savepoint of its own: if our statements fail, the
   * caller's transaction is left as it was (usable), and the call rejects. Enqueues on one client
   * take turns (their statements would interleave on its connection). A client outside BEGIN, or
   * in any isolation level but READ COMMITTED, is refused.
   */
  async function enqueueInCallerTransaction(client: PgQueryable, row: NewOutboxRow, now: number): Promise<EnqueueResult> {
    const savepoint = `panel_license_outbox_${++savepoints}`;
    try {
      await client.query(`SAVEPOINT ${savepoint}`);
    } catch (error) {
      throw new TypeError('panel-license-guard: `transaction` must be a pg client inside an open transaction (after BEGIN, and not aborted).', {
        cause: error,
      });
    }
    try {
      const level = (await client.query("SELECT current_setting('transaction_isolation') AS level")).rows[0]?.level;
      // A transaction-wide snapshot (REPEATABLE READ, SERIALIZABLE) would miss a release another
      // host just stored, and when the rules then decide nothing needs writing, no conflict is
      // ever raised: the release would be lost.
      if (level !== 'read committed')
        throw new TypeError(
          `panel-license-guard: the outbox can only enqueue in a READ COMMITTED transaction (the default), not ${String(level).toUpperCase()}: its snapshot could miss a release another host just stored.`,
        );
      await assertTableThrough(client);
      const result = await enqueueWith(client, row, now);
      await client.query(`RELEASE SAVEPOINT ${savepoint}`);
      return result;
    } catch (error) {
      throw await undoToSavepoint(client, savepoint, error);
    }
  }

  // Enqueues of one track take turns in this process, so they apply in call order as in the other
  // stores (between hosts, the one-pending-row index arbitrates). Different tracks go side by side.
  const byTrack = trackTurns();
  function enqueueAlone(row: NewOutboxRow, now: number, lease?: EnqueueLease): Promise<EnqueueResult> {
    // Each statement commits on its own: the row is durable once the write that made it returns.
    const run = () => ready().then(() => enqueueWith(pool, row, now, lease));
    // Without a track there are no rules to apply: one INSERT.
    return row.remoteTrackId === undefined ? run() : byTrack.run(`${row.panel}\n${row.remoteTrackId}`, run);
  }

  return {
    alone: enqueueAlone,
    inCallerTransaction: (client, row, now) => onClient(client, () => enqueueInCallerTransaction(client, row, now)),
    tableExists() {
      tableKnown = true;
    },
    async idle() {
      await byTrack.idle();
    },
  };
}

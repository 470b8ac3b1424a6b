// Enqueueing on PostgreSQL: on its own (each statement commits), or inside the caller's open
// transaction (the transactional outbox). No lock: the one-pending-row index arbitrates hosts.

import { enqueueResult, planEnqueue } from '../../rules.js';
import type { EnqueueLease, EnqueueResult, NewOutboxRow } from '../../store.js';
import { type CallerChain, callerChains } from '../shared/caller-chains.js';
import { isStatementsOnly } from '../shared/statement-transaction.js';
import { afterLastStatement, endedEnqueue, endedUnder, OUTSIDE_TRANSACTION, type TransactionWatch, UNTOLD, watched } from '../shared/transaction-watch.js';
import { connectionTurns, trackTurns } from '../shared/turns.js';
import { PG_CURRENT_TRANSACTION, type PgGuardedWrites, pgGuardedWrites } from './postgres-caller-guards.js';
import { abortedBy, proveInOneStatement, proveWithSavepoint, unnamed } from './postgres-caller-proof.js';
import { createFreshInserts } from './postgres-fresh-inserts.js';
import type { PgQueryable } from './postgres-schema.js';
import { num, orNull, type PgStoreContext } from './postgres-sql.js';

/** How often a read-then-write is retried when the track changed in between. */
const MAX_REREADS = 10;
/** An enqueue in a caller's transaction: the id of that transaction, which its writes check. */
interface InCaller {
  xid: string;
}

export interface PostgresEnqueuer {
  /** `lease`: see EnqueueLease (taken only by the one-statement insert of a new track). */
  alone(row: NewOutboxRow, now: number, lease?: EnqueueLease): Promise<EnqueueResult>;
  /** `watch`: what the caller's library tells of its transaction's end (transaction-watch.ts). */
  inCallerTransaction(client: PgQueryable, row: NewOutboxRow, now: number, watch: TransactionWatch, turns: object): Promise<EnqueueResult>;
  /** The table is known to exist (after migrate()): callers' transactions need not ask. */
  tableExists(): void;
  /** Resolves once no enqueue of this process is in progress. */
  idle(): Promise<void>;
}

export function createPostgresEnqueuer({ pool, names, hot, ready }: PgStoreContext): PostgresEnqueuer {
  let tableKnown = false;
  const onClient = connectionTurns<object>();
  const chains = callerChains<object, string>();
  const freshInsert = createFreshInserts(pool, hot);
  const guarded = pgGuardedWrites(hot);

  /**
   * No lock and no transaction of its own: a new or changed track is one INSERT; otherwise read
   * the track's rows, apply the rules, write only if they still hold. A unique index allows one pending row per track, so when another host (or an
   * open transaction, once it commits) got there first, the insert does nothing and we read again.
   */
  async function enqueueWith(client: PgQueryable, row: NewOutboxRow, now: number, lease?: EnqueueLease, inCaller?: InCaller): Promise<EnqueueResult> {
    const track = row.remoteTrackId;
    if (track === undefined) return enqueueResult({ action: 'insert' }, await insertPending(client, row, now, inCaller));
    // On its own, with the other enqueues of this turn (one statement); in a caller's transaction, alone.
    const values = [track, row.body, row.contentHash, now, row.panel, null, null, orNull(row.traceContext), ...xid(inCaller)];
    const fresh =
      client === pool
        ? await freshInsert({ ...row, remoteTrackId: track }, now, lease)
        : num((await client.query(writes(inCaller).insertIfNew, values)).rows[0]?.id);
    if (fresh === undefined) {
      await assertStillInCaller(client, inCaller);
      return enqueueByRules(client, { ...row, remoteTrackId: track }, now, inCaller);
    }
    if (lease && client === pool) lease.taken(fresh);
    return enqueueResult({ action: 'insert' }, fresh);
  }

  /** Reads the track's rows, applies the rules and writes only if they still hold (no lock). */
  async function enqueueByRules(
    client: PgQueryable,
    row: NewOutboxRow & { remoteTrackId: string },
    now: number,
    inCaller: InCaller | undefined,
  ): Promise<EnqueueResult> {
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
        const replaced = await client.query(writes(inCaller).replacePayload, [
          plan.id,
          row.body,
          row.contentHash,
          now,
          orNull(row.traceContext),
          ...xid(inCaller),
        ]);
        if (replaced.rowCount === 1) return enqueueResult(plan, undefined);
        await assertStillInCaller(client, inCaller);
        continue;
      }
      if (plan.action !== 'insert') return enqueueResult(plan, undefined);
      const inserted = await insertPending(client, row, now, inCaller);
      if (inserted !== undefined) return enqueueResult(plan, inserted);
    }
    throw new Error(`panel-license-guard: track ${JSON.stringify(track)} kept changing while this release was enqueued (${MAX_REREADS} tries); try again.`);
  }

  async function insertPending(client: PgQueryable, row: NewOutboxRow, now: number, inCaller: InCaller | undefined): Promise<number | undefined> {
    const values = [orNull(row.remoteTrackId), row.body, row.contentHash, now, row.panel, orNull(row.traceContext), ...xid(inCaller)];
    const id = num((await client.query(writes(inCaller).insertPending, values)).rows[0]?.id);
    if (id === undefined) await assertStillInCaller(client, inCaller);
    return id;
  }

  /**
   * After a guarded write that wrote nothing: was it refused because it ran outside the caller's
   * transaction (then say the transaction ended, and issue nothing more on the client), or did
   * another row get there first (then the rules run again)? A read: it changes nothing in
   * whatever transaction it lands in.
   */
  async function assertStillInCaller(client: PgQueryable, inCaller: InCaller | undefined): Promise<void> {
    if (inCaller === undefined) return;
    const current = (await client.query(PG_CURRENT_TRANSACTION)).rows[0]?.xid;
    if (current !== inCaller.xid) throw new Error(OUTSIDE_TRANSACTION);
  }

  /** In a caller's transaction, the writes that check they run in it (postgres-caller-guards.ts), and its id. */
  const writes = (inCaller: InCaller | undefined): PgGuardedWrites => (inCaller === undefined ? hot : guarded);
  const xid = (inCaller: InCaller | undefined): string[] => (inCaller === undefined ? [] : [inCaller.xid]);

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
   * In the caller's transaction. No savepoint is held across the enqueue: releasing it would also
   * release every savepoint the caller made meanwhile (a nested transaction of its query builder
   * run while the enqueue is in flight), and rolling back to it would undo the caller's statements
   * sent meanwhile. Nothing needs undoing anyway: an enqueue writes at most one row, in one
   * statement. A statement of ours that fails aborts the caller's transaction, as any failed
   * statement does, and the call rejects saying so. Enqueues on one client take turns (their
   * statements would interleave on its connection). A client outside BEGIN, or in any isolation
   * level but READ COMMITTED, is refused.
   */
  async function enqueueInCallerTransaction(
    caller: PgQueryable,
    row: NewOutboxRow,
    now: number,
    watch: TransactionWatch,
    chain: CallerChain<string>,
  ): Promise<EnqueueResult> {
    // An earlier enqueue of this chain found the caller's transaction ended: this one's turn came
    // after it, on a client that may be the next request's now (caller-chains.ts).
    if (chain.ended !== undefined) return endedEnqueue<EnqueueResult>(watch, undefined, chain.ended);
    // Each statement first asks the caller's library whether its transaction is still open.
    // Statements go unnamed on the caller's client: a named one is prepared once per connection,
    // and an app that resets its pooled sessions (DISCARD ALL) would drop it under the driver.
    const client = unnamed(watched(caller, watch));
    let current: Promise<{ rows: Record<string, unknown>[] }>;
    try {
      current = isStatementsOnly(caller) ? proveInOneStatement(client, chain) : proveWithSavepoint(client, chain);
      await current;
    } catch (error) {
      chain.ended = error;
      if (endedUnder(error, watch)) return endedEnqueue<EnqueueResult>(watch, undefined, error);
      throw new TypeError(
        `panel-license-guard: \`transaction\` must be ${isStatementsOnly(caller) ? 'an open transaction (not aborted) that `query` runs its statements in' : 'a pg client inside an open transaction (after BEGIN, and not aborted)'}. Nothing was stored: it has none, or it already ended (an enqueue not awaited inside it?).`,
        { cause: error },
      );
    }
    let written: EnqueueResult | undefined;
    try {
      const { xid, level } = (await current).rows[0] ?? {};
      // The transaction the chain's first enqueue proved: each write checks it runs in that one.
      if (chain.marker !== undefined && xid !== chain.marker) throw new Error(OUTSIDE_TRANSACTION);
      const inCaller = { xid: String(xid) };
      chain.marker = inCaller.xid;
      // A transaction-wide snapshot (REPEATABLE READ, SERIALIZABLE) would miss a release another
      // host just stored, and when the rules then decide nothing needs writing, no conflict is
      // ever raised: the release would be lost. PostgreSQL runs READ UNCOMMITTED as READ COMMITTED.
      if (level !== 'read committed' && level !== 'read uncommitted')
        throw new TypeError(
          `panel-license-guard: the outbox can only enqueue in a READ COMMITTED transaction (the default), not ${String(level).toUpperCase()}: its snapshot could miss a release another host just stored.`,
        );
      await assertTableThrough(client);
      written = await enqueueWith(client, row, now, undefined, inCaller);
      // A library that tells nothing of the transaction's end: one read says whether it is still
      // the caller's now (a ROLLBACK sent meanwhile ends it).
      if (watch === UNTOLD) await assertStillInCaller(client, inCaller);
    } catch (error) {
      if (endedUnder(error, watch)) {
        chain.ended = error;
        return endedEnqueue(watch, written, error);
      }
      throw abortedBy(error);
    }
    return afterLastStatement(watch, written as EnqueueResult);
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
    inCallerTransaction(client, row, now, watch, turns) {
      // Joined at call time: a turn that comes after the caller's transaction ended must not
      // take the next request's transaction for it (caller-chains.ts).
      const chain = chains.join(turns);
      return onClient(turns, () => enqueueInCallerTransaction(client, row, now, watch, chain).finally(() => chains.leave(turns, chain)));
    },
    tableExists() {
      tableKnown = true;
    },
    async idle() {
      await byTrack.idle();
    },
  };
}

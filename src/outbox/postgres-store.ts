// The outbox store on PostgreSQL: shared by any number of hosts, claims with FOR UPDATE SKIP LOCKED,
// and enqueue inside the caller's own transaction (the transactional outbox).
import { OptionProblems, optionError, rejectUnknownOptions, shown } from '../options.js';
import { migrate, type PgPool, type PgQueryable, tableNames, validIdentifier, withClient } from './postgres-schema.js';
import { enqueueResult, planEnqueue, planSettle } from './rules.js';
import type { ClaimedRow, EnqueueOptions, EnqueueResult, NewOutboxRow, OutboxState, OutboxStore, StoredRow } from './store.js';

export interface PostgresOutboxStoreOptions {
  /** A `pg.Pool` (node-postgres 8). The store borrows connections; it never ends the pool. */
  pool: PgPool;
  /** Schema of the table, created when missing. @default 'public' */
  schema?: string;
  /** Name of the table (its migrations table is `<table>_migrations`). @default 'release_outbox' */
  table?: string;
  /**
   * The clock leases are reckoned on. `'database'`: the server's, the one clock all hosts share,
   * so a host whose clock runs ahead never takes over a lease early. `'outbox'`: the time the
   * outbox passes (its `now` option), for tests that simulate time. @default 'database'
   */
  leaseClock?: 'database' | 'outbox';
}

type Row = Record<string, unknown>;
/** The database's clock in epoch milliseconds (the one clock every host shares). */
const DB_NOW_MS = '(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint';
const num = (value: unknown) => (value === null || value === undefined ? undefined : Number(value));
const orNull = <T>(value: T | undefined) => (value === undefined ? null : value);

function storedRow(row: Row): StoredRow {
  return {
    id: Number(row.id),
    state: row.state as OutboxState,
    remoteTrackId: (row.remote_track_id as string | null) ?? undefined,
    body: row.body as string,
    contentHash: row.content_hash as string,
    attempts: Number(row.attempts),
    nextAttemptAt: Number(row.next_attempt_at),
    lastError: (row.last_error as string | null) ?? undefined,
    releaseId: num(row.release_id),
    leaseOwner: (row.lease_owner as string | null) ?? undefined,
    leaseExpiresAt: num(row.lease_expires_at),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    deliveredAt: num(row.delivered_at),
  };
}

function statements(t: string, leaseNow: string) {
  const nextDeliveredSeq = `(SELECT COALESCE(MAX(seen.delivered_seq), 0) + 1 FROM ${t} AS seen WHERE seen.remote_track_id = $1)`;
  return {
    // Enqueues and settles of one track take turns (until their transaction ends): a read-then-
    // write can never interleave with another host's for the same track.
    lockTrack: 'SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))',
    newestPending: `SELECT id, content_hash FROM ${t} WHERE remote_track_id = $1 AND state = 'pending' ORDER BY id DESC LIMIT 1`,
    latestDelivered: `SELECT id, content_hash, release_id FROM ${t} WHERE remote_track_id = $1 AND state = 'delivered'
      ORDER BY delivered_seq DESC NULLS LAST, id DESC LIMIT 1`,
    replacePayload: `UPDATE ${t} SET body = $2, content_hash = $3, updated_at = $4 WHERE id = $1`,
    insertPending: `INSERT INTO ${t} (remote_track_id, body, content_hash, state, attempts, next_attempt_at, created_at, updated_at)
      VALUES ($1, $2, $3, 'pending', 0, $4, $4, $4) RETURNING id`,
    // Due rows, oldest due first, skipping rows another host is claiming right now; a track's
    // newer pending row waits for its older one (updates reach the mother in order). Leases are
    // reckoned on the database's clock, so hosts whose clocks disagree never cut one short.
    claim: `WITH due AS (
        SELECT id FROM ${t} AS candidate
        WHERE state = 'pending' AND next_attempt_at <= $1 AND (lease_expires_at IS NULL OR lease_expires_at <= ${leaseNow})
          AND NOT (id = ANY($5::bigint[]))
          AND (remote_track_id IS NULL OR NOT EXISTS (
            SELECT 1 FROM ${t} AS older WHERE older.remote_track_id = candidate.remote_track_id AND older.state = 'pending' AND older.id < candidate.id))
        ORDER BY next_attempt_at, id LIMIT $2
        FOR UPDATE SKIP LOCKED)
      UPDATE ${t} AS claimed SET lease_owner = $3, lease_expires_at = ${leaseNow} + $4 FROM due WHERE claimed.id = due.id
      RETURNING claimed.id, claimed.remote_track_id, claimed.body, claimed.content_hash, claimed.attempts, claimed.next_attempt_at`,
    snapshot: `SELECT state, content_hash, lease_owner, next_attempt_at FROM ${t} WHERE id = $1 FOR UPDATE`,
    insertDelivered: `INSERT INTO ${t} (remote_track_id, body, content_hash, state, attempts, next_attempt_at, release_id, delivered_seq, history_of, delivered_at, created_at, updated_at)
      VALUES ($1, $2, $3, 'delivered', $4, $5, $6, ${nextDeliveredSeq}, $7, $5, $5, $5)`,
    update: `UPDATE ${t} SET state = $2, attempts = $3, next_attempt_at = $4, last_error = $5, release_id = $6, delivered_at = $7,
      delivered_seq = CASE WHEN $2 = 'delivered' THEN (SELECT COALESCE(MAX(seen.delivered_seq), 0) + 1 FROM ${t} AS seen WHERE seen.remote_track_id = $8) ELSE delivered_seq END,
      lease_owner = NULL, lease_expires_at = NULL, updated_at = $9 WHERE id = $1`,
    counts: `SELECT state, COUNT(*) AS n FROM ${t} GROUP BY state`,
    list: `SELECT * FROM ${t} WHERE ($1::text IS NULL OR state = $1) AND ($2::bigint IS NULL OR id = $2) ORDER BY id LIMIT $3`,
    deadRows: `SELECT id, remote_track_id FROM ${t} WHERE state = 'dead' AND ($1::bigint IS NULL OR id = $1) ORDER BY id`,
    // Only the newest row of a track comes back (rules.ts, mayRequeue); run under the track's lock.
    requeue: `UPDATE ${t} AS dead SET state = 'pending', attempts = 0, next_attempt_at = $2, lease_owner = NULL, lease_expires_at = NULL, updated_at = $2
      WHERE id = $1 AND state = 'dead' AND (remote_track_id IS NULL OR NOT EXISTS (
        SELECT 1 FROM ${t} AS newer WHERE newer.remote_track_id = dead.remote_track_id AND newer.id > dead.id
          AND newer.history_of IS DISTINCT FROM dead.id))`,
    // Retention (rules.ts, mayPrune), one id range at a time so a pass never holds locks for long.
    prune: `WITH examined AS (SELECT id FROM ${t} WHERE id > $1 ORDER BY id LIMIT $2),
      deleted AS (
        DELETE FROM ${t} AS old WHERE old.id IN (SELECT id FROM examined) AND (
          (old.state = 'dead' AND old.updated_at < $4)
          OR (old.state = 'delivered' AND old.updated_at < $3 AND (old.remote_track_id IS NULL OR EXISTS (
            SELECT 1 FROM ${t} AS newer WHERE newer.remote_track_id = old.remote_track_id AND newer.state = 'delivered'
              AND (COALESCE(newer.delivered_seq, 0), newer.id) > (COALESCE(old.delivered_seq, 0), old.id)))))
        RETURNING 1)
      SELECT (SELECT MAX(id) FROM examined) AS last_id, (SELECT COUNT(*) FROM deleted) AS deleted, (SELECT MAX(id) FROM ${t}) AS highest_id`,
  };
}

function isQueryable(value: unknown): value is PgQueryable {
  return typeof (value as PgQueryable | null)?.query === 'function';
}

/**
 * An OutboxStore on PostgreSQL. The table (and schema) is created on first use. Pass `{ transaction:
 * client }` to `outbox.enqueue()` to store the release in your own open transaction: it becomes
 * visible to workers when you commit, and is gone if you roll back.
 */
export interface PostgresOutboxStore extends OutboxStore {
  /**
   * Creates the table when missing (every other call does it on first use too). Call it at
   * start-up when you enqueue inside your own transactions: that path never opens a second
   * connection, so it refuses to run before the table exists.
   */
  migrate(): Promise<void>;
}

export function postgresOutboxStore(options: PostgresOutboxStoreOptions): PostgresOutboxStore {
  if (typeof options !== 'object' || options === null) throw optionError('options', 'must be an object', 'Pass { pool: new pg.Pool(...) }.');
  const problems = new OptionProblems();
  rejectUnknownOptions('postgresOutboxStore', options, ['pool', 'schema', 'table', 'leaseClock'], problems);
  const leaseClock = options.leaseClock ?? 'database';
  if (leaseClock !== 'database' && leaseClock !== 'outbox')
    problems.add(optionError('leaseClock', `must be 'database' or 'outbox', received ${shown(leaseClock)}`, "Leave it out to use the database's clock."));
  const { pool } = options;
  if (typeof pool?.connect !== 'function' || typeof pool.query !== 'function')
    problems.add(optionError('pool', 'is not a pg.Pool', "Pass `new pg.Pool({ connectionString })` from the 'pg' package (npm install pg)."));
  const schema = options.schema ?? 'public';
  const table = options.table ?? 'release_outbox';
  for (const [name, value] of [
    ['schema', schema],
    ['table', table],
  ] as const)
    if (typeof value !== 'string' || !validIdentifier(value))
      problems.add(
        optionError(name, 'must be a lower-case SQL name (letters, digits, _; at most 63)', `Pass e.g. "${name === 'schema' ? 'panel' : 'release_outbox'}".`),
      );
  // Derived names (`<table>_migrations`, `<table>_track`) must stay within PostgreSQL's 63 characters.
  if (typeof table === 'string' && (table.length > 52 || table.endsWith('_migrations')))
    problems.add(optionError('table', 'must be at most 52 characters and not end in "_migrations"', 'Pass a shorter name, e.g. "release_outbox".'));
  problems.throwIfAny('postgresOutboxStore');

  const names = tableNames(schema, table);
  // $1 of the claim is the outbox's time.
  const sql = statements(names.table, leaseClock === 'database' ? DB_NOW_MS : '$1');
  let migrated: Promise<void> | undefined;
  const ready = () => {
    migrated ??= migrate(pool, names).catch((error: unknown) => {
      migrated = undefined; // try again on the next call (the database may be back, or granted)
      throw error;
    });
    return migrated;
  };

  async function inTransaction<T>(work: (client: PgQueryable) => Promise<T>): Promise<T> {
    await ready();
    return withClient(pool, async (client) => {
      // READ COMMITTED whatever the database default: after waiting on a track's lock, the next
      // statement must see what the previous holder committed (REPEATABLE READ would not).
      await client.query('BEGIN ISOLATION LEVEL READ COMMITTED');
      try {
        const result = await work(client);
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {});
        throw error;
      }
    });
  }

  async function enqueueWith(client: PgQueryable, row: NewOutboxRow, now: number): Promise<EnqueueResult> {
    const track = row.remoteTrackId;
    if (track !== undefined) await client.query(sql.lockTrack, [names.table, track]);
    const pending = track === undefined ? undefined : (await client.query(sql.newestPending, [track])).rows[0];
    const delivered = track === undefined ? undefined : (await client.query(sql.latestDelivered, [track])).rows[0];
    const plan = planEnqueue(
      row,
      pending && { id: Number(pending.id), contentHash: pending.content_hash as string },
      delivered && { id: Number(delivered.id), contentHash: delivered.content_hash as string, releaseId: num(delivered.release_id) },
    );
    if (plan.action === 'replace-pending') await client.query(sql.replacePayload, [plan.id, row.body, row.contentHash, now]);
    const inserted =
      plan.action === 'insert' ? Number((await client.query(sql.insertPending, [orNull(track), row.body, row.contentHash, now])).rows[0]?.id) : undefined;
    return enqueueResult(plan, inserted);
  }

  /** Whether the table exists, asked through the caller's client (no second connection). */
  let tableKnown = false;
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
   * in REPEATABLE READ (whose snapshot would miss what another host committed), is refused.
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
      if (level === 'repeatable read')
        throw new TypeError(
          'panel-license-guard: the outbox cannot enqueue in a REPEATABLE READ transaction (it could not see a release another host just stored). Use READ COMMITTED (the default) or SERIALIZABLE.',
        );
      await assertTableThrough(client);
      const result = await enqueueWith(client, row, now);
      await client.query(`RELEASE SAVEPOINT ${savepoint}`);
      return result;
    } catch (error) {
      await client.query(`ROLLBACK TO SAVEPOINT ${savepoint}`).catch(() => {});
      throw error;
    }
  }
  let savepoints = 0;
  const clientTurns = new WeakMap<object, Promise<unknown>>();

  // Enqueues of this process take turns, so they apply in call order like the other stores.
  let enqueues: Promise<unknown> = Promise.resolve();

  return {
    migrate: async () => {
      await ready();
      tableKnown = true;
    },
    enqueue(row: NewOutboxRow, nowMs: number, options?: EnqueueOptions) {
      const transaction = options?.transaction;
      if (transaction !== undefined) {
        if (!isQueryable(transaction)) return Promise.reject(new TypeError('panel-license-guard: `transaction` must be a pg client (from pool.connect()).'));
        const turn = (clientTurns.get(transaction) ?? Promise.resolve()).then(() => enqueueInCallerTransaction(transaction, row, nowMs));
        clientTurns.set(
          transaction,
          turn.catch(() => {}),
        );
        return turn;
      }
      const result = enqueues.then(() => inTransaction((client) => enqueueWith(client, row, nowMs)));
      enqueues = result.catch(() => {});
      return result;
    },
    async claimDue(request) {
      await ready();
      const { rows } = await pool.query(sql.claim, [request.nowMs, request.limit, request.owner, request.leaseMs, request.exclude ?? []]);
      return rows
        .map((r) => ({ row: r, due: Number(r.next_attempt_at) }))
        .sort((a, b) => a.due - b.due || Number(a.row.id) - Number(b.row.id))
        .map(
          ({ row: r }): ClaimedRow => ({
            id: Number(r.id),
            remoteTrackId: (r.remote_track_id as string | null) ?? undefined,
            body: r.body as string,
            contentHash: r.content_hash as string,
            attempts: Number(r.attempts),
          }),
        );
    },
    settle: (claim, owner, outcome, nowMs) =>
      inTransaction(async (client) => {
        if (claim.remoteTrackId !== undefined) await client.query(sql.lockTrack, [names.table, claim.remoteTrackId]);
        const current = (await client.query(sql.snapshot, [claim.id])).rows[0];
        const snapshot = current && {
          state: current.state as OutboxState,
          contentHash: current.content_hash as string,
          leaseOwner: (current.lease_owner as string | null) ?? undefined,
          nextAttemptAt: Number(current.next_attempt_at),
        };
        const plan = planSettle(snapshot, claim, owner, outcome, nowMs);
        const track = orNull(claim.remoteTrackId);
        if (plan.history) {
          const { body, contentHash, attempts, releaseId } = plan.history;
          await client.query(sql.insertDelivered, [track, body, contentHash, attempts, nowMs, orNull(releaseId), claim.id]);
        }
        if (plan.update) {
          const { state, attempts, nextAttemptAt, lastError, releaseId, deliveredAt } = plan.update;
          await client.query(sql.update, [claim.id, state, attempts, nextAttemptAt, orNull(lastError), orNull(releaseId), orNull(deliveredAt), track, nowMs]);
        }
        return plan.result;
      }),
    async counts() {
      await ready();
      const counts: Record<OutboxState, number> = { pending: 0, delivered: 0, dead: 0 };
      for (const r of (await pool.query(sql.counts)).rows) counts[r.state as OutboxState] = Number(r.n);
      return counts;
    },
    async list({ state, limit, id }) {
      await ready();
      return (await pool.query(sql.list, [orNull(state), orNull(id), limit])).rows.map(storedRow);
    },
    async requeueDead(id, nowMs) {
      await ready();
      let requeued = 0;
      for (const dead of (await pool.query(sql.deadRows, [orNull(id)])).rows) {
        const track = dead.remote_track_id as string | null;
        requeued += await inTransaction(async (client) => {
          if (track !== null) await client.query(sql.lockTrack, [names.table, track]);
          return (await client.query(sql.requeue, [dead.id, nowMs])).rowCount ?? 0;
        });
      }
      return requeued;
    },
    async prune({ deliveredBefore, deadBefore, afterId, limit }) {
      await ready();
      const result = (await pool.query(sql.prune, [afterId, limit, deliveredBefore, deadBefore])).rows[0];
      return { deleted: Number(result?.deleted ?? 0), lastId: num(result?.last_id), highestId: num(result?.highest_id) };
    },
    async close() {
      // The pool is the caller's: ending it here would break their other queries.
      await enqueues;
    },
  };
}

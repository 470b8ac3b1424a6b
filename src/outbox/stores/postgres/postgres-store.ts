// The outbox store on PostgreSQL: shared by any number of hosts, claims with FOR UPDATE SKIP LOCKED,
// and enqueue inside the caller's own transaction (the transactional outbox).
import { OptionProblems, optionError, optionNames, rejectUnknownOptions, shown } from '../../../options.js';
import { ADOPTION_SUPERSEDED } from '../../rules.js';
import type { EnqueueLease, EnqueueOptions, NewOutboxRow, OutboxState, OutboxStore } from '../../store.js';
import type { CancelAnswer, CancelRequest, FeedRequest, FeedRow } from '../../store-operations.js';
import { onCallerTransaction } from '../shared/caller-transaction.js';
import { explainedStore } from '../shared/sql-work.js';
import { createPostgresEnqueuer } from './postgres-enqueue.js';
import { databaseFailure } from './postgres-errors.js';
import { createPostgresOperations } from './postgres-operations.js';
import { migrate, type PgPool, type PgQueryable, privilegeError, tableNames, validIdentifier, withClient } from './postgres-schema.js';
import { createPostgresSettle } from './postgres-settle.js';
import {
  claimedRow,
  num,
  orNull,
  type PgStoreContext,
  preparedStatements,
  type ReadStatements,
  readStatements,
  statements,
  storedRow,
} from './postgres-sql.js';

export interface PostgresOutboxStoreOptions {
  /** A `pg.Pool` (node-postgres 8). The store borrows connections; it never ends the pool. */
  pool: PgPool;
  /** Schema of the table, created when missing. @default 'public' */
  schema?: string;
  /** Name of the table (its migrations table is `<table>_migrations`). @default 'release_outbox' */
  table?: string;
  /**
   * The clock leases and due times are reckoned on. `'database'`: the server's, the one clock all
   * hosts share, so a host whose clock runs ahead never takes over a lease early, and a release it
   * queues is due at once for the others. `'outbox'`: the time the outbox passes (its `now`
   * option), for tests that simulate time. @default 'database'
   */
  leaseClock?: 'database' | 'outbox';
}

const UNIQUE_VIOLATION = '23505';

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
  // What operators do (store-operations.ts): always there on this store.
  cancel(request: CancelRequest): Promise<CancelAnswer>;
  controls(): Promise<Record<string, string>>;
  setControl(name: string, value: string | undefined, nowMs: number): Promise<void>;
  deliveries(request: FeedRequest): Promise<FeedRow[]>;
}

export function postgresOutboxStore(options: PostgresOutboxStoreOptions): PostgresOutboxStore {
  if (typeof options !== 'object' || options === null) throw optionError('options', 'must be an object', 'Pass { pool: new pg.Pool(...) }.');
  const problems = new OptionProblems();
  rejectUnknownOptions(
    'postgresOutboxStore',
    options,
    optionNames<PostgresOutboxStoreOptions>({ pool: true, schema: true, table: true, leaseClock: true }),
    problems,
  );
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
  const sql = statements(names, leaseClock);
  const hot = preparedStatements(sql, `${names.table} ${leaseClock}`);
  const readSql = { current: readStatements(names.table, 'panel'), older: readStatements(names.table, "''") };
  let migratedHere = false;
  /**
   * Listing and counting read an existing table as it is, at any older version, without
   * migrating it (which needs the owner, and must not happen on a mere look); a missing table is
   * created as for any other call.
   */
  let present: Promise<ReadStatements> | undefined;
  const reading = (): Promise<ReadStatements> => {
    if (migratedHere) return Promise.resolve(readSql.current);
    present ??= pool
      .query(
        `SELECT to_regclass($1) IS NOT NULL AS present,
          EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'panel' AND NOT attisdropped) AS has_panel`,
        [names.table],
      )
      .then((found) => {
        if (!found.rows[0]?.present) return ready().then(() => readSql.current);
        return found.rows[0]?.has_panel ? readSql.current : readSql.older;
      })
      .catch((error: unknown) => {
        present = undefined;
        throw error;
      });
    return present;
  };
  let migrated: Promise<void> | undefined;
  const ready = () => {
    migrated ??= migrate(pool, names).then(
      () => {
        migratedHere = true;
      },
      (error: unknown) => {
        migrated = undefined; // try again on the next call (the database may be back, or granted)
        throw error;
      },
    );
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

  const context: PgStoreContext = { pool, names, sql, hot, ready, inTransaction };
  const enqueuer = createPostgresEnqueuer(context);
  const { settle, settleMany } = createPostgresSettle(context);
  const operations = createPostgresOperations({ pool, names, leaseClock, ready, inTransaction });

  const store: PostgresOutboxStore = {
    migrate: async () => {
      await ready();
      enqueuer.tableExists();
    },
    enqueue(row: NewOutboxRow, nowMs: number, options?: EnqueueOptions, lease?: EnqueueLease) {
      const transaction = options?.transaction;
      if (transaction !== undefined) {
        return onCallerTransaction(
          transaction,
          'postgres',
          (client, watch, turns) => enqueuer.inCallerTransaction(client, row, nowMs, watch, turns),
          options?.query,
        );
      }
      return enqueuer.alone(row, nowMs, lease);
    },
    async claimDue(request) {
      await ready();
      const { rows } = await pool.query(hot.claim, [request.nowMs, request.limit, request.owner, request.leaseMs, request.exclude ?? [], request.panel]);
      return rows.sort((a, b) => Number(a.next_attempt_at) - Number(b.next_attempt_at) || Number(a.id) - Number(b.id)).map(claimedRow);
    },
    async claimFair(request) {
      await ready();
      const { nowMs, limit, owner, leaseMs, exclude = [], after, maxPanels, skipPanels, probePanels } = request;
      const { rows } = await pool.query(hot.claimFair, [nowMs, limit, owner, leaseMs, exclude, after, maxPanels, skipPanels, probePanels]);
      const visited = (rows.find((r) => r.id === null)?.visited_panels as string[] | null) ?? [];
      const claimed = rows.filter((r) => r.id !== null).sort((a, b) => Number(a.turn) - Number(b.turn) || Number(a.visit_order) - Number(b.visit_order));
      // The next claim goes on after the panel of the last row taken, round-robin (fair-claim.ts).
      const complete = visited.length <= maxPanels;
      const lastPanel = (claimed.at(-1)?.panel as string | undefined) ?? (complete ? undefined : visited[maxPanels - 1]);
      return { rows: claimed.map(claimedRow), lastPanel };
    },
    settle,
    settleMany,
    async recheck(held) {
      await ready();
      const { rows } = await pool.query(hot.recheck, [held.map(({ id }) => id), held.map(({ contentHash }) => contentHash)]);
      return rows.map((r) => ({ id: Number(r.id), state: r.state as OutboxState, body: r.body as string, contentHash: r.content_hash as string }));
    },
    async counts(scope) {
      const read = await reading();
      const counts: Record<OutboxState, number> = { pending: 0, delivered: 0, dead: 0, cancelled: 0 };
      for (const r of (await pool.query(read.counts, [orNull(scope?.panel)])).rows) counts[r.state as OutboxState] = Number(r.n);
      return counts;
    },
    async oldestPending(scope) {
      const read = await reading();
      const at = (await pool.query(read.oldestPending, [orNull(scope?.panel)])).rows[0]?.at;
      return at === null || at === undefined ? undefined : Number(at);
    },
    async list({ state, limit, id, panel, track, afterId }) {
      const read = await reading();
      return (await pool.query(read.list, [orNull(state), orNull(id), limit, orNull(panel), orNull(track), orNull(afterId)])).rows.map(storedRow);
    },
    async panelCounts(limit) {
      const read = await reading();
      return (await pool.query(read.panelCounts, [limit])).rows.map((r) => ({
        panel: r.panel as string,
        pending: Number(r.pending),
        dead: Number(r.dead),
        oldestPendingAt: num(r.oldest_pending_at),
      }));
    },
    async adoptUnassigned(panel, nowMs) {
      return inTransaction(async (client) => {
        await client.query(sql.adoptSuperseded, [panel, nowMs, ADOPTION_SUPERSEDED]);
        return (await client.query(sql.adopt, [panel])).rowCount ?? 0;
      });
    },
    async requeueDead(id, nowMs, scope) {
      await ready();
      let requeued = 0;
      for (const dead of (await pool.query(sql.deadRows, [orNull(id), orNull(scope?.panel)])).rows) {
        const track = dead.remote_track_id as string | null;
        requeued += await inTransaction(async (client) => {
          if (track !== null) await client.query(sql.lockTrack, [names.table, dead.panel, track]);
          return (await client.query(sql.requeue, [dead.id, nowMs])).rowCount ?? 0;
        }).catch((error: unknown) => {
          // An enqueue of the track committed a pending row meanwhile: that newer content wins.
          if ((error as { code?: string }).code === UNIQUE_VIOLATION) return 0;
          throw error;
        });
      }
      return requeued;
    },
    async prune({ deliveredBefore, deadBefore, feedHold, afterId, limit }) {
      await ready();
      // Without DELETE on the table, say which privilege is missing (retention runs every hour).
      const values = [afterId, limit, deliveredBefore, deadBefore, orNull(feedHold)];
      const result = (await pool.query(sql.prune, values).catch((error: unknown) => Promise.reject(privilegeError(names, error)))).rows[0];
      return { deleted: Number(result?.deleted ?? 0), lastId: num(result?.last_id), highestId: num(result?.highest_id) };
    },
    ...operations,
    async close() {
      // The pool is the caller's: ending it here would break their other queries.
      await enqueuer.idle();
    },
  };
  return explainedStore(store, (error, work) => databaseFailure(error, work, pool, names.table));
}

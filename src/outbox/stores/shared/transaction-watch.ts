// Whether the caller's transaction is still open, as its library tells, asked before each statement
// the store runs in it. A statement issued after the library's COMMIT or ROLLBACK runs outside the
// transaction: on its own (autocommit), or, once the connection is back in its pool, inside
// whatever transaction the next user opens there. Knex says so from the moment it issues them;
// Kysely once they have run (before it lets the connection go); Drizzle and the drivers never.
import { TransactionEndedError } from '../../../errors.js';

export type TransactionOutcome = 'committed' | 'rolled back' | 'unknown';

export interface TransactionWatch {
  /** The library has ended the transaction (or is ending it): issue nothing more in it. */
  ended(): boolean;
  /** Once ended: how, as soon as the library knows (`unknown`: it cannot tell). */
  outcome(): Promise<TransactionOutcome>;
}

/** A transaction whose library tells nothing (a driver's connection, Drizzle). */
export const UNTOLD: TransactionWatch = { ended: () => false, outcome: async () => 'unknown' };

interface KnexTransaction {
  isCompleted(): boolean;
  executionPromise?: Promise<unknown>;
}

/** Knex marks its transaction completed as it sends COMMIT or ROLLBACK; `executionPromise` settles with it. */
export function knexWatch(trx: KnexTransaction): TransactionWatch {
  const settled = trx.executionPromise?.then(
    () => 'committed' as const,
    () => 'rolled back' as const,
  );
  return { ended: () => trx.isCompleted(), outcome: async () => (settled ? await settled : 'unknown') };
}

interface KyselyTransaction {
  isCommitted?: boolean;
  isRolledBack?: boolean;
  getExecutor(): { provideConnection(consumer: () => Promise<void>): Promise<void> };
}

/**
 * Kysely's state: a controlled transaction says it; a callback's transaction refuses a connection
 * once it has committed or rolled back, at once (its asserting executor throws before it waits for
 * the connection, so this asks without running anything: a consumer given while it is open does
 * nothing, after the enqueue lets the connection go).
 */
export function kyselyWatch(trx: KyselyTransaction): TransactionWatch {
  const state = (): TransactionOutcome | 'open' => {
    if (trx.isCommitted === true) return 'committed';
    if (trx.isRolledBack === true) return 'rolled back';
    if (trx.isCommitted === false) return 'open';
    try {
      trx
        .getExecutor()
        .provideConnection(async () => {})
        .catch(() => {});
      return 'open';
    } catch (error) {
      const message = String((error as Error | null)?.message);
      return /committed/i.test(message) ? 'committed' : /rolled back/i.test(message) ? 'rolled back' : 'unknown';
    }
  };
  return {
    ended: () => state() !== 'open',
    outcome: async () => {
      const now = state();
      return now === 'open' ? 'unknown' : now;
    },
  };
}

/** Thrown instead of issuing a statement once the watch says the transaction ended. */
class EndedBeforeStatement extends Error {}

/** `connection`, whose every statement first asks `watch`: none is issued once the transaction ended. */
export function watched<C extends { query(...args: never[]): Promise<unknown>; execute?(...args: never[]): Promise<unknown> }>(
  connection: C,
  watch: TransactionWatch,
): C {
  if (watch === UNTOLD) return connection;
  const asked =
    <A extends never[]>(call: (...args: A) => Promise<unknown>) =>
    (...args: A) =>
      watch.ended() ? Promise.reject(new EndedBeforeStatement()) : call.apply(connection, args);
  // `execute` too, where the connection has it: the MySQL store sends its values apart from the SQL.
  const { execute } = connection;
  return { query: asked(connection.query), ...(execute === undefined ? {} : { execute: asked(execute) }) } as unknown as C;
}

/** The message the store's in-statement guards raise (PostgreSQL) when a write runs outside the caller's transaction. */
export const OUTSIDE_TRANSACTION = "panel-license-guard: outside the caller's transaction";

/** `error` says the transaction ended under the enqueue: the watch said so, or a guard refused a write. */
export function endedUnder(error: unknown, watch: TransactionWatch): boolean {
  return error instanceof EndedBeforeStatement || String((error as Error | null)?.message).includes(OUTSIDE_TRANSACTION) || watch.ended();
}

/**
 * How an enqueue ends once its transaction ended under it. `written`: its rows were written in
 * the transaction (its last write returned): it is stored if the transaction committed. The
 * guards keep every write inside the transaction, so nothing else of it can be stored.
 */
export async function endedEnqueue<T>(watch: TransactionWatch, written: T | undefined, cause?: unknown): Promise<T> {
  // A guard refused although the library says the transaction is open: a savepoint made while the
  // enqueue ran was rolled back over its statements. Waiting for the outcome would wait for the
  // caller, who waits for this enqueue.
  if (watch !== UNTOLD && !watch.ended())
    throw new Error(
      "panel-license-guard: the release's statements were undone in your transaction while it was being stored: a savepoint made meanwhile (a nested transaction run while the enqueue was in flight) was rolled back over them. Nothing of the release was stored; enqueue it again, and await an enqueue before starting a nested transaction.",
      cause === undefined ? undefined : { cause },
    );
  const outcome = await watch.outcome();
  if (outcome === 'committed' && written !== undefined) return written;
  throw new TransactionEndedError(outcome === 'rolled back' || written === undefined ? false : undefined, cause === undefined ? undefined : { cause });
}

/** After the enqueue's last statement: a transaction that ended meanwhile (Knex, Kysely) answers for it. */
export async function afterLastStatement<T>(watch: TransactionWatch, written: T): Promise<T> {
  return watch.ended() ? endedEnqueue(watch, written) : written;
}

// PostgreSQL: how an enqueue proves it runs in the caller's open transaction (and reads that
// transaction's id and isolation), how its statements go on the caller's client, and what a
// failed statement of it means for the caller's transaction.
import { describeError } from '../../../logger.js';
import type { CallerChain } from '../shared/caller-chains.js';
import { databaseErrorField } from '../shared/statement-transaction.js';
import { PG_CURRENT_TRANSACTION, PG_TRANSACTION_ID } from './postgres-caller-guards.js';
import type { PgQueryable } from './postgres-schema.js';

/** Names the savepoints of the proofs (unique per process, so per connection). */
let savepoints = 0;

/**
 * A statement of ours that the server refused has aborted the caller's transaction (a timeout, a
 * deadlock): the error says so. Other errors (ours, before any statement failed) pass as they are.
 */
export function abortedBy(error: unknown): unknown {
  const code = databaseErrorField(error, 'code');
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return error;
  return new Error(
    `panel-license-guard: the release could not be stored in your transaction (${describeError(error)}), and PostgreSQL has aborted the transaction, as after any failed statement: roll it back and run it again. Nothing of the release was stored.`,
    { cause: error },
  );
}

/**
 * A savepoint made and released at once proves the client is inside BEGIN (SAVEPOINT fails
 * anywhere else). The three go out together: nothing the app sends on this client can come
 * between them, so the id read is that of the transaction proved, and no savepoint of the
 * caller's is made inside ours. A later turn of a chain reads without assigning an id (it may
 * be in the next request's transaction) and must find the chain's. Resolves once all three ran.
 */
export function proveWithSavepoint(client: PgQueryable, chain: CallerChain<string>): Promise<{ rows: Record<string, unknown>[] }> {
  const savepoint = `panel_license_outbox_${++savepoints}`;
  const saved = client.query(`SAVEPOINT ${savepoint}`);
  const current = client.query(chain.marker === undefined ? PG_TRANSACTION_ID : PG_CURRENT_TRANSACTION);
  const released = client.query(`RELEASE SAVEPOINT ${savepoint}`);
  current.catch(() => {});
  released.catch(() => {});
  return saved.then(() => released).then(() => current);
}

/**
 * Through a library's `query` (one statement at a time, none pipelined): one read proves it.
 * Inside BEGIN the transaction started with an earlier statement, so its start (now()) is
 * before this statement's; a statement on its own is its own transaction, started with it.
 */
export async function proveInOneStatement(client: PgQueryable, chain: CallerChain<string>): Promise<{ rows: Record<string, unknown>[] }> {
  const proof = `${chain.marker === undefined ? PG_TRANSACTION_ID : PG_CURRENT_TRANSACTION}, now() < statement_timestamp() AS in_block`;
  const answer = await client.query(proof);
  if (answer.rows[0]?.in_block !== true) throw new Error('`query` ran the statement outside any transaction (each statement committed on its own)');
  return answer;
}

/** `client`, its statements sent without their names (node-postgres prepares a named one once per connection). */
export function unnamed(client: PgQueryable): PgQueryable {
  return {
    query: (query, values) => (typeof query === 'string' ? client.query(query, values) : client.query(query.text, query.values ?? values)),
  };
}

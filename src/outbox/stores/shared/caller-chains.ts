// Enqueues made on one caller's connection while earlier ones still wait their turn: one chain,
// one proof of the caller's transaction. An enqueue's turn can come only after the caller rolled
// back and the app's next request began a transaction of its own on that pooled connection;
// proving "this is a transaction" there would prove the wrong one. So the first enqueue of a
// chain proves the caller's transaction (PostgreSQL: its id; MySQL: a marker row, see
// postgres-caller-guards.ts, mysql-caller-guards.ts), every later enqueue of the chain requires that same proof — which the next
// transaction does not have — and once one found the transaction ended, the rest refuse at once.

/** What the enqueues of one chain share. */
export interface CallerChain<Proof = readonly [string, string]> {
  /** What the chain's first enqueue proved of the caller's transaction (MySQL: the marker's panel and token; PostgreSQL: its id). */
  marker: Proof | undefined;
  /** Set once an enqueue of the chain found the transaction ended: the rest refuse with it. */
  ended: unknown;
  /** Enqueues called and not finished. */
  waiting: number;
}

/** The chain of each caller's connection (weak: the connection is the caller's). */
export function callerChains<C extends object, Proof = readonly [string, string]>() {
  const chains = new WeakMap<C, CallerChain<Proof>>();
  return {
    /** Joins `connection`'s chain, at call time (before the enqueue waits for its turn). */
    join(connection: C): CallerChain<Proof> {
      let chain = chains.get(connection);
      if (chain === undefined) {
        chain = { marker: undefined, ended: undefined, waiting: 0 };
        chains.set(connection, chain);
      }
      chain.waiting++;
      return chain;
    },
    /** Leaves it; true when this was the chain's last enqueue (its marker may go now). */
    leave(connection: C, chain: CallerChain<Proof>): boolean {
      chain.waiting--;
      if (chain.waiting > 0) return false;
      if (chains.get(connection) === chain) chains.delete(connection);
      return true;
    },
  };
}

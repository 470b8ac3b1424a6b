// Calls that must not overlap take turns: enqueues of one track (so they apply in call order, as
// in the memory and SQLite stores) and enqueues on one caller's connection (their statements would
// interleave on it). Different keys go side by side. A failed turn does not stop the next one.

/** Runs the work given for one track after the earlier work for that track has finished. */
export function trackTurns() {
  const turns = new Map<string, Promise<unknown>>();
  return {
    run<T>(track: string, work: () => Promise<T>): Promise<T> {
      const turn = (turns.get(track) ?? Promise.resolve()).then(work);
      const settled = turn.catch(() => {});
      turns.set(track, settled);
      // Forget a track once its last turn is over, so the map holds only tracks in flight.
      void settled.then(() => {
        if (turns.get(track) === settled) turns.delete(track);
      });
      return turn;
    },
    /** Resolves when every turn started so far has finished. */
    async idle(): Promise<void> {
      await Promise.all(turns.values());
    },
  };
}

/** Runs the work given for one connection after the earlier work on that connection has finished. */
export function connectionTurns<C extends object>() {
  // Weak: a caller's connection is theirs, and is forgotten with it.
  const turns = new WeakMap<C, Promise<unknown>>();
  return <T>(connection: C, work: () => Promise<T>): Promise<T> => {
    const turn = (turns.get(connection) ?? Promise.resolve()).then(work);
    turns.set(
      connection,
      turn.catch(() => {}),
    );
    return turn;
  };
}

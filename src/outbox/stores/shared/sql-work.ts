// What each call of a database outbox store does for the releases, so that a failure can say
// what it means. Shared by the PostgreSQL and MySQL stores: their stores wrap every call named
// here so that a database that cannot be used gives an OutboxDatabaseError, never a bare driver error.

/** What the outbox was doing, and so what a failure means for the releases. */
export type SqlWork = 'migrate' | 'enqueue' | 'deliver' | 'read' | 'write' | 'retention';

export const MEANING: Record<SqlWork, string> = {
  migrate: 'The outbox table was not created or checked; nothing was changed.',
  enqueue: 'This enqueue was rejected and the release is not stored: nothing queued before is lost; try again or tell the uploader.',
  deliver: 'Delivery is paused and resumes by itself when the database answers; queued releases wait in the table, nothing is lost.',
  read: 'Nothing was read; nothing was changed.',
  write: 'Nothing was changed.',
  retention: 'Nothing was pruned this time; the next pass tries again.',
};

/** Every call of an outbox store but `close()`, with what it does for the releases. */
export const WORK = {
  migrate: 'migrate',
  enqueue: 'enqueue',
  claimDue: 'deliver',
  claimFair: 'deliver',
  settle: 'deliver',
  settleMany: 'deliver',
  recheck: 'deliver',
  counts: 'read',
  oldestPending: 'read',
  list: 'read',
  panelCounts: 'read',
  adoptUnassigned: 'write',
  requeueDead: 'write',
  prune: 'retention',
  cancel: 'write',
  // Read mostly by the worker, every second, for the pauses it must honour before claiming.
  controls: 'deliver',
  setControl: 'write',
  deliveries: 'read',
} as const satisfies Record<string, SqlWork>;

/** `store` whose calls named in WORK reject with what `failure` makes of an error met while doing that work. */
export function explainedStore<T extends object>(store: T, failure: (error: unknown, work: SqlWork) => unknown): T {
  const wrapped = { ...store };
  for (const [name, work] of Object.entries(WORK) as [string, SqlWork][]) {
    const call = (store as Record<string, unknown>)[name];
    if (typeof call !== 'function') continue;
    (wrapped as Record<string, unknown>)[name] = (...args: unknown[]) =>
      (call as (...a: unknown[]) => Promise<unknown>).apply(store, args).catch((error: unknown) => Promise.reject(failure(error, work)));
  }
  return wrapped;
}

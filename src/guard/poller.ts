// Runs license checks: at start, on a node-cron schedule with jitter, and sooner while failing.
import cron, { type RunCoordinator, type ScheduledTask } from 'node-cron';

export interface PollerOptions {
  schedule: string;
  jitterMs: number;
  retryBaseMs: number;
  retryMaxMs: number;
  random: () => number;
  now: () => number;
  /** Performs one check; resolves true on a verified verdict, false on a failed check. Never rejects. */
  check: () => Promise<boolean>;
  /**
   * Cluster mode: elects one instance per schedule slot (node-cron's `distributed` mode with our
   * coordinator); the others skip the slot and call `onSkipped`.
   */
  coordinator?: { runCoordinator: RunCoordinator; leaseMs: number; onSkipped: (slot: string) => void };
}

export interface Poller {
  /** Starts the schedule (idempotent). */
  start(): void;
  /** Checks now; concurrent calls share one request. */
  refresh(): Promise<boolean>;
  /** Stops the schedule and every timer. */
  close(): void;
  /** Drops a pending retry (cluster mode: a peer has checked since, and owns the retry stream). */
  cancelRetry(): void;
  /** Takes over the failure count of a peer's check (cluster mode), so backoff continues from it. */
  seedFailures(count: number): void;
  nextCheckAt(): number | null;
  consecutiveFailures(): number;
}

/** Delay before retry number `failures` (1-based): base doubling to max, with ±25 % jitter. */
export function retryDelay(failures: number, baseMs: number, maxMs: number, random: () => number): number {
  const exponential = Math.min(maxMs, baseMs * 2 ** Math.min(failures - 1, 30));
  return Math.round(exponential * (0.75 + random() * 0.5));
}

export function createPoller(options: PollerOptions): Poller {
  let task: ScheduledTask | undefined;
  let inFlight: Promise<boolean> | undefined;
  let retryTimer: NodeJS.Timeout | undefined;
  let retryAt: number | null = null;
  let failures = 0;
  let closed = false;

  function cancelRetry() {
    if (retryTimer) clearTimeout(retryTimer);
    retryTimer = undefined;
    retryAt = null;
  }

  function scheduleRetry() {
    if (retryTimer) clearTimeout(retryTimer);
    const delay = retryDelay(failures, options.retryBaseMs, options.retryMaxMs, options.random);
    retryAt = options.now() + delay;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      retryAt = null;
      void refresh();
    }, delay);
  }

  function refresh(): Promise<boolean> {
    if (inFlight) return inFlight;
    inFlight = options
      .check()
      .catch(() => false)
      .finally(() => {
        inFlight = undefined;
      })
      .then((ok) => {
        if (closed) return ok;
        if (ok) {
          failures = 0;
          cancelRetry();
        } else {
          failures++;
          scheduleRetry();
        }
        return ok;
      });
    return inFlight;
  }

  return {
    start() {
      if (task || closed) return;
      const { coordinator } = options;
      task = cron.createTask(options.schedule, () => refresh(), {
        noOverlap: true,
        ...(coordinator && { distributed: true, runCoordinator: coordinator.runCoordinator, distributedLease: coordinator.leaseMs }),
        // node-cron waits a random 0…maxRandomDelay ms before each run: thousands of panels
        // on the same schedule spread their checks instead of hitting the mother together.
        maxRandomDelay: options.jitterMs,
        name: 'panel-license-guard',
      });
      if (coordinator) task.on('execution:skipped', (context) => coordinator.onSkipped(context.date.toISOString()));
      void task.start();
    },
    refresh,
    cancelRetry,
    seedFailures(count) {
      failures = count;
    },
    close() {
      closed = true;
      cancelRetry();
      if (task) void task.destroy();
      task = undefined;
    },
    nextCheckAt() {
      const scheduled = task?.getNextRun()?.getTime() ?? null;
      if (retryAt === null) return scheduled;
      return scheduled === null ? retryAt : Math.min(retryAt, scheduled);
    },
    consecutiveFailures: () => failures,
  };
}

// Retention: old delivered and dead rows are deleted in small batches in the background, keeping
// the latest delivery of every track so an identical re-upload is still recognised.
import { setTimeout as sleep } from 'node:timers/promises';
import { type OptionProblems, optionError, optionNames, positiveInteger, shown, timerMs } from '../options.js';
import type { OutboxEmitter } from './events.js';
import { feedHold } from './operations/delivery-feed.js';
import type { OutboxStore } from './store.js';
import { createTroubleReporter } from './trouble.js';

const DAY_MS = 24 * 60 * 60_000;
/** The longest rest between two batches of a pass. */
const MAX_REST_MS = 1000;

/** How long settled rows are kept. Pending rows are never deleted. */
export interface RetentionOptions {
  /**
   * Delivered rows older than this are deleted, except the latest delivery of each
   * `remote_track_id` (kept while the track has no newer delivery: de-duplication compares with
   * it). `Infinity` keeps every delivered row. @default 2592000000 (30 days)
   */
  deliveredMs?: number;
  /**
   * Dead rows (refused for good by the mother) older than this are deleted. `Infinity` keeps
   * them until you requeue or delete them. @default 7776000000 (90 days)
   */
  deadMs?: number;
  /** Time between two retention passes; the first runs one interval after the worker starts. @default 3600000 (1 hour) */
  intervalMs?: number;
  /** Rows examined per batch: each batch is one short transaction. @default 500 */
  batchSize?: number;
}

export interface ResolvedRetention {
  deliveredMs: number;
  deadMs: number;
  intervalMs: number;
  batchSize: number;
}

export const DEFAULT_RETENTION: ResolvedRetention = { deliveredMs: 30 * DAY_MS, deadMs: 90 * DAY_MS, intervalMs: 60 * 60_000, batchSize: 500 };

const RETENTION_KEYS = optionNames<RetentionOptions>({ deliveredMs: true, deadMs: true, intervalMs: true, batchSize: true });

function ageMs(option: string, value: unknown, fallback: number): number {
  if (value === Number.POSITIVE_INFINITY) return value;
  return positiveInteger(option, value, fallback);
}

/** `false` turns retention off (every row is kept); `undefined` means the defaults. */
export function resolveRetention(value: unknown, problems: OptionProblems): ResolvedRetention | false {
  if (value === false) return false;
  if (value === undefined) return DEFAULT_RETENTION;
  if (typeof value !== 'object' || value === null) {
    problems.add(optionError('retention', `must be an object or false, received ${shown(value)}`, 'Pass { deliveredMs, deadMs }, or false to keep every row.'));
    return false;
  }
  const given = value as RetentionOptions;
  for (const name of Object.keys(given))
    if (!RETENTION_KEYS.includes(name)) problems.add(optionError(`retention.${name}`, 'is not a retention option', `Use ${RETENTION_KEYS.join(', ')}.`));
  return {
    deliveredMs: problems.check(() => ageMs('retention.deliveredMs', given.deliveredMs, DEFAULT_RETENTION.deliveredMs), 0),
    deadMs: problems.check(() => ageMs('retention.deadMs', given.deadMs, DEFAULT_RETENTION.deadMs), 0),
    intervalMs: problems.check(() => timerMs('retention.intervalMs', given.intervalMs, DEFAULT_RETENTION.intervalMs), 0),
    batchSize: problems.check(() => positiveInteger('retention.batchSize', given.batchSize, DEFAULT_RETENTION.batchSize, 1, 10_000), 0),
  };
}

export interface RetentionRunner {
  /** Schedules passes every `intervalMs` (unref'd timer: never keeps the process alive). */
  start(): void;
  /** Runs one whole pass now (or joins the one running); resolves with the rows deleted. */
  runPass(background?: boolean): Promise<number>;
  /** Stops scheduling, and ends a running pass after its current batch. */
  stop(): Promise<void>;
}

export function createRetentionRunner(store: OutboxStore, policy: ResolvedRetention, now: () => number, events: OutboxEmitter): RetentionRunner {
  const prune = store.prune?.bind(store);
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<number> | undefined;
  let stopped = false;
  const trouble = createTroubleReporter(policy.intervalMs, now, (error) =>
    events.emit('error', { error: error instanceof Error ? error : new Error(String(error)), id: undefined, remoteTrackId: undefined }),
  );

  /** Ends the rest between two batches at once when stop() is called. */
  const stopping = new AbortController();

  /** `background`: its rests never keep the process alive (a caller awaiting prune() does). */
  async function pass(background: boolean): Promise<number> {
    if (!prune) return 0;
    const startedAt = now();
    // `Infinity` keeps rows forever: a cutoff before any row (and one every store can take).
    const cutoff = (ageMs: number) => (Number.isFinite(ageMs) ? startedAt - ageMs : Number.MIN_SAFE_INTEGER);
    // Named feeds of deliveries hold delivered rows until each has read past them (delivery-feed.ts).
    const controls = store.controls ? await store.controls() : {};
    const cutoffs = { deliveredBefore: cutoff(policy.deliveredMs), deadBefore: cutoff(policy.deadMs), feedHold: feedHold(controls) };
    let deleted = 0;
    let afterId = 0;
    let endId: number | undefined;
    while (!stopped) {
      const batchStarted = performance.now();
      const step = await prune({ ...cutoffs, afterId, limit: policy.batchSize });
      deleted += step.deleted;
      endId ??= step.highestId;
      if (step.lastId === undefined || step.lastId <= afterId || endId === undefined || step.lastId >= endId) break;
      afterId = step.lastId;
      // Half the time at most: rest as long as the batch took, so enqueues and claims keep their
      // pace during a pass (a pass has no deadline; the rows wait a little longer).
      const restMs = Math.min(MAX_REST_MS, Math.max(1, performance.now() - batchStarted));
      const rested = await sleep(restMs, true, { ref: !background, signal: stopping.signal }).catch(() => false);
      if (!rested) break;
    }
    if (deleted > 0) events.emit('pruned', { deleted, durationMs: now() - startedAt });
    return deleted;
  }

  function runPass(background = false): Promise<number> {
    running ??= pass(background).finally(() => {
      running = undefined;
    });
    return running;
  }

  function schedule(): void {
    if (stopped || !prune) return;
    timer = setTimeout(() => {
      runPass(true)
        .then(
          () => trouble.recovered(),
          (error: unknown) => trouble.report(error),
        )
        .finally(schedule);
    }, policy.intervalMs);
    timer.unref();
  }

  return {
    start() {
      if (timer === undefined && !stopped) schedule();
    },
    runPass,
    async stop() {
      stopped = true;
      stopping.abort();
      clearTimeout(timer);
      await running?.catch(() => {});
    },
  };
}

// The SQLite license store's announcements: every write takes the next number of one sequence
// (SQLite writes one at a time, so the numbers commit in order), and each poll reads the rows
// after the last number it saw — an indexed range, empty most of the time. A write of this
// process wakes the poll at once.
import { KeyListeners } from '../key-listeners.js';

export interface SqlitePollerOptions {
  intervalMs: number;
  /** The newest sequence number now (where listening starts). */
  newest(): Promise<number>;
  /** Rows written after `seq`, in order. */
  after(seq: number): Promise<{ k: string; v: string; seq: number }[]>;
}

export function sqlitePoller({ intervalMs, newest, after }: SqlitePollerOptions) {
  const listeners: KeyListeners = new KeyListeners(
    () => start(),
    () => close(),
  );
  let last: number | undefined;
  let timer: NodeJS.Timeout | undefined;
  let started: Promise<void> | undefined;

  let polling = false;
  async function poll(): Promise<void> {
    if (polling) return;
    polling = true;
    try {
      last ??= await newest();
      for (const row of await after(last)) {
        last = Math.max(last, row.seq);
        listeners.deliver(row.k, row.v);
      }
    } finally {
      polling = false;
    }
  }
  const tick = () => void poll().catch(() => {});

  function start(): Promise<void> {
    if (timer === undefined) {
      timer = setInterval(tick, intervalMs);
      timer.unref();
    }
    started ??= poll().catch((error: unknown) => {
      started = undefined;
      throw error;
    });
    return started;
  }

  function close(): void {
    if (timer !== undefined) clearInterval(timer);
    timer = undefined;
    started = undefined;
    last = undefined;
  }

  return {
    /** After a write of this process: its own listeners hear it without waiting for the interval. */
    wake(): void {
      if (timer !== undefined) setImmediate(tick);
    },
    close,
    subscribe: (key: string, listener: (value: string) => void) => listeners.subscribe(key, listener),
  };
}

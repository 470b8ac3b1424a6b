// The MySQL/MariaDB license store's announcements: MySQL has no notifications, so one poll per
// interval reads what changed since the last one — one indexed statement for every key the
// process listens to, however many panels. Each poll reads back over a window before the newest
// change it saw (a write that committed a little late is still found) and hands each change to
// its listeners once; after an outage it reads everything since the last poll that answered.
import { KeyListeners } from '../key-listeners.js';

export interface MysqlPollerOptions {
  /** Now on the database's clock (ms): where the first poll starts. */
  now(): Promise<number>;
  /** Rows changed at or after `since` (database ms), oldest first. */
  changed(since: number): Promise<{ key: string; value: string; updatedAt: number }[]>;
  intervalMs: number;
}

/** How far back each poll reads before the newest change it saw: a write's commit can lag its timestamp. */
const OVERLAP_MS = 2000;

export function mysqlPoller({ now, changed, intervalMs }: MysqlPollerOptions) {
  /** The last change handed over, per key (its time and value). */
  const delivered = new Map<string, string>();
  const listeners: KeyListeners = new KeyListeners(
    () => start(),
    () => stop(),
    (key) => delivered.delete(key),
  );
  let since: number | undefined;
  let started: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let polling = false;

  async function poll(): Promise<void> {
    if (polling) return;
    polling = true;
    try {
      since ??= await now();
      for (const { key, value, updatedAt } of await changed(since - OVERLAP_MS)) {
        since = Math.max(since, updatedAt);
        const change = `${updatedAt}\n${value}`;
        if (!listeners.has(key) || delivered.get(key) === change) continue;
        delivered.set(key, change);
        listeners.deliver(key, value);
      }
    } finally {
      polling = false;
    }
  }

  function start(): Promise<void> {
    if (timer === undefined) {
      timer = setInterval(() => void poll().catch(() => {}), intervalMs);
      timer.unref();
    }
    // Ready once the first poll has answered (where announcements start from).
    started ??= poll().catch((error: unknown) => {
      started = undefined;
      throw error;
    });
    return started;
  }

  function stop(): void {
    if (timer !== undefined) clearInterval(timer);
    timer = undefined;
    started = undefined;
    since = undefined;
    delivered.clear();
  }

  return { subscribe: (key: string, listener: (value: string) => void) => listeners.subscribe(key, listener) };
}

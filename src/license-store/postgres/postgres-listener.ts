// The PostgreSQL license store's announcements: one LISTEN connection per store (so per process,
// however many panels), held from the pool while anyone subscribes. When it breaks it reconnects
// with a growing pause, listens again, and re-reads every subscribed key: whatever was announced
// while it was away reaches the listeners all the same.
import { KeyListeners } from '../key-listeners.js';
import type { PgLicenseClient, PgLicensePool } from './postgres-license-schema.js';

export interface PgListenerOptions {
  pool: PgLicensePool;
  channel: string;
  /** Reads the value of a key announced without it (too long for a notification), or null. */
  read(key: string): Promise<string | null>;
  /** Reads the live values of `keys` (after a reconnect). */
  readAll(keys: string[]): Promise<{ key: string; value: string }[]>;
}

const FIRST_RETRY_MS = 250;
const LONGEST_RETRY_MS = 2000;

export function pgListener({ pool, channel, read, readAll }: PgListenerOptions) {
  const listeners: KeyListeners = new KeyListeners(
    () => connect(),
    () => release(),
  );
  let client: PgLicenseClient | undefined;
  let connecting: Promise<void> | undefined;
  let retryMs = FIRST_RETRY_MS;
  let retryTimer: NodeJS.Timeout | undefined;

  const deliver = (key: string, value: string) => listeners.deliver(key, value);

  function onNotification(message: { channel: string; payload?: string }): void {
    if (message.channel !== channel || message.payload === undefined) return;
    const newline = message.payload.indexOf('\n');
    const key = newline === -1 ? message.payload : message.payload.slice(0, newline);
    if (!listeners.has(key)) return;
    if (newline !== -1) {
      deliver(key, message.payload.slice(newline + 1));
      return;
    }
    read(key).then(
      (value) => value !== null && deliver(key, value),
      () => {},
    );
  }

  /** The connection broke (or could not be made): forget it, and try again while anyone listens. */
  function lost(broken: PgLicenseClient | undefined, error?: Error): void {
    if (broken !== undefined && client === broken) {
      client = undefined;
      broken.removeAllListeners('notification');
      try {
        broken.release(error ?? true);
      } catch {
        // Already released: nothing to give back.
      }
    }
    if (listeners.size === 0 || retryTimer !== undefined) return;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      connect().then(
        () => catchUp(),
        () => {},
      );
    }, retryMs);
    retryTimer.unref();
    retryMs = Math.min(retryMs * 2, LONGEST_RETRY_MS);
  }

  /** After a reconnect: what was announced meanwhile, read again. */
  async function catchUp(): Promise<void> {
    const keys = listeners.keys();
    if (keys.length === 0) return;
    for (const { key, value } of await readAll(keys).catch(() => [])) deliver(key, value);
  }

  function connect(): Promise<void> {
    if (client !== undefined) return Promise.resolve();
    connecting ??= (async () => {
      let own: PgLicenseClient | undefined;
      try {
        own = (await pool.connect()) as PgLicenseClient;
        own.on('notification', onNotification);
        const mine = own;
        own.on('error', (error) => lost(mine, error));
        own.on('end', () => lost(mine));
        await own.query(`LISTEN "${channel}"`);
        client = own;
        retryMs = FIRST_RETRY_MS;
      } catch (error) {
        if (own !== undefined) {
          own.removeAllListeners('notification');
          own.release(error instanceof Error ? error : true);
        }
        lost(undefined);
        throw error;
      } finally {
        connecting = undefined;
      }
      // Everyone left while it connected.
      if (listeners.size === 0) release();
    })();
    return connecting;
  }

  function release(): void {
    const own = client;
    client = undefined;
    if (retryTimer !== undefined) clearTimeout(retryTimer);
    retryTimer = undefined;
    if (own === undefined) return;
    own.removeAllListeners('notification');
    own.query(`UNLISTEN "${channel}"`).then(
      () => own.release(),
      () => own.release(true),
    );
  }

  return { subscribe: (key: string, listener: (value: string) => void) => listeners.subscribe(key, listener) };
}

// Who listens to which key, for the stores that find announcements themselves (PostgreSQL's
// LISTEN connection, the MySQL and SQLite polls): subscriptions in and out, one delivery to every
// listener of a key, and "nobody listens any more" so the store can stop listening itself.
import type { StoreSubscription } from './license-store.js';

export class KeyListeners {
  readonly #byKey = new Map<string, Set<(value: string) => void>>();

  constructor(
    /** Called for every subscription: what its `ready` waits for (the connection, the first poll). */
    private readonly start: () => Promise<void>,
    /** The last subscription closed. */
    private readonly stopped: () => void,
    /** A key nobody listens to any more. */
    private readonly forgot: (key: string) => void = () => {},
  ) {}

  get size(): number {
    return this.#byKey.size;
  }

  has(key: string): boolean {
    return this.#byKey.has(key);
  }

  keys(): string[] {
    return [...this.#byKey.keys()];
  }

  /** Hands `value` to every listener of `key` (a listener that subscribes meanwhile waits for the next). */
  deliver(key: string, value: string): void {
    for (const listener of [...(this.#byKey.get(key) ?? [])]) listener(value);
  }

  subscribe(key: string, listener: (value: string) => void): StoreSubscription {
    const own = (value: string) => listener(value);
    let set = this.#byKey.get(key);
    if (set === undefined) {
      set = new Set();
      this.#byKey.set(key, set);
    }
    set.add(own);
    const ready = this.start();
    let closed = false;
    return {
      ready,
      close: async () => {
        if (closed) return;
        closed = true;
        const current = this.#byKey.get(key);
        current?.delete(own);
        if (current?.size === 0) {
          this.#byKey.delete(key);
          this.forgot(key);
        }
        if (this.#byKey.size === 0) this.stopped();
      },
    };
  }
}

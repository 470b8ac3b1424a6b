// The hosts a `panels` deployment has served, kept in its store, so that after a restart they
// are not new hosts: their first resolver calls wait their turn instead of being refused by the
// bound on new hosts (a restart of 10,000 panels would otherwise answer 503 to all but the first
// thousand). The list is only a hint: the resolver still decides every host's panel and
// credentials, and the verdicts come sealed from the store as ever. A forged list can only make
// the instance ask the resolver about hosts in it (at the same bounded concurrency) — never serve
// a panel the resolver did not name.
import type { LicenseStore } from '../../license-store/license-store.js';
import { canonicalHost } from '../../serve/request-host.js';

/** The store key of the list (outside any panel's keys). */
export const KNOWN_HOSTS_KEY = 'panels:known-hosts';
/** Hosts kept at most (the most recently added win). */
export const MAX_KNOWN_HOSTS = 100_000;
/** What is read of the list, at most: MAX_KNOWN_HOSTS hosts of ~40 characters, and room. */
const MAX_LIST_BYTES = 8 * 1024 * 1024;
/** How long the list lives without a write (a deployment gone a month starts afresh). */
const LIST_TTL_MS = 30 * 24 * 3600_000;
/** New hosts are added to the stored list at most this often (one write for many hosts). */
export const FLUSH_EVERY_MS = 10_000;

export interface KnownHostsOptions {
  store: LicenseStore;
  /** Bounds a store call (the guard's callStore). */
  call<T>(work: () => Promise<T>): Promise<T>;
}

/** The hosts in `text` that are hosts (a junk entry, or a list that is not one, is skipped). */
function parse(text: string | null): string[] {
  if (text === null) return [];
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return [];
  }
  if (!Array.isArray(value)) return [];
  const hosts: string[] = [];
  for (const entry of value.slice(-MAX_KNOWN_HOSTS)) {
    const host = typeof entry === 'string' ? canonicalHost(entry) : undefined;
    if (host !== undefined && host === entry) hosts.push(host);
  }
  return hosts;
}

export class KnownHosts {
  readonly #listed = new Set<string>();
  readonly #added = new Set<string>();
  readonly #gone = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> = Promise.resolve();
  #closed = false;
  /** Resolves once the stored list was read (or could not be: then no host is listed). */
  readonly loaded: Promise<void>;

  constructor(private readonly options: KnownHostsOptions) {
    this.loaded = options
      .call(() => options.store.get(KNOWN_HOSTS_KEY, MAX_LIST_BYTES))
      .then(
        (text) => {
          for (const host of parse(text)) this.#listed.add(host);
        },
        () => {},
      );
  }

  /** Whether `host` was served before (by this deployment, before a restart or on another instance). */
  has(host: string): boolean {
    return this.#listed.has(host);
  }

  /** `host` has a panel: listed from now on, and in the store at the next flush. */
  add(host: string): void {
    this.#gone.delete(host);
    if (this.#listed.has(host) && !this.#added.has(host)) return;
    this.#listed.add(host);
    this.#added.add(host);
    this.#schedule();
  }

  /** The resolver said `host` has no panel: no longer listed. */
  remove(host: string): void {
    if (!this.#listed.delete(host)) return;
    this.#added.delete(host);
    this.#gone.add(host);
    this.#schedule();
  }

  #schedule(): void {
    if (this.#timer !== undefined || this.#closed) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#flushing = this.#flushing.then(() => this.#flush());
    }, FLUSH_EVERY_MS);
    this.#timer.unref();
  }

  /** Merges what this instance learnt into the stored list (other instances add theirs the same way). */
  async #flush(): Promise<void> {
    if (this.#added.size === 0 && this.#gone.size === 0) return;
    const added = [...this.#added];
    const gone = new Set(this.#gone);
    this.#added.clear();
    this.#gone.clear();
    const { store, call } = this.options;
    try {
      const stored = parse(await call(() => store.get(KNOWN_HOSTS_KEY, MAX_LIST_BYTES))).filter((host) => !gone.has(host) && !this.#added.has(host));
      const merged = [...new Set([...stored, ...added])].slice(-MAX_KNOWN_HOSTS);
      await call(() => store.publish(KNOWN_HOSTS_KEY, JSON.stringify(merged), LIST_TTL_MS));
    } catch {
      // The store failed: try again at the next flush.
      for (const host of added) this.#added.add(host);
      for (const host of gone) this.#gone.add(host);
      this.#schedule();
    }
  }

  /** Writes what is pending now (at close). */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#flushing = this.#flushing.then(() => this.#flush());
    await this.#flushing;
  }
}

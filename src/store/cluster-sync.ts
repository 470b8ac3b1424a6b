// Cluster mode: keeps this instance's verdict in step with the panel's other instances through a LicenseStore.
import type { RunCoordinator } from 'node-cron';
import { LocalStateError } from '../errors.js';
import type { LicenseMonitor } from '../guard/license-monitor.js';
import { describeError } from '../logger.js';
import type { LicenseStore, StoreHealth } from './license-store.js';
import type { Mac } from './sealed-json.js';
import { decodeSharedVerdict, encodeSharedVerdict, type SharedVerdict } from './shared-verdict.js';

export interface ClusterSyncOptions {
  store: LicenseStore;
  panelId: string;
  mac: Mac;
  monitor: LicenseMonitor;
  now: () => number;
  /** How often the record is re-read, in case a published change was missed. */
  syncIntervalMs: number;
  /** How long a record stays in the store after its last write. */
  recordTtlMs: number;
  /** A record counts as current at start-up until its `nextCheckAt` plus this much. */
  staleAfterMs: number;
  /** The longest one license check can take (the start-up lease covers it). */
  checkTimeoutMs: number;
  /** A peer's newer record was applied: it ran the last check (and owns any retries). */
  onPeerRecord: () => void;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The request path never touches the store: records arrive by subscription or periodic read
 * and go into the in-process cache through `LicenseMonitor.applyShared`. Every store call is
 * guarded: a failure marks the store unavailable (reported once per outage) and this instance
 * goes on checking the mother itself, which is exactly the single-process behaviour.
 */
export class ClusterSync {
  health: StoreHealth = 'ok';
  private readonly key: string;
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => Promise<void>) | undefined;
  private writes: Promise<void> = Promise.resolve();
  private lastRejected: string | null = null;
  private closed = false;

  /** node-cron's coordinator: one instance per schedule slot; when the store fails, everyone runs. */
  readonly runCoordinator: RunCoordinator = { shouldRun: (slot, ttlMs) => this.acquire(`slot:${slot}`, ttlMs) };

  constructor(private readonly options: ClusterSyncOptions) {
    this.key = `${options.panelId}:verdict`;
  }

  /**
   * Subscribes, starts the periodic read and adopts the cluster's record. Resolves 'current'
   * when that record is fresh (or a peer's start-up check produced one while we waited), so this
   * instance need not check; 'check' when it should run the first check itself.
   */
  async start(waitMs: number): Promise<'current' | 'check'> {
    const { store, syncIntervalMs } = this.options;
    store
      .subscribe(this.key, (text) => this.received(text))
      .then(
        (unsubscribe) => {
          if (this.closed) void unsubscribe().catch(() => {});
          else this.unsubscribe = unsubscribe;
        },
        (error: unknown) => this.unavailable(error),
      );
    this.timer = setInterval(() => void this.readNow(), syncIntervalMs);
    this.timer.unref();
    const record = await this.read();
    if (record !== null && this.isCurrent(record)) return 'current';
    if (await this.acquire('startup', this.options.checkTimeoutMs + 2000)) return 'check';
    // A peer is running the start-up check right now: wait for its record rather than call too.
    const until = this.options.now() + waitMs;
    // Its record may come by subscription or by a read: either way the monitor has a check then.
    while (!this.closed && this.options.now() < until) {
      await sleep(Math.min(200, Math.max(1, until - this.options.now())));
      await this.read();
      if (this.options.monitor.lastCheckAt !== null) return 'current';
    }
    return 'check';
  }

  /** Takes a lease; when the store fails this instance runs the check itself (never no one). */
  async acquire(name: string, ttlMs: number): Promise<boolean> {
    try {
      const won = await this.options.store.acquire(`${this.options.panelId}:lease:${name}`, ttlMs);
      this.healthy();
      return won;
    } catch (error) {
      this.unavailable(error);
      return true;
    }
  }

  /** Publishes the result of a check this instance ran, one write after another. */
  share(record: SharedVerdict): void {
    if (this.closed) return;
    const { store, panelId, mac, recordTtlMs } = this.options;
    const text = encodeSharedVerdict(record, panelId, mac);
    this.writes = this.writes
      .then(() => store.publish(this.key, text, recordTtlMs))
      .then(
        () => this.healthy(),
        (error: unknown) => this.unavailable(error),
      );
  }

  /** Reads the record now; resolves true when it was newer than ours and applied. */
  async readNow(): Promise<boolean> {
    const before = this.options.monitor.lastCheckAt;
    await this.read();
    return this.options.monitor.lastCheckAt !== before && this.options.monitor.lastCheckBy === 'peer';
  }

  private async read(): Promise<SharedVerdict | null> {
    if (this.closed) return null;
    let text: string | null;
    try {
      text = await this.options.store.get(this.key);
      this.healthy();
    } catch (error) {
      this.unavailable(error);
      return null;
    }
    return text === null ? null : this.received(text);
  }

  private received(text: string): SharedVerdict | null {
    if (this.closed) return null;
    const { panelId, mac, monitor, now } = this.options;
    let record: SharedVerdict;
    try {
      record = decodeSharedVerdict(text, panelId, mac, now());
    } catch (error) {
      // Reported once per distinct value: the periodic read would otherwise repeat it.
      if (this.lastRejected !== text) monitor.report(error);
      this.lastRejected = text;
      return null;
    }
    if (monitor.applyShared(record)) this.options.onPeerRecord();
    return record;
  }

  private isCurrent(record: SharedVerdict): boolean {
    return record.nextCheckAt !== null && this.options.now() <= record.nextCheckAt + this.options.staleAfterMs;
  }

  private healthy(): void {
    this.health = 'ok';
  }

  private unavailable(error: unknown): void {
    if (this.closed || this.health === 'unavailable') return;
    this.health = 'unavailable';
    this.options.monitor.report(
      new LocalStateError(
        'STORE_UNAVAILABLE',
        `The license store (${this.options.store.kind}) failed: ${describeError(error)} Each instance now checks the mother on its own; they share one verdict again once the store answers.`,
      ),
    );
  }

  /** Stops reading and subscribing; resolves once a write under way has finished. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    await this.unsubscribe?.().catch(() => {});
    await this.writes;
  }
}

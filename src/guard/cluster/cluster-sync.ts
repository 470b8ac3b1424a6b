// Cluster mode: keeps this instance's verdict in step with the panel's other instances through a LicenseStore.
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { RunCoordinator } from 'node-cron';
import { LocalStateError } from '../../errors.js';
import type { StoreHealth, StoreSubscription } from '../../license-store/license-store.js';
import { callStore, LEASE_MAX_BYTES, LeaseSeal } from '../../license-store/store-calls.js';
import { describeError } from '../../logger.js';
import { type CheckOrder, later } from '../check-order.js';
import { applySharedVerdict } from './apply-shared.js';
import { firstVerdict } from './cluster-startup.js';
import type { ClusterSyncOptions } from './cluster-sync-options.js';
import { DisputeChecks } from './dispute-checks.js';
import { RefusalReports } from './refusal-reports.js';
import { decodeSharedVerdict, MAX_RECORD_BYTES, refuseIfAhead, type SharedVerdict } from './shared-verdict.js';
import { VerdictWrites } from './verdict-writes.js';

export type { ClusterSyncOptions } from './cluster-sync-options.js';

/**
 * A record older than this is never current, whatever its schedule says: a starting instance
 * then restores it as grace (or locked) and checks, so a replayed old record is worth little.
 */
const MAX_CURRENT_AGE_MS = 15 * 60_000;

/**
 * The request path never touches the store: records arrive by subscription or periodic read
 * and go into the in-process cache. Every store call is bounded and guarded: a failure marks the
 * store unavailable (reported once per outage) and this instance checks the mother itself, which
 * is exactly the single-process behaviour. Leases are sealed like records, and an instance that
 * skipped a slot checks itself when no result follows: nobody who can only write to the store can
 * stop the checks.
 */
export class ClusterSync {
  health: StoreHealth = 'ok';
  private readonly key: string;
  private readonly leases: LeaseSeal;
  private subscription: StoreSubscription | undefined;
  private readTimer: NodeJS.Timeout | undefined;
  private fallbackTimer: NodeJS.Timeout | undefined;
  private highestStamp = 0;
  private disputes: DisputeChecks | undefined;
  /** This instance's random id: the tie-break of its check order and the holder id of its leases. */
  private readonly instance = randomBytes(8).toString('hex');
  private started = false;
  private joined = false;
  private currentAppliedMono = Number.NEGATIVE_INFINITY;
  private readonly refusals: RefusalReports;
  private readonly verdicts: VerdictWrites;
  private closed = false;

  /** node-cron's coordinator: one instance per schedule slot; when the store fails, everyone runs. */
  readonly runCoordinator: RunCoordinator = { shouldRun: (slot, ttlMs) => this.acquire(`slot:${slot}`, ttlMs) };

  constructor(private readonly options: ClusterSyncOptions) {
    this.key = `${options.panelId}:verdict`;
    this.leases = new LeaseSeal(options.panelId, this.instance, options.mac);
    this.refusals = new RefusalReports((error) => options.monitor.report(error));
    this.verdicts = new VerdictWrites({
      ...options,
      key: this.key,
      answered: () => {
        this.health = 'ok';
      },
      failed: (error) => this.unavailable(error),
    });
  }

  /**
   * Subscribes, starts the periodic read and adopts the cluster's record. Resolves 'current' when
   * that record is current (or a peer's start-up check produced one while we waited), so this
   * instance need not check; 'check' when it should run the first check itself. A record that is
   * not current is still adopted the way a state file is restored (grace or locked).
   */
  async start(startupTimeoutMs: number): Promise<'current' | 'check'> {
    this.join();
    const begun = performance.now();
    try {
      return await firstVerdict(
        {
          read: () => this.read(),
          acquire: (name, ttlMs) => this.acquire(name, ttlMs),
          currentSince: (at) => this.currentAppliedMono >= at,
          closed: () => this.closed,
        },
        { begun, startupTimeoutMs, now: this.options.now, checkTimeoutMs: this.options.checkTimeoutMs },
      );
    } finally {
      this.started = true;
    }
  }

  /** Subscribes and starts the periodic read (idempotent). */
  private join(): void {
    if (this.joined || this.closed) return;
    this.joined = true;
    this.subscribe();
    const { syncIntervalMs } = this.options;
    // 0: no timer of its own (`panels` mode re-reads each panel's record at its check slots).
    if (syncIntervalMs > 0) {
      this.readTimer = setInterval(() => void this.read(), syncIntervalMs);
      this.readTimer.unref();
    }
  }

  /**
   * Subscribes again when an earlier subscription failed (`panels` mode calls this at each slot:
   * it has no periodic read to fall back on for long).
   */
  ensureSubscribed(): void {
    if (this.joined && !this.closed && this.subscription === undefined) this.subscribe();
  }

  private subscribe(): void {
    const { store } = this.options;
    try {
      const subscription = store.subscribe(this.key, (text) => this.received(text, true));
      if (typeof subscription?.close !== 'function') throw new Error('subscribe() did not return { ready, close }.');
      this.subscription = subscription;
      Promise.resolve(subscription.ready).catch((error: unknown) => {
        this.closeSubscription();
        this.unavailable(error, 'subscribing to changes failed; this instance hears of them by reading the store again');
      });
    } catch (error) {
      this.unavailable(error);
    }
  }

  /** Joins and reads the panel's record, with no start-up of its own (a resumed panel in `panels` mode). */
  resume(): void {
    if (this.joined) return;
    this.join();
    void this.read().finally(() => {
      this.started = true;
    });
  }

  /** The order of a check starting now: our wall clock, but after every stamp seen in the cluster. */
  nextOrder(): CheckOrder {
    this.highestStamp = Math.max(Math.floor(this.options.now()), this.highestStamp + 1);
    return { stamp: this.highestStamp, by: this.instance };
  }

  /**
   * Takes a lease. Held by a genuine peer: false. Taken, held by us, held by a value that does
   * not verify (someone squatting it), or the store failing: true — we run the check.
   */
  async acquire(name: string, ttlMs: number): Promise<boolean> {
    const key = `${this.options.panelId}:lease:${name}`;
    const value = this.leases.value(key);
    let holder: string | null;
    try {
      holder = await callStore(() => this.options.store.acquire(key, value, ttlMs, LEASE_MAX_BYTES));
      this.health = 'ok';
    } catch (error) {
      this.unavailable(error);
      return true;
    }
    if (holder === null || holder === value) return true;
    if (this.leases.isGenuine(key, holder)) return false;
    this.refusals.refused(
      new LocalStateError('SHARED_VERDICT_REJECTED', `The lease ${name} in the license store does not verify; this instance checks itself.`),
      holder,
    );
    return true;
  }

  /**
   * node-cron skipped a slot for us (`slot`: its time). Reads now; if no check result has been
   * applied around this slot by the time the elected peer's should have come, one of the instances
   * still waiting (another lease) checks itself. A result that came shortly before our skip counts:
   * a peer whose clock is a little ahead fires, and may finish, before we do.
   */
  slotSkipped(slot: string): void {
    if (this.closed) return;
    void this.read();
    if (this.fallbackTimer) return;
    const { fallbackMs, monitor } = this.options;
    const since = performance.now() - fallbackMs;
    this.fallbackTimer = setTimeout(async () => {
      await this.read();
      this.fallbackTimer = undefined;
      if (this.closed || monitor.lastAppliedMono >= since) return;
      if (await this.acquire(`fallback:${slot}`, fallbackMs + this.options.checkTimeoutMs)) this.options.checkNow();
    }, fallbackMs);
    this.fallbackTimer.unref();
  }

  /** Publishes the result of a check this instance ran (verdict-writes.ts). */
  share(record: SharedVerdict): void {
    if (!this.closed) this.verdicts.share(record);
  }

  private async read(): Promise<void> {
    if (this.closed) return;
    let text: string | null;
    try {
      text = await callStore(() => this.options.store.get(this.key, MAX_RECORD_BYTES));
      this.health = 'ok';
    } catch (error) {
      this.unavailable(error);
      return;
    }
    if (text !== null) this.received(text, false);
  }

  /** `live`: it came by subscription, so it was just written (a read may find an old value). */
  private received(text: string, live: boolean): void {
    if (this.closed) return;
    const { panelId, mac, monitor, now } = this.options;
    let record: SharedVerdict;
    try {
      record = decodeSharedVerdict(String(text), panelId, mac);
    } catch (error) {
      this.refusals.refused(error, String(text));
      return;
    }
    // Genuine, so its stamp is observed even when its times are refused below: our next check then
    // orders after it, and a copy replayed later cannot outrank that check.
    this.highestStamp = Math.max(this.highestStamp, record.order.stamp);
    try {
      refuseIfAhead(record, now());
    } catch (error) {
      // Never applicable later either, when our clock has caught up with it.
      monitor.lastOrder = later(record.order, monitor.lastOrder);
      this.refusals.refused(error, String(text));
      return;
    }
    // A message published to a running instance was just written; a value read (or anything at
    // start-up, when a replayed copy would be adopted) is judged by its age and schedule.
    const at = now();
    const current =
      (live && this.started) ||
      (record.nextCheckAt !== null && at <= record.nextCheckAt + this.options.staleAfterMs && at - record.checkedAt <= MAX_CURRENT_AGE_MS);
    const outcome = applySharedVerdict(monitor, record, current);
    if (outcome === 'disputed') this.dispute();
    if (outcome !== 'applied') return;
    if (current) this.currentAppliedMono = performance.now();
    this.options.onPeerRecord(record);
  }

  /** Our own check settles a dispute (dispute-checks.ts); made on the first one: few panels have any. */
  private dispute(): void {
    this.disputes ??= new DisputeChecks(this.options.checkNow);
    this.disputes.ask();
  }

  /** `consequence`: what this means for the checks, said after the store's own error. */
  private unavailable(
    error: unknown,
    consequence = 'each instance checks the mother on its own until the store answers again, then they share one verdict again',
  ): void {
    if (this.closed || this.health === 'unavailable') return;
    this.health = 'unavailable';
    // `panels` mode: many panels share one store; its outage is reported once a minute, not per panel.
    if (this.options.mayReportOutage && !this.options.mayReportOutage()) return;
    const cause = describeError(error).replace(/[.\s]+$/, '');
    this.options.monitor.report(new LocalStateError('STORE_UNAVAILABLE', `The license store (${this.options.store.kind}) failed (${cause}): ${consequence}.`));
  }

  /** Stops reading, subscribing and waiting; resolves once a write under way has settled (bounded). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.readTimer) clearInterval(this.readTimer);
    if (this.fallbackTimer) clearTimeout(this.fallbackTimer);
    this.disputes?.close();
    await this.closeSubscription();
    await this.verdicts.close();
  }

  private async closeSubscription(): Promise<void> {
    const subscription = this.subscription;
    this.subscription = undefined;
    try {
      await callStore(() => Promise.resolve(subscription?.close()));
    } catch {
      // A store that cannot close its subscription cannot be helped here; nothing else waits on it.
    }
  }
}

// Pauses of delivery: kept in the store (every process, and a restart, sees them), read again
// about once a second by each running outbox, and known at once in the process that set them.

import type { OutboxStore } from '../store.js';

/** The control that pauses the whole outbox; `pause:<panel>` pauses one panel. */
export const PAUSE_ALL = 'pause';
const PANEL_PREFIX = 'pause:';

/** How often a running outbox reads the pauses other processes set. */
export const PAUSE_REFRESH_MS = 1_000;
/**
 * Pauses last read longer ago than this (the store fails the reads) are not trusted: nothing is
 * claimed until a read succeeds, since another process may have paused meanwhile.
 */
export const PAUSES_STALE_MS = 5_000;

/** What is paused now, as this process knows it. */
export interface PausedNow {
  /** The whole outbox (every panel of the store). */
  all: boolean;
  /** Panels paused one by one. */
  panels: string[];
}

export class Pauses {
  private all = false;
  private panels = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<unknown> | undefined;
  /** Bumped by every set(): a read that began before it is out of date and must not undo it. */
  private changes = 0;
  /** When the last read that succeeded began (monotonic ms). */
  private readAt: number | undefined;
  /** Reads that began before this (monotonic ms) do not count as fresh: the worker (re)started since. */
  private notBefore = Number.NEGATIVE_INFINITY;

  /**
   * `resumed`: something paused is no longer (here or by another process): the worker claims at
   * once. `failed`: a read of the store failed (the last pauses known stay in force); `answered`: one succeeded.
   */
  constructor(
    private readonly store: OutboxStore,
    private readonly resumed: () => void,
    private readonly failed: (error: unknown) => void,
    private readonly answered: () => void = () => {},
  ) {}

  /** Whether `panel`'s releases wait: the outbox or that panel is paused. */
  isPaused(panel: string): boolean {
    return this.all || (this.panels.size > 0 && this.panels.has(panel));
  }

  get allPaused(): boolean {
    return this.all;
  }

  /** Panels paused one by one (a claim across panels skips them). */
  pausedPanels(): string[] {
    return [...this.panels];
  }

  now(): PausedNow {
    return { all: this.all, panels: [...this.panels].sort() };
  }

  /**
   * The pauses were read lately enough to claim on: until a read succeeds after start (a restart
   * must not send what is paused), and when the reads have failed for PAUSES_STALE_MS, nothing is claimed.
   */
  get loaded(): boolean {
    if (this.store.controls === undefined) return true;
    return this.readAt !== undefined && performance.now() - this.readAt <= PAUSES_STALE_MS;
  }

  /** Whether the store can keep pauses (every built-in store can). */
  get supported(): boolean {
    return this.store.controls !== undefined && this.store.setControl !== undefined;
  }

  /** Pauses or resumes (`panel` undefined: the whole outbox), durably, then here at once. */
  async set(panel: string | undefined, paused: boolean, nowMs: number): Promise<void> {
    const name = panel === undefined ? PAUSE_ALL : `${PANEL_PREFIX}${panel}`;
    await this.store.setControl?.(name, paused ? '1' : undefined, nowMs);
    this.changes++;
    const wasPaused = panel === undefined ? this.all : this.panels.has(panel);
    if (panel === undefined) this.all = paused;
    else if (paused) this.panels.add(panel);
    else this.panels.delete(panel);
    if (wasPaused && !paused) this.resumed();
  }

  /**
   * Reads the pauses from the store now (at start, then every PAUSE_REFRESH_MS). `rethrow`: a
   * failed read rejects (a caller asking what is paused); otherwise it is reported and the last
   * pauses known stay in force until they are stale.
   */
  async refresh(rethrow = false): Promise<void> {
    const controls = this.store.controls?.bind(this.store);
    if (!controls) return;
    this.reading ??= (async () => {
      const began = performance.now();
      try {
        const changes = this.changes;
        const values = await controls();
        this.answered();
        if (began >= this.notBefore) this.readAt = Math.max(this.readAt ?? began, began);
        // This process changed a pause while the read was under way: what it knows is newer.
        if (changes !== this.changes) return undefined;
        const before = this.now();
        this.all = values[PAUSE_ALL] !== undefined;
        this.panels = new Set(Object.keys(values).flatMap((name) => (name.startsWith(PANEL_PREFIX) ? [name.slice(PANEL_PREFIX.length)] : [])));
        if ((before.all && !this.all) || before.panels.some((panel) => !this.panels.has(panel))) this.resumed();
        return undefined;
      } catch (error) {
        this.failed(error);
        return error instanceof Error ? error : new Error(String(error));
      } finally {
        this.reading = undefined;
      }
    })();
    const failure = await this.reading;
    if (rethrow && failure !== undefined) throw failure;
  }

  /** Reads the pauses now and then every PAUSE_REFRESH_MS until stop(); never keeps the process alive. */
  start(): Promise<void> {
    // Only a read begun from now on lets the worker claim: one begun before may predate a pause.
    this.notBefore = performance.now();
    this.readAt = undefined;
    if (this.timer === undefined && this.supported) {
      this.timer = setInterval(() => void this.refresh(), PAUSE_REFRESH_MS);
      this.timer.unref();
    }
    return this.refresh();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}

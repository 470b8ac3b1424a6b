// The worker's slots and the rows it holds: how many pushes may be under way (`concurrency`), and how many answered
// pushes may wait for their outcome to be recorded. A slot is free once its push has answered: its
// next row starts while the outcome is recorded. Outcomes being recorded are bounded too, so a slow
// store cannot pile them up. And how a worker's holds share its slots out among panels.
import { type BackoffSettings, PanelHolds } from '../panels/panel-holds.js';
import type { ClaimedRow } from '../store.js';

/**
 * Answered pushes whose outcomes may be waiting to be recorded, at least (see open()): what a
 * crash may send twice, beside the pushes in flight. 8 lets a slow store fall a little behind,
 * and at low concurrency lets 4 to 7 outcomes share a statement (see holdOutcome).
 */
const MIN_RECORDING = 8;
/** Below this concurrency, outcomes wait for the next push's to share a statement. */
const HOLD_BELOW = 4;

export class Slots {
  /** Deliveries under way: a push, then recording its outcome. */
  readonly deliveries = new Set<Promise<void>>();
  /** Of the deliveries, those whose push has not answered yet: what `concurrency` bounds. */
  pushing = 0;
  /**
   * Outcomes being recorded, at most: `concurrency` of them, but at least MIN_RECORDING, so that
   * at low concurrency several outcomes share one commit (a commit waits for the disk: 1–3 ms
   * here, several pushes' worth).
   */
  private readonly recording: number;

  /** Ids of the rows this worker holds (ready or being sent): never claimed and sent a second time. */
  readonly sending = new Set<number>();

  constructor(
    private readonly concurrency: number,
    private readonly holds: PanelHolds,
  ) {
    this.recording = Math.max(concurrency, MIN_RECORDING);
  }

  /** The row is this worker's to send now (claimed or handed off): its panel counts it. */
  hold(row: ClaimedRow): void {
    this.sending.add(row.id);
    this.holds.claimed(row.panel);
  }

  /** The row was claimed (so its panel counted) but is no longer this worker's to send. */
  letGo(row: ClaimedRow): void {
    this.sending.delete(row.id);
    this.holds.released(row.panel);
  }

  /** Slots a new push may start in now (may be negative while outcomes pile up). */
  open(): number {
    return Math.min(this.concurrency - this.pushing, this.concurrency + this.recording - this.deliveries.size);
  }

  /**
   * Below concurrency 4, while a push is under way, an answered one's outcome waits for that
   * push's to share a commit (from 4 up, outcomes arriving in the same turn already share one).
   * A store that writes a batch inline (SQLite) answers before any other push can: outcomes wait
   * up to as many as leave every slot free to push, seven per commit at concurrency 1. One that
   * writes asynchronously needs room for the pushes answering meanwhile: half of those.
   */
  holdOutcome(waiting: number, inline: boolean): boolean {
    return this.concurrency < HOLD_BELOW && this.pushing > 0 && waiting < (inline ? this.recording - this.concurrency : this.recording / 2);
  }
}

/**
 * A worker's holds, shared out of its `concurrency` slots. Back-off is per panel: one panel's
 * failing mother never holds back another panel's releases. Probes of failing panels and mothers
 * may take a quarter of the slots at most: a mother that hangs costs its probe's slot, never every
 * slot. With many panels, one panel's rows take half the slots at most: a tenant whose releases
 * hang (or who just has the biggest backlog) never holds every slot.
 */
export function holdsForWorker(settings: Omit<BackoffSettings, 'maxProbes' | 'maxPerPanel'>, concurrency: number, manyPanels: boolean): PanelHolds {
  return new PanelHolds({
    ...settings,
    maxProbes: Math.max(1, Math.floor(concurrency / 4)),
    maxPerPanel: manyPanels ? Math.max(1, Math.ceil(concurrency / 2)) : Number.POSITIVE_INFINITY,
  });
}

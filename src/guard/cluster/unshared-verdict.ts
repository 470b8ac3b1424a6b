// A verdict this instance checked while the store did not answer (its publish failed): kept, and
// offered to the store again once a second until the store answers. Then it becomes the shared
// verdict — unless the store already holds a later one — so a lock (or an unlock) seen by one
// instance during a store outage reaches the others as soon as the store is back, not at the
// next scheduled check.
import { isAfter } from '../check-order.js';
import { decodeSharedVerdict, type SharedVerdict } from './shared-verdict.js';

export interface UnsharedVerdictIo {
  /** The store's record now (throws while the store fails). */
  read(): Promise<string | null>;
  /** Publishes `text`, after any write under way (throws while the store fails). */
  publish(text: string): Promise<void>;
  /** The record in `text` when it is genuine, else undefined (then ours replaces it). */
  decode(text: string): SharedVerdict | undefined;
  /** The store answered again. */
  answered(): void;
}

/** The record in `text` when it is genuine (for this panel, sealed with its key), else undefined. */
export function genuineOrUndefined(text: string, panelId: string, mac: Parameters<typeof decodeSharedVerdict>[2]): SharedVerdict | undefined {
  try {
    return decodeSharedVerdict(text, panelId, mac);
  } catch {
    return undefined;
  }
}

/** How often a kept verdict is offered to the store again while it does not answer. */
export const OFFER_AGAIN_MS = 1000;

export class UnsharedVerdict {
  private pending: { record: SharedVerdict; text: string } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly io: UnsharedVerdictIo) {}

  /** A newer check of ours is being published: an older kept verdict no longer matters. */
  superseded(record: SharedVerdict): void {
    if (this.pending !== undefined && !isAfter(this.pending.record.order, record.order)) this.pending = undefined;
  }

  /** Its publish failed: keep it, and offer it again. */
  keep(record: SharedVerdict, text: string): void {
    if (this.pending !== undefined && isAfter(this.pending.record.order, record.order)) return;
    this.pending = { record, text };
    this.schedule();
  }

  private schedule(): void {
    if (this.closed || this.timer !== undefined || this.pending === undefined) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.offer();
    }, OFFER_AGAIN_MS);
    this.timer.unref();
  }

  private async offer(): Promise<void> {
    const pending = this.pending;
    if (pending === undefined || this.closed) return;
    try {
      const text = await this.io.read();
      this.io.answered();
      const stored = text === null ? undefined : this.io.decode(text);
      // The newest verified verdict wins: ours, unless the store holds a later check.
      if (this.pending === pending && (stored === undefined || isAfter(pending.record.order, stored.order))) await this.io.publish(pending.text);
      if (this.pending === pending) this.pending = undefined;
    } catch {
      this.schedule();
    }
  }

  close(): void {
    this.closed = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

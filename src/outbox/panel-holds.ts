// Back-off per panel: a panel whose mother fails (or rejects its key) waits as a whole, then probes with one release.
import { retryDelayMs } from './backoff.js';

/** How long a panel's failure streak is remembered after its back-off ended with nothing sent. */
const FORGET_AFTER_MS = 60 * 60_000;

interface Hold {
  /** No row of the panel is claimed before this (epoch ms). */
  until: number;
  /** Failures in a row (each probe that failed counts once). */
  failures: number;
  /** A probe of the panel is in flight: nothing else of it is claimed until it answers. */
  probing: boolean;
}

export interface BackoffSettings {
  baseDelayMs: number;
  maxDelayMs: number;
  authRetryDelayMs: number;
  random: () => number;
  now: () => number;
}

/**
 * One entry per panel that is failing, none for a healthy one, so the map is as large as the
 * number of failing panels. After a failure the panel is held back (its rows are not claimed);
 * once the hold ends, one row is claimed as a probe, and the panel is released when it succeeds.
 */
export class PanelHolds {
  private readonly holds = new Map<string, Hold>();

  constructor(private readonly settings: BackoffSettings) {}

  /** A retryable failure (outage, 5xx, 429, timeout): hold with exponential back-off, `Retry-After` as a floor. */
  failed(panel: string, retryAfterMs: number | undefined): void {
    const hold = this.entry(panel);
    hold.failures++;
    const { baseDelayMs, maxDelayMs, random } = this.settings;
    this.holdUntil(hold, this.settings.now() + retryDelayMs({ attempt: hold.failures, baseDelayMs, maxDelayMs, random, retryAfterMs }));
  }

  /** Held for exactly this long (401: only a human can fix it; a panel the resolver does not know). */
  holdFor(panel: string, delayMs: number): void {
    const hold = this.entry(panel);
    hold.failures++;
    this.holdUntil(hold, this.settings.now() + delayMs);
  }

  /** The mother answered (accepted, or refused the release itself): the panel is healthy. */
  answered(panel: string): void {
    this.holds.delete(panel);
  }

  /** A probe of the panel was claimed: no other row of it until the probe answers. */
  probeStarted(panel: string): void {
    const hold = this.holds.get(panel);
    if (hold) hold.probing = true;
  }

  /** The probe's attempt is over (its outcome already recorded through failed/answered). */
  probeEnded(panel: string): void {
    const hold = this.holds.get(panel);
    if (hold) hold.probing = false;
  }

  /** Epoch ms until which the panel is held, or undefined when its rows may be claimed. */
  heldUntil(panel: string): number | undefined {
    const hold = this.holds.get(panel);
    if (!hold) return undefined;
    return hold.probing ? Number.POSITIVE_INFINITY : hold.until > this.settings.now() ? hold.until : undefined;
  }

  /** Whether the panel is failing: claims take at most one of its rows (a probe). */
  isFailing(panel: string): boolean {
    return this.holds.has(panel);
  }

  /** Panels whose rows are not to be claimed now, and failing panels whose next claim is a probe. */
  claimFilter(): { skip: string[]; probe: string[]; nextAt: number | undefined } {
    const nowMs = this.settings.now();
    const skip: string[] = [];
    const probe: string[] = [];
    let nextAt: number | undefined;
    for (const [panel, hold] of this.holds) {
      if (hold.probing) skip.push(panel);
      else if (hold.until > nowMs) {
        skip.push(panel);
        nextAt = Math.min(nextAt ?? hold.until, hold.until);
      } else if (nowMs - hold.until > FORGET_AFTER_MS) this.holds.delete(panel);
      else probe.push(panel);
    }
    return { skip, probe, nextAt };
  }

  /** How many panels are failing now. */
  get size(): number {
    return this.holds.size;
  }

  private entry(panel: string): Hold {
    let hold = this.holds.get(panel);
    if (!hold) {
      hold = { until: 0, failures: 0, probing: false };
      this.holds.set(panel, hold);
    }
    return hold;
  }

  private holdUntil(hold: Hold, atMs: number): void {
    hold.until = Math.max(hold.until, atMs);
  }
}

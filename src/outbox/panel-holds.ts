// Back-off per panel and per mother: a panel whose mother fails (or rejects its key) waits as a
// whole, then probes with one release; a mother that fails holds every panel at it, so one dead
// or hanging mother costs one probe at a time, not one per panel.
import { retryDelayMs } from './backoff.js';

/** How long a failure streak is remembered after its back-off ended with nothing sent. */
const FORGET_AFTER_MS = 60 * 60_000;

interface Hold {
  /** Nothing of it is claimed (or sent) before this (epoch ms). */
  until: number;
  /** Failures in a row (each probe that failed counts once). */
  failures: number;
  /** A probe is in flight: nothing else of it is claimed until it answers. */
  probing: boolean;
  /** A panel's: the mother its last failure was at, whose hold holds it too. */
  mother?: string | undefined;
  /** A mother's: the panel whose row is probing it. */
  prober?: string | undefined;
}

export interface BackoffSettings {
  baseDelayMs: number;
  maxDelayMs: number;
  authRetryDelayMs: number;
  random: () => number;
  now: () => number;
  /** Probes (of held panels and mothers) in flight at most: the rest of the slots stay for healthy panels. */
  maxProbes: number;
}

/**
 * One entry per panel or mother that is failing, none for a healthy one. After a failure the panel
 * (and, for an outage, its mother) is held back; once the hold ends, one row is claimed as a
 * probe, and the hold is released when it is answered. At most `maxProbes` probes are in flight,
 * so panels whose mother hangs can never take every slot.
 */
export class PanelHolds {
  private readonly holds = new Map<string, Hold>();
  private readonly mothers = new Map<string, Hold>();

  constructor(private readonly settings: BackoffSettings) {}

  /**
   * A retryable failure (outage, 5xx, 429, timeout): hold with exponential back-off, `Retry-After`
   * as a floor. With `mother` (its base URL), the mother is held too: every panel at it waits.
   */
  failed(panel: string, retryAfterMs: number | undefined, mother?: string): void {
    const hold = this.entry(this.holds, panel);
    if (mother !== undefined) {
      const motherHold = this.entry(this.mothers, mother);
      // One failure of the mother per probe, however many rows were in flight when it failed.
      if (!motherHold.probing && motherHold.until > this.settings.now()) {
        hold.mother = mother;
        hold.until = Math.max(hold.until, motherHold.until);
        return;
      }
      this.backOff(motherHold, retryAfterMs);
      hold.mother = mother;
      hold.until = Math.max(hold.until, motherHold.until);
      return;
    }
    this.backOff(hold, retryAfterMs);
  }

  /** Held for exactly this long (401: only a human can fix it; a panel the resolver does not know). */
  holdFor(panel: string, delayMs: number): void {
    const hold = this.entry(this.holds, panel);
    hold.failures++;
    hold.until = Math.max(hold.until, this.settings.now() + delayMs);
  }

  /**
   * Until when the mother at `baseUrl` is held (a row of `panel` for it is then not sent but put
   * back), or undefined when the row may be sent now: the mother is healthy, or its hold is over
   * and this row probes it (others wait for that probe's answer).
   */
  motherHeldUntil(baseUrl: string, panel: string): number | undefined {
    const hold = this.mothers.get(baseUrl);
    if (hold === undefined) return undefined;
    const nowMs = this.settings.now();
    if (hold.until > nowMs) return hold.until;
    if (hold.probing) return nowMs + this.settings.baseDelayMs;
    hold.probing = true;
    hold.prober = panel;
    return undefined;
  }

  /** A row of `panel` was put back unsent, its mother being held: the panel waits with it. */
  deferred(panel: string, mother: string, until: number): void {
    const hold = this.entry(this.holds, panel);
    hold.mother = mother;
    hold.until = Math.max(hold.until, until);
  }

  /** The mother answered (accepted, or refused the release itself): the panel, and its mother, are healthy. */
  answered(panel: string, mother?: string): void {
    const hold = this.holds.get(panel);
    this.holds.delete(panel);
    const up = mother ?? hold?.mother;
    if (up === undefined || !this.mothers.delete(up)) return;
    // Every panel held for that mother alone may send again.
    for (const [other, otherHold] of this.holds) if (otherHold.mother === up && otherHold.failures === 0) this.holds.delete(other);
  }

  /** A probe of the panel was claimed: no other row of it until the probe answers. */
  probeStarted(panel: string): void {
    const hold = this.holds.get(panel);
    if (hold) hold.probing = true;
  }

  /** The attempt is over (its outcome already recorded through failed/answered). */
  probeEnded(panel: string, mother?: string): void {
    const hold = this.holds.get(panel);
    if (hold) hold.probing = false;
    const motherHold = mother === undefined ? undefined : this.mothers.get(mother);
    if (motherHold?.prober === panel) {
      motherHold.probing = false;
      motherHold.prober = undefined;
    }
  }

  /** Epoch ms until which the panel is held, or undefined when its rows may be claimed. */
  heldUntil(panel: string): number | undefined {
    const hold = this.holds.get(panel);
    if (!hold) return undefined;
    if (hold.probing) return Number.POSITIVE_INFINITY;
    const until = Math.max(hold.until, this.motherHold(hold)?.until ?? 0);
    return until > this.settings.now() ? until : undefined;
  }

  /** Whether the panel is failing: claims take at most one of its rows (a probe). */
  isFailing(panel: string): boolean {
    return this.holds.has(panel);
  }

  /**
   * Panels whose rows are not to be claimed now, and failing panels whose next claim is a probe:
   * one per mother, and no more than `maxProbes` in flight in all.
   */
  claimFilter(): { skip: string[]; probe: string[]; nextAt: number | undefined } {
    const nowMs = this.settings.now();
    const skip: string[] = [];
    const probe: string[] = [];
    let nextAt: number | undefined;
    let probesLeft = this.settings.maxProbes - this.probesInFlight();
    const probedMothers = new Set<string>();
    for (const [panel, hold] of this.holds) {
      const mother = this.motherHold(hold);
      const until = Math.max(hold.until, mother?.until ?? 0);
      if (hold.probing || mother?.probing === true) skip.push(panel);
      else if (until > nowMs) {
        skip.push(panel);
        nextAt = Math.min(nextAt ?? until, until);
      } else if (nowMs - until > FORGET_AFTER_MS) this.holds.delete(panel);
      else if (probesLeft <= 0 || (hold.mother !== undefined && probedMothers.has(hold.mother))) skip.push(panel);
      else {
        probe.push(panel);
        probesLeft--;
        if (hold.mother !== undefined) probedMothers.add(hold.mother);
      }
    }
    return { skip, probe, nextAt };
  }

  /** How many panels are failing now. */
  get size(): number {
    return this.holds.size;
  }

  /** Up to `limit` of the panels failing now (for per-panel metrics). */
  failingPanels(limit: number): string[] {
    const panels: string[] = [];
    for (const panel of this.holds.keys()) {
      if (panels.length === limit) break;
      panels.push(panel);
    }
    return panels;
  }

  private probesInFlight(): number {
    let count = 0;
    for (const hold of this.holds.values()) if (hold.probing) count++;
    for (const hold of this.mothers.values()) if (hold.probing) count++;
    return count;
  }

  private motherHold(hold: Hold): Hold | undefined {
    return hold.mother === undefined ? undefined : this.mothers.get(hold.mother);
  }

  private backOff(hold: Hold, retryAfterMs: number | undefined): void {
    hold.failures++;
    hold.probing = false;
    hold.prober = undefined;
    const { baseDelayMs, maxDelayMs, random } = this.settings;
    hold.until = Math.max(hold.until, this.settings.now() + retryDelayMs({ attempt: hold.failures, baseDelayMs, maxDelayMs, random, retryAfterMs }));
  }

  private entry(map: Map<string, Hold>, key: string): Hold {
    let hold = map.get(key);
    if (!hold) {
      hold = { until: 0, failures: 0, probing: false };
      map.set(key, hold);
    }
    return hold;
  }
}

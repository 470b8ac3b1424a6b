// Back-off per panel and per mother: a panel whose releases fail (or whose key is refused) waits
// as a whole, then probes with one release; a mother that fails for two panels or more holds
// every panel at it, so one dead or hanging mother costs one probe at a time, not one per panel.
import { retryDelayMs } from '../backoff.js';

/** How long a failure streak is remembered after its back-off ended with nothing sent. */
const FORGET_AFTER_MS = 60 * 60_000;

interface Hold {
  /** Nothing of it is claimed (or sent) before this (epoch ms). */
  until: number;
  /** Failures in a row (a mother's: each probe that failed counts once). 0: a panel only waits for its mother. */
  failures: number;
  /** A probe is in flight: nothing else of it is claimed (or sent) until it answers. */
  probing: boolean;
  /** A panel's: the mother its rows failed or waited at, whose hold holds it too. */
  mother?: string | undefined;
  /** A mother's: the panel whose row probes it. */
  prober?: number | undefined;
  /**
   * A mother's, before it is held: the one panel whose rows failed there so far. One panel's
   * failure may be its own release's (a title that makes the mother fail); a second panel's makes
   * it the mother's.
   */
  suspect?: string | undefined;
}

export interface BackoffSettings {
  baseDelayMs: number;
  maxDelayMs: number;
  authRetryDelayMs: number;
  random: () => number;
  now: () => number;
  /** Probes (of held panels and mothers) in flight at most: the rest of the slots stay for healthy panels. */
  maxProbes: number;
  /** Rows of one panel in flight at most (many panels): one tenant never takes every slot. */
  maxPerPanel: number;
}

/**
 * What `admit` decides for a row about to be sent: send it (as a probe or not), or put it back
 * until `until`; `wasProbe` when it had been claimed as its panel's probe.
 */
export type Admission = { send: true; probe: boolean } | { send: false; until: number; wasProbe: boolean };

/**
 * One entry per panel or mother that is failing, none for a healthy one. After a failure the
 * panel (and, once two panels fail at it, its mother) is held back; once the hold ends, one row is
 * sent as a probe, and the hold is released when it is answered. Probes are counted when sent:
 * at most `maxProbes` are in flight, so panels whose mother hangs can never take every slot.
 */
export class PanelHolds {
  private readonly holds = new Map<string, Hold>();
  private readonly mothers = new Map<string, Hold>();
  private probes = 0;
  /** Rows in flight per panel (only panels with some). */
  private readonly sending = new Map<string, number>();

  constructor(private readonly settings: BackoffSettings) {}

  /**
   * A retryable failure (outage, 5xx, 429, timeout): the panel backs off exponentially,
   * `Retry-After` as a floor. With `mother` (its base URL), a failure of a second panel there
   * holds the mother too, and a failed probe of a held mother backs it off further.
   */
  failed(panel: string, rowId: number, retryAfterMs: number | undefined, mother?: string): void {
    const hold = this.entry(this.holds, panel);
    // Held already: only a probe's failure counts, not every row that was in flight meanwhile.
    if (hold.failures === 0 || hold.probing || hold.until <= this.settings.now()) this.backOff(hold, retryAfterMs);
    if (mother === undefined) return;
    hold.mother = mother;
    const motherHold = this.entry(this.mothers, mother);
    if (motherHold.failures > 0) {
      if (motherHold.probing && motherHold.prober === rowId) this.backOff(motherHold, retryAfterMs);
      return;
    }
    if (motherHold.suspect === undefined || motherHold.suspect === panel) {
      motherHold.suspect = panel;
      motherHold.until = this.settings.now(); // forgotten an hour after, with no answer between
      return;
    }
    this.backOff(motherHold, retryAfterMs);
  }

  /** Held for exactly this long (401: only a human can fix it; a panel the resolver does not know). */
  holdFor(panel: string, delayMs: number): void {
    const hold = this.entry(this.holds, panel);
    hold.failures++;
    hold.probing = false;
    hold.until = Math.max(hold.until, this.settings.now() + delayMs);
  }

  /**
   * Whether a claimed row of `panel` for the mother at `mother` is sent now, and whether it is a
   * probe (of its held mother, or of its failing panel); or until when it is put back unsent.
   */
  admit(panel: string, rowId: number, mother: string | undefined): Admission {
    const nowMs = this.settings.now();
    const hold = this.holds.get(panel);
    const wasProbe = hold?.probing === true && hold.failures > 0;
    const later = { send: false, until: nowMs + this.settings.baseDelayMs, wasProbe } as const;
    const motherHold = mother === undefined ? undefined : this.mothers.get(mother);
    if (motherHold !== undefined && motherHold.failures > 0) {
      if (motherHold.until > nowMs) return { send: false, until: motherHold.until, wasProbe };
      if (motherHold.probing || this.probes >= this.settings.maxProbes) return later;
      motherHold.probing = true;
      motherHold.prober = rowId;
      this.probes++;
      return { send: true, probe: true };
    }
    if (hold === undefined || hold.failures === 0) return { send: true, probe: false };
    // A failing panel: only its claimed probe is sent, once its hold is over (rows claimed before
    // it failed wait with it).
    if (hold.until > nowMs) return { send: false, until: hold.until, wasProbe };
    if (!wasProbe || this.probes >= this.settings.maxProbes) return later;
    this.probes++;
    return { send: true, probe: true };
  }

  /**
   * A row of `panel` was put back unsent: the panel waits with it (for its mother, if named).
   * `wasProbe`: the row was the panel's probe, so the panel may probe again.
   */
  deferred(panel: string, until: number, mother: string | undefined, wasProbe: boolean): void {
    const hold = this.entry(this.holds, panel);
    if (wasProbe) hold.probing = false;
    if (mother !== undefined) hold.mother = mother;
    hold.until = Math.max(hold.until, until);
  }

  /** The mother took the release (or refused the release itself): the panel, and its mother, are healthy. */
  answered(panel: string, mother?: string): void {
    const hold = this.holds.get(panel);
    this.holds.delete(panel);
    const up = mother ?? hold?.mother;
    if (up !== undefined) this.motherAnswered(up);
  }

  /**
   * The mother answered over HTTP (even a 401 or a 429 for one panel): it is up. Panels that only
   * waited for it go on; panels whose own rows failed keep their own back-off.
   */
  motherAnswered(mother: string): void {
    if (!this.mothers.delete(mother)) return;
    for (const [panel, hold] of this.holds) if (hold.mother === mother && hold.failures === 0) this.holds.delete(panel);
  }

  /** A row of `panel` was claimed and is being delivered (or put back): counted until `released`. */
  claimed(panel: string): void {
    this.sending.set(panel, (this.sending.get(panel) ?? 0) + 1);
  }

  released(panel: string): void {
    const left = (this.sending.get(panel) ?? 1) - 1;
    if (left > 0) this.sending.set(panel, left);
    else this.sending.delete(panel);
  }

  /** Whether some panel has `maxPerPanel` rows in flight (a claim may then skip it). */
  anyAtCap(): boolean {
    for (const count of this.sending.values()) if (count >= this.settings.maxPerPanel) return true;
    return false;
  }

  /** A probe of the panel was claimed: no other row of it until the probe answers. */
  probeStarted(panel: string): void {
    const hold = this.holds.get(panel);
    if (hold) hold.probing = true;
  }

  /**
   * A claimed row of `panel` went back unsent before its attempt (the worker stopped, or it waited
   * too long for a slot): if it was the panel's probe, the panel may probe again.
   */
  handedBack(panel: string): void {
    const hold = this.holds.get(panel);
    if (hold?.probing === true && hold.failures > 0) hold.probing = false;
  }

  /** A sent row's attempt is over (its outcome already recorded), as `admit` let it go. */
  ended(panel: string, rowId: number, mother: string | undefined, probe: boolean): void {
    if (probe) {
      this.probes--;
      const hold = this.holds.get(panel);
      if (hold) hold.probing = false;
    }
    const motherHold = mother === undefined ? undefined : this.mothers.get(mother);
    if (motherHold?.prober === rowId) {
      motherHold.probing = false;
      motherHold.prober = undefined;
    }
  }

  /** Epoch ms until which the panel is held, or undefined when its rows may be claimed. */
  heldUntil(panel: string): number | undefined {
    const hold = this.holds.get(panel);
    if (!hold) return undefined;
    const mother = this.heldMother(hold);
    if (hold.probing || mother?.probing === true) return Number.POSITIVE_INFINITY;
    const until = Math.max(hold.until, mother?.until ?? 0);
    return until > this.settings.now() ? until : undefined;
  }

  /** Whether the mother at `baseUrl` is held now (two panels or more failed there). */
  motherHeld(baseUrl: string): boolean {
    return (this.mothers.get(baseUrl)?.failures ?? 0) > 0;
  }

  /** Whether the panel is failing: claims take at most one of its rows (a probe). */
  isFailing(panel: string): boolean {
    return (this.holds.get(panel)?.failures ?? 0) > 0;
  }

  /**
   * Panels whose rows are not to be claimed now, and failing panels whose next claim is a probe
   * (one row): as many as probes may start now, taken in turn (a panel offered goes to the back),
   * so a held panel with nothing due never keeps the others waiting. A panel that only waited for
   * its mother is claimable again once the mother's hold is over (the first of its rows sent
   * probes the mother, the others are put back meanwhile). With `capPerPanel`, a panel with
   * `maxPerPanel` rows in flight is skipped too (the worker claims again without it when nobody
   * else had anything due: the cap shares slots, it never leaves them idle).
   */
  claimFilter(capPerPanel = true): { skip: string[]; probe: string[]; nextAt: number | undefined } {
    const nowMs = this.settings.now();
    const skip: string[] = [];
    const probe: string[] = [];
    let nextAt: number | undefined;
    let probesLeft = this.settings.maxProbes - this.probes;
    for (const [panel, hold] of [...this.holds]) {
      const mother = this.heldMother(hold);
      const until = Math.max(hold.until, mother?.until ?? 0);
      if (hold.probing || mother?.probing === true) skip.push(panel);
      else if (until > nowMs) {
        skip.push(panel);
        nextAt = Math.min(nextAt ?? until, until);
      } else if (nowMs - until > FORGET_AFTER_MS) this.holds.delete(panel);
      else if (hold.failures === 0) continue;
      else if (probesLeft <= 0) skip.push(panel);
      else {
        probe.push(panel);
        probesLeft--;
        this.holds.delete(panel);
        this.holds.set(panel, hold);
      }
    }
    if (capPerPanel) for (const [panel, count] of this.sending) if (count >= this.settings.maxPerPanel) skip.push(panel);
    for (const [mother, hold] of this.mothers) if (!hold.probing && nowMs - hold.until > FORGET_AFTER_MS) this.mothers.delete(mother);
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

  /** The hold of the panel's mother, when that mother is held. */
  private heldMother(hold: Hold): Hold | undefined {
    const mother = hold.mother === undefined ? undefined : this.mothers.get(hold.mother);
    return mother !== undefined && mother.failures > 0 ? mother : undefined;
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

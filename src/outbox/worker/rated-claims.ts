// With `maxPerSecond`: claims leave alone the panels whose mother already has a row waiting for a
// turn well ahead (mother-rate.ts). Rows claimed for such a mother would only wait in slots that
// other mothers' releases could use, holding their leases; the worker is woken when that mother
// may be claimed from again.
import type { ClaimHolds, PanelRouting } from '../panels/panel-routing.js';
import { MotherRate } from './mother-rate.js';

/** The outbox's routing under `maxPerSecond` (gated, with the rate its attempts wait on), or as it is without. */
export function rateLimited(
  routing: PanelRouting,
  config: { maxPerSecond: number | undefined; now: () => number },
): { routing: PanelRouting; rate: MotherRate | undefined } {
  if (config.maxPerSecond === undefined) return { routing, rate: undefined };
  const rate = new MotherRate(config.maxPerSecond, config.now);
  return { routing: rateGatedRouting(routing, rate), rate };
}

/** `routing`, whose claims also skip the panels of mothers whose turns are taken for now. */
export function rateGatedRouting(routing: PanelRouting, rate: MotherRate): PanelRouting {
  return {
    panel: routing.panel,
    senderFor: (panel) => routing.senderFor(panel),
    claim: (request, holds, capPerPanel, pauses) => routing.claim(request, gatedHolds(holds, rate), capPerPanel, pauses),
  };
}

/** The worker's holds as the claims see them, with the rate's waits added to the back-off's. */
function gatedHolds(holds: ClaimHolds, rate: MotherRate): ClaimHolds {
  return {
    isFailing: (panel) => holds.isFailing(panel),
    probeStarted: (panel) => holds.probeStarted(panel),
    heldUntil(panel) {
      const held = holds.heldUntil(panel);
      const full = rate.fullUntil(panel);
      if (full === undefined) return held;
      return held === undefined ? full : Math.max(held, full);
    },
    claimFilter(capPerPanel) {
      const filter = holds.claimFilter(capPerPanel);
      const full = rate.fullPanels();
      if (full.panels.length === 0) return filter;
      const skipped = new Set(full.panels);
      const nextAt = filter.nextAt === undefined || full.until === undefined ? (filter.nextAt ?? full.until) : Math.min(filter.nextAt, full.until);
      // A failing panel whose mother is full probes once that mother has a turn free.
      return { skip: [...filter.skip, ...full.panels], probe: filter.probe.filter((panel) => !skipped.has(panel)), nextAt };
    },
  };
}

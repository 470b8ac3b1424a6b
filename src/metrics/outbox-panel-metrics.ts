// Per-panel outbox series for `panels` mode, with bounded cardinality: only panels with something
// to say (a backlog, dead releases, a failing mother or key) get a series, and at most `limit` of
// each. 10,000 quiet panels add no series at all.
import { Gauge, type Registry } from 'prom-client';
import type { OutboxTelemetry } from '../outbox/events.js';
import type { ReleaseOutbox } from '../outbox/outbox.js';
import type { PanelCounts } from '../outbox/store.js';

export function registerOutboxPanelMetrics(registry: Registry, outbox: ReleaseOutbox, telemetry: OutboxTelemetry, limit: number): void {
  const registers = [registry];
  const counts = sharedPanelCounts(outbox, limit);
  new Gauge({
    name: 'panel_license_outbox_panel_releases',
    help: `Pending and dead releases of the panels that have any (the ${limit} with most pending at most), by panel and state.`,
    labelNames: ['panel', 'state'],
    registers,
    async collect() {
      this.reset();
      for (const { panel, pending, dead } of await counts()) {
        if (pending > 0) this.set({ panel, state: 'pending' }, pending);
        if (dead > 0) this.set({ panel, state: 'dead' }, dead);
      }
    },
  });
  new Gauge({
    name: 'panel_license_outbox_panel_oldest_pending_age_seconds',
    help: 'Age of the oldest pending release of each panel with a backlog (same panels as panel_license_outbox_panel_releases), in seconds.',
    labelNames: ['panel'],
    registers,
    async collect() {
      this.reset();
      const now = Date.now();
      for (const { panel, oldestPendingAt } of await counts())
        if (oldestPendingAt !== undefined) this.set({ panel }, Math.max(0, (now - oldestPendingAt) / 1000));
    },
  });
  new Gauge({
    name: 'panel_license_outbox_panel_failing',
    help: `1 for each panel this instance holds back after failures (its mother down, its key refused, unknown to the resolver); ${limit} at most.`,
    labelNames: ['panel'],
    registers,
    collect() {
      this.reset();
      for (const panel of telemetry.failingPanels(limit)) this.set({ panel }, 1);
    },
  });
}

/** One panelStats() call per scrape, shared by the gauges; a failing store leaves them empty. */
function sharedPanelCounts(outbox: ReleaseOutbox, limit: number): () => Promise<PanelCounts[]> {
  let pending: Promise<PanelCounts[]> | undefined;
  return () => {
    pending ??= outbox
      .panelStats(limit)
      .catch(() => [])
      .finally(() => {
        setImmediate(() => {
          pending = undefined;
        });
      });
    return pending;
  };
}

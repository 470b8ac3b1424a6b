// Prometheus metrics of a release outbox: row counts and the oldest pending row read at scrape
// time (one stats() call per scrape), deliveries counted from the outbox's own events.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { OutboxObserver } from '../outbox/events.js';
import type { OutboxStats, ReleaseOutbox } from '../outbox/outbox.js';
import { OUTBOX_STATES } from '../outbox/store.js';

/** Push durations: like the license check's, capped by the client's `timeoutMs`. */
const DELIVERY_BUCKETS = [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export function registerOutboxMetrics(registry: Registry, outbox: ReleaseOutbox, observe: (observer: OutboxObserver) => () => void): () => void {
  const registers = [registry];
  const stats = sharedStats(outbox);

  new Gauge({
    name: 'panel_license_outbox_releases',
    help: 'Releases stored in the outbox, by state (the whole table with a shared PostgreSQL store).',
    labelNames: ['state'],
    registers,
    async collect() {
      this.reset();
      const current = await stats();
      if (current) for (const state of OUTBOX_STATES) this.set({ state }, current[state]);
    },
  });
  const fromStats = (name: string, help: string, value: (stats: OutboxStats, now: number) => number) =>
    new Gauge({
      name,
      help,
      registers,
      async collect() {
        this.reset();
        const current = await stats();
        if (current) this.set(value(current, Date.now()));
      },
    });
  fromStats('panel_license_outbox_oldest_pending_age_seconds', 'Age of the oldest pending release, in seconds (0 when none is pending).', (s, now) =>
    s.oldestPendingAt === undefined ? 0 : Math.max(0, (now - s.oldestPendingAt) / 1000),
  );
  fromStats('panel_license_outbox_in_flight', 'Deliveries this instance has under way.', (s) => s.inFlight);
  fromStats('panel_license_outbox_paused', '1 while this worker holds off after failures (mother down, 401, Retry-After), else 0.', (s, now) =>
    s.pausedUntil !== undefined && s.pausedUntil > now ? 1 : 0,
  );
  fromStats('panel_license_outbox_delivery_paused', '1 while an operator has paused delivery (outbox.pause(), the console or the CLI), else 0.', (s) =>
    s.paused ? 1 : 0,
  );

  const cancelled = new Counter({
    name: 'panel_license_outbox_cancelled_total',
    help: 'Releases cancelled from this instance before they were sent (outbox.cancel(), cancelTrack(), the console or the CLI).',
    registers,
  });
  const deliveries = new Counter({
    name: 'panel_license_outbox_deliveries_total',
    help: 'Delivery attempts this instance made, by outcome (delivered, retry, dead) and, for failures, error code.',
    labelNames: ['outcome', 'code'],
    registers,
  });
  const duration = new Histogram({
    name: 'panel_license_outbox_delivery_duration_seconds',
    help: 'Duration of release pushes this instance made, in seconds.',
    labelNames: ['outcome'],
    buckets: DELIVERY_BUCKETS,
    registers,
  });
  return observe((event, payload) => {
    if (event === 'cancelled') cancelled.inc();
    if (event !== 'delivered' && event !== 'retrying' && event !== 'dead') return;
    const { durationMs, error } = payload as { durationMs: number; error?: unknown };
    const outcome = event === 'retrying' ? 'retry' : event;
    if (outcome === 'delivered') deliveries.inc({ outcome });
    else deliveries.inc({ outcome, code: codeOf(error) });
    duration.observe({ outcome }, durationMs / 1000);
  });
}

function codeOf(error: unknown): string {
  const code = (error as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' && /^[A-Z_]{1,40}$/.test(code) ? code : 'UNKNOWN';
}

/**
 * One stats() call per scrape, shared by the gauges (prom-client awaits them side by side). A
 * failing store or a closed outbox leaves the gauges without samples: a scrape never fails.
 */
function sharedStats(outbox: ReleaseOutbox): () => Promise<OutboxStats | undefined> {
  let pending: Promise<OutboxStats | undefined> | undefined;
  return () => {
    pending ??= outbox
      .stats()
      .catch(() => undefined)
      .finally(() => {
        setImmediate(() => {
          pending = undefined;
        });
      });
    return pending;
  };
}

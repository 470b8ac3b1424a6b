// Prometheus metrics of a license guard: gauges read at scrape time, counters and a histogram fed
// by the guard's telemetry as checks end. Nothing here runs on the request path.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { GuardInstruments, PanelReading } from '../guard/telemetry.js';
import { LICENSE_STATES } from '../serve/license-state.js';

/** Check durations: the mother answers in tens of ms; `timeoutMs` (10 s by default) caps the tail. */
export const CHECK_BUCKETS = [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/**
 * Registers the guard's metrics in `registry`; returns what stops the counters being fed.
 * Single panel: no panel label. `panels` mode: per-panel gauges carry `panel` for `panelSeries`
 * panels at most, those that carry information first (locked, expiring soon, grace, failing, pending); totals
 * by state and of failing panels cover every panel. Counters stay summed over panels.
 */
export function registerGuardMetrics(registry: Registry, instruments: GuardInstruments, panelSeries: number): () => void {
  const { multiPanel, telemetry } = instruments;
  const registers = [registry];
  const perPanel = multiPanel ? (['panel'] as const) : ([] as const);
  const readings = oncePerScrape(() => instruments.readings(panelSeries));
  const summary = oncePerScrape(() => instruments.summary?.());
  const label = (reading: PanelReading) => (multiPanel ? { panel: reading.panel } : {});

  /**
   * A gauge with one sample per panel, computed from its reading. When `value` is undefined there
   * is no sample in `panels` mode, and NaN for the single panel (prom-client would show 0 for an
   * unlabelled gauge, which would read as "just now").
   */
  const perPanelGauge = (name: string, help: string, value: (reading: PanelReading, now: number) => number | undefined) =>
    new Gauge({
      name,
      help,
      labelNames: [...perPanel],
      registers,
      collect() {
        this.reset();
        const now = Date.now();
        for (const reading of readings()) {
          const sample = value(reading, now);
          if (sample !== undefined) this.set(label(reading), sample);
          else if (!multiPanel) this.set(Number.NaN);
        }
      },
    });

  new Gauge({
    name: 'panel_license_state',
    help: multiPanel
      ? 'License state of each panel in memory: 1 for its current state (other states have no sample).'
      : 'License state: 1 for the current state, 0 for the others.',
    labelNames: [...perPanel, 'state'],
    registers,
    collect() {
      this.reset();
      for (const reading of readings())
        for (const state of LICENSE_STATES)
          if (!multiPanel || reading.status.state === state) this.set({ ...label(reading), state }, reading.status.state === state ? 1 : 0);
    },
  });
  if (multiPanel) {
    new Gauge({
      name: 'panel_license_panels',
      help: 'Panels in memory, by license state (every panel, whatever has series of its own).',
      labelNames: ['state'],
      registers,
      collect() {
        const counts = summary()?.byState;
        for (const state of LICENSE_STATES) this.set({ state }, counts?.[state] ?? 0);
      },
    });
    new Gauge({
      name: 'panel_license_panels_failing',
      help: 'Panels in memory whose last license check failed, or whose shared store is failing.',
      registers,
      collect() {
        this.set(summary()?.failing ?? 0);
      },
    });
  }
  perPanelGauge(
    'panel_license_last_success_age_seconds',
    'Seconds since the last verified verdict (NaN, or no sample, before the first).',
    ({ status }, now) => (status.lastSuccessAt === null ? undefined : Math.max(0, (now - status.lastSuccessAt) / 1000)),
  );
  perPanelGauge(
    'panel_license_grace_remaining_seconds',
    'Seconds before the panel locks if no check succeeds (grace or expires_at); 0 when locked or pending.',
    ({ graceLeftMs }) => graceLeftMs / 1000,
  );
  perPanelGauge(
    'panel_license_expires_in_seconds',
    "Seconds to the end of the active license's expires_at day (UTC) on the mother's clock; negative once passed (NaN, or no sample, without one).",
    ({ expiresInMs }) => (expiresInMs === null ? undefined : Math.round(expiresInMs / 1000)),
  );
  perPanelGauge('panel_license_clock_offset_seconds', "The mother's clock minus this host's, in seconds.", ({ status }) => status.clockOffsetMs / 1000);
  perPanelGauge('panel_license_consecutive_failures', 'Failed license checks in a row (0 after a success).', ({ status }) => status.consecutiveFailures);
  if (instruments.hasStore)
    perPanelGauge('panel_license_store_up', 'Cluster mode: 1 while the shared store answers, 0 while it fails.', ({ status }) =>
      status.store === 'ok' ? 1 : 0,
    );

  const checks = new Counter({
    name: 'panel_license_checks_total',
    help: 'License checks this instance ran, by result: ok, inactive, or the error code (TIMEOUT, AUTH_REJECTED…).',
    labelNames: ['result'],
    registers,
  });
  const duration = new Histogram({
    name: 'panel_license_check_duration_seconds',
    help: 'Duration of the license checks this instance ran, in seconds.',
    labelNames: ['result'],
    buckets: CHECK_BUCKETS,
    registers,
  });
  const transitions = new Counter({
    name: 'panel_license_transitions_total',
    help: 'Changes of license state (to="locked": a lock; from="locked", to="active": an unlock).',
    labelNames: ['from', 'to'],
    registers,
  });
  const stopChecks = telemetry.onCheck(({ result, durationMs }) => {
    checks.inc({ result });
    duration.observe({ result }, durationMs / 1000);
  });
  const stopTransitions = telemetry.onTransition(({ state, previous }) => transitions.inc({ from: previous, to: state }));
  return () => {
    stopChecks();
    stopTransitions();
  };
}

/**
 * One computation shared by every collect of a scrape (prom-client starts them all in the same
 * turn): with 10,000 panels, the guard's status is read once per panel per scrape, not per gauge.
 */
export function oncePerScrape<T>(compute: () => T): () => T {
  let cached: { value: T } | undefined;
  return () => {
    if (cached) return cached.value;
    cached = { value: compute() };
    setImmediate(() => {
      cached = undefined;
    });
    return cached.value;
  };
}

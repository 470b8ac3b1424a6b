// Entry point of panel-license-guard/metrics: Prometheus metrics of a guard and an outbox (prom-client).
import type { Registry } from 'prom-client';
import type { GuardInstruments } from './guard/telemetry.js';
import { TELEMETRY } from './guard/telemetry.js';
import { registerGuardMetrics } from './metrics/guard-metrics.js';
import { registerOutboxMetrics } from './metrics/outbox-metrics.js';
import { registerOutboxPanelMetrics } from './metrics/outbox-panel-metrics.js';
import { OptionProblems, optionError, optionNames, positiveInteger, rejectUnknownOptions } from './options.js';
import { OUTBOX_TELEMETRY, type OutboxTelemetry } from './outbox/events.js';
import type { ReleaseOutbox } from './outbox/outbox.js';

export interface RegisterMetricsOptions {
  /** The prom-client registry to add the metrics to, e.g. `client.register` (the default registry). Required. */
  registry: Registry;
  /** The guard whose license checks and state to measure. @default undefined (no guard metrics) */
  guard?: object;
  /** The release outbox whose rows and deliveries to measure. @default undefined (no outbox metrics) */
  outbox?: ReleaseOutbox;
  /**
   * Many panels: at most this many panels get series of their own, the others are in totals
   * only. For a `panels` guard, those that carry information first (locked, in grace, failing,
   * pending; then active ones while room is left); for an outbox with `panels`, those with a
   * backlog, dead rows or failures. 0 turns per-panel series off. @default 100
   */
  panelSeries?: number;
}

/** Per-panel series at most, whatever `panelSeries` asks: a bound on what one scrape can cost. */
const MAX_PANEL_SERIES = 10_000;

export interface RegisteredMetrics {
  /** Stops feeding the counters and removes every metric this call registered. */
  unregister(): void;
}

/**
 * Adds `panel_license_*` metrics to `registry`. Gauges are read when the registry is scraped;
 * counters and histograms are fed as checks and deliveries end. Nothing runs per request.
 */
export function registerMetrics(options: RegisterMetricsOptions): RegisteredMetrics {
  if (typeof options !== 'object' || options === null)
    throw optionError('options', 'must be an object', "Pass { registry, guard, outbox } with registry = require('prom-client').register.");
  const problems = new OptionProblems();
  rejectUnknownOptions(
    'registerMetrics',
    options,
    optionNames<RegisterMetricsOptions>({ registry: true, guard: true, outbox: true, panelSeries: true }),
    problems,
  );
  const { registry, guard, outbox } = options;
  const panelSeries = problems.check(() => positiveInteger('panelSeries', options.panelSeries, 100, 0, MAX_PANEL_SERIES), 0);
  if (typeof registry?.registerMetric !== 'function' || typeof registry.getMetricsAsArray !== 'function')
    problems.add(optionError('registry', 'is not a prom-client registry', "Pass `client.register` or `new client.Registry()` from 'prom-client'."));
  const instruments = (guard as { [TELEMETRY]?: GuardInstruments } | undefined)?.[TELEMETRY];
  if (guard !== undefined && instruments === undefined)
    problems.add(optionError('guard', 'is not a guard from licenseGuard()', 'Pass the value licenseGuard() returned.'));
  const telemetry = (outbox as { [OUTBOX_TELEMETRY]?: OutboxTelemetry } | undefined)?.[OUTBOX_TELEMETRY];
  const observe = telemetry?.observe;
  if (outbox !== undefined && observe === undefined)
    problems.add(optionError('outbox', 'is not an outbox from createReleaseOutbox()', 'Pass the value createReleaseOutbox() returned.'));
  if (guard === undefined && outbox === undefined) problems.add(optionError('guard', 'and `outbox` are both missing', 'Pass at least one of them.'));
  const taken = problems.count === 0 ? registry.getMetricsAsArray().find((metric) => metric.name.startsWith('panel_license_')) : undefined;
  if (taken)
    problems.add(
      optionError(
        'registry',
        `already has panel-license-guard metrics (${taken.name})`,
        'Register once per registry, or give each guard a registry of its own.',
      ),
    );
  problems.throwIfAny('registerMetrics');

  const before = new Set(registry.getMetricsAsArray().map((metric) => metric.name));
  const stops: (() => void)[] = [];
  if (instruments) stops.push(registerGuardMetrics(registry, instruments, panelSeries));
  if (outbox && observe) stops.push(registerOutboxMetrics(registry, outbox, observe));
  if (outbox && telemetry?.manyPanels && panelSeries > 0) registerOutboxPanelMetrics(registry, outbox, telemetry, panelSeries);
  const added = registry
    .getMetricsAsArray()
    .map((metric) => metric.name)
    .filter((name) => !before.has(name));
  return {
    unregister() {
      for (const stop of stops.splice(0)) stop();
      for (const name of added) registry.removeSingleMetric(name);
    },
  };
}

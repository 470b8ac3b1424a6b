// The `tracing` option of licenseGuard() and createReleaseOutbox(), and what it resolves to: the
// OpenTelemetry API (for the active context) and the tracer the spans are started on.

import { type OptionProblems, optionError, shown } from '../options.js';
import { loadOtelApi } from './otel-api.js';

/** An OpenTelemetry `TracerProvider` (e.g. the SDK's `NodeTracerProvider`): only `getTracer()` is called. */
export interface TracerProviderLike {
  getTracer(name: string, version?: string): object;
}

/**
 * OpenTelemetry spans (docs/tracing.md). Left out: spans go to the SDK your app registered with
 * `@opentelemetry/api` when that optional peer is installed (nothing registered: the API's no-op
 * tracer, which records nothing); not installed, nothing is traced and nothing is loaded.
 * `false`: never trace, never load the API. `true`: like the default, but a missing API is an
 * error at construction. `{ tracerProvider }`: spans go to that provider instead of the global one.
 */
export type TracingOption = boolean | { tracerProvider: TracerProviderLike };

/**
 * What the guard and the outbox trace with: otel-api.ts's `Tracing` (the API and a tracer), typed
 * opaquely here so that no declaration of the package needs @opentelemetry/api to type-check.
 */
export interface Tracing {
  readonly api: object;
  readonly tracer: object;
}

/** The instrumentation scope of every span of the package. */
export const TRACER_NAME = 'panel-license-guard';

const FIX = 'Leave it out to trace whenever an OpenTelemetry SDK is registered, pass `{ tracerProvider }`, or `false` to never trace.';

function providerOf(option: object): TracerProviderLike | undefined {
  const keys = Object.keys(option);
  const provider = (option as { tracerProvider?: unknown }).tracerProvider as TracerProviderLike | undefined;
  if (keys.length !== 1 || keys[0] !== 'tracerProvider' || typeof provider?.getTracer !== 'function') return undefined;
  return provider;
}

/**
 * Validates `tracing` (problems are recorded, as every option's) and loads the API when it may
 * be used. Undefined: nothing is traced, and the hot paths skip tracing with one test.
 */
export function resolveTracing(option: unknown, problems: OptionProblems, load?: (id: string) => unknown): Tracing | undefined {
  if (option === false) return undefined;
  let provider: TracerProviderLike | undefined;
  if (typeof option === 'object' && option !== null) {
    provider = providerOf(option);
    if (provider === undefined) {
      problems.add(optionError('tracing', `must be true, false or { tracerProvider } (an object with a getTracer() method), received ${shown(option)}`, FIX));
      return undefined;
    }
  } else if (option !== undefined && option !== true) {
    problems.add(optionError('tracing', `must be true, false or { tracerProvider }, received ${shown(option)}`, FIX));
    return undefined;
  }
  const api = problems.check(() => loadOtelApi(option !== undefined, load), undefined);
  if (api === undefined) return undefined;
  // Taken once: the global provider's tracer is a proxy that follows an SDK registered later.
  return { api, tracer: (provider ?? api.trace).getTracer(TRACER_NAME) };
}

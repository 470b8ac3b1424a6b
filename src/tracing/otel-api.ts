// Loads @opentelemetry/api, an optional peer dependency, only when tracing may be used: an app
// that never installed it (or passes `tracing: false`) never loads a line of it.

import type * as Api from '@opentelemetry/api';
import { describeError } from '../logger.js';

export type OtelApi = typeof Api;
export type { Link, Span, SpanContext } from '@opentelemetry/api';

/** A resolved `tracing` (tracing-option.ts) as the span makers use it. */
export interface ApiTracing {
  api: OtelApi;
  tracer: Api.Tracer;
}

// The package runs as CommonJS (its ESM entry points wrap the CommonJS build), so `require`
// resolves the API from where the package is installed: the copy the app registered its SDK
// with, or another 1.x copy, which finds that SDK through the API's global registry.
const requireFromHere = (id: string): unknown => require(id);

export const OTEL_API_HINT =
  'Install it (`npm install @opentelemetry/api`) and register an OpenTelemetry SDK, or leave `tracing` out (spans then go wherever an installed API sends them).';

function isMissing(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  return code === 'MODULE_NOT_FOUND' && typeof message === 'string' && message.includes("'@opentelemetry/api'");
}

/**
 * The API, or undefined when it is not installed. Installed but unusable (a broken install):
 * `required` throws saying why; otherwise tracing is simply off. `load` is injectable for tests.
 */
export function loadOtelApi(required: boolean, load: (id: string) => unknown = requireFromHere): OtelApi | undefined {
  try {
    const api = load('@opentelemetry/api') as Partial<OtelApi>;
    // 1.3 or later: startSpan with links, createTraceState, isSpanContextValid.
    if (typeof api.trace?.getTracer !== 'function' || typeof api.createTraceState !== 'function' || typeof api.isSpanContextValid !== 'function')
      throw new Error('it is older than 1.3');
    return api as OtelApi;
  } catch (error) {
    if (!required) return undefined;
    const problem = isMissing(error) ? 'is not installed' : `failed to load (${describeError(error)})`;
    throw new TypeError(`panel-license-guard: \`tracing\` needs @opentelemetry/api (1.3 or later), which ${problem}. ${OTEL_API_HINT}`, {
      cause: error,
    });
  }
}

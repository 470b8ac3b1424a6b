// The W3C trace context an enqueue stores with its row, as one string: `traceparent`, then a
// space and `tracestate` when there is one. Written and read here only, so the stores keep text.

import type { OtelApi, SpanContext } from './otel-api.js';

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
/** W3C's limit for tracestate (32 members): a longer one is dropped, the traceparent kept. */
const MAX_TRACESTATE = 512;
/** Printable ASCII, as both headers are: anything else did not come from a W3C propagator. */
const PRINTABLE = /^[\x20-\x7e]*$/;

const usableState = (state: string) => state !== '' && state.length <= MAX_TRACESTATE && PRINTABLE.test(state);

/** `context` as stored (at most 568 characters), or undefined when it is not a valid span context. */
export function formatTraceContext(api: OtelApi, context: SpanContext): string | undefined {
  if (!api.isSpanContextValid(context)) return undefined;
  const flags = (context.traceFlags & 0xff).toString(16).padStart(2, '0');
  const parent = `00-${context.traceId}-${context.spanId}-${flags}`;
  const state = context.traceState?.serialize() ?? '';
  return usableState(state) ? `${parent} ${state}` : parent;
}

/**
 * The span context a stored string names (remote: it comes from another span, maybe another
 * process), or undefined when there is none or it is malformed: a bad value costs the link only.
 */
export function parseTraceContext(api: OtelApi, stored: string | undefined): SpanContext | undefined {
  if (stored === undefined || stored.length > 1024) return undefined;
  const space = stored.indexOf(' ');
  const match = TRACEPARENT.exec(space === -1 ? stored : stored.slice(0, space));
  if (match === null) return undefined;
  const [, traceId = '', spanId = '', flags = '00'] = match;
  const context: SpanContext = { traceId, spanId, traceFlags: Number.parseInt(flags, 16), isRemote: true };
  if (!api.isSpanContextValid(context)) return undefined;
  const state = space === -1 ? '' : stored.slice(space + 1);
  if (usableState(state)) context.traceState = api.createTraceState(state);
  return context;
}

// The outbox's spans, in OpenTelemetry's messaging conventions: `create` when `enqueue()` stores a
// release (its context is kept with the row), `send` for each push of it to the mother, linked
// to that context — from whichever process delivers it, however long after.

import { RESPONSE_STATUS, type StatusObserving } from '../client/mother-client.js';
import type { ClaimedRow, EnqueueResult } from '../outbox/store.js';
import { classifyFailure } from '../outbox/worker/failure.js';
import type { ApiTracing, Link, Span } from './otel-api.js';
import { type Attributes, MESSAGING_SYSTEM, markFailed, serverAttributes, statusOf } from './span-attributes.js';
import { formatTraceContext, parseTraceContext } from './trace-context.js';
import type { Tracing } from './tracing-option.js';

/** What a `create` span knows of the release before it is stored. */
export interface EnqueueTarget {
  panel: string;
  remoteTrackId: string | undefined;
  /** The mother's base URL (motherName), when the outbox knows it at enqueue (a single panel's outbox). */
  mother: string | undefined;
}

/** Per operation and mother, made once: a push or an enqueue builds no URL and no object for them. */
const messagingCache = new Map<string, Attributes>();
function messaging(operation: 'create' | 'send', mother: string | undefined): Attributes {
  const key = `${operation} ${mother ?? ''}`;
  let attributes = messagingCache.get(key);
  if (attributes === undefined) {
    attributes = {
      'messaging.system': MESSAGING_SYSTEM,
      'messaging.operation.type': operation,
      'messaging.operation.name': operation,
      ...(mother === undefined ? {} : { 'messaging.destination.name': mother }),
      ...serverAttributes(mother),
    };
    if (messagingCache.size < 1000) messagingCache.set(key, attributes);
  }
  return attributes;
}

function release(panel: string, remoteTrackId: string | undefined): Attributes {
  return remoteTrackId === undefined ? { 'panel_license.panel': panel } : { 'panel_license.panel': panel, 'panel_license.remote_track_id': remoteTrackId };
}

/**
 * Runs `store(traceContext)` inside a `create` span (a child of the caller's active span, e.g. the
 * upload request's); `traceContext` is that span's, to be stored with the row. Undefined when the
 * span has no valid context (no SDK and no caller's trace): nothing to link to.
 */
export function tracedEnqueue(
  tracing: Tracing,
  target: EnqueueTarget,
  store: (traceContext: string | undefined) => Promise<EnqueueResult>,
): Promise<EnqueueResult> {
  const { api, tracer } = tracing as ApiTracing;
  const { mother } = target;
  const span = tracer.startSpan(mother === undefined ? 'create' : `create ${mother}`, { kind: api.SpanKind.PRODUCER });
  const traceContext = formatTraceContext(api, span.spanContext());
  // No SDK and no caller's trace: nothing to record or to store, so nothing more is done (no
  // attributes, no context, not even an async frame): the API's no-op tracer costs next to nothing.
  if (traceContext === undefined && !span.isRecording()) {
    span.end();
    return store(undefined);
  }
  if (span.isRecording()) span.setAttributes({ ...messaging('create', mother), ...release(target.panel, target.remoteTrackId) });
  return recordedEnqueue(api, span, traceContext, store);
}

async function recordedEnqueue(
  api: ApiTracing['api'],
  span: Span,
  traceContext: string | undefined,
  store: (traceContext: string | undefined) => Promise<EnqueueResult>,
): Promise<EnqueueResult> {
  try {
    const result = await api.context.with(api.trace.setSpan(api.context.active(), span), () => store(traceContext));
    span.setAttribute('messaging.message.id', String(result.id));
    span.setAttribute('panel_license.release.state', result.state);
    if (result.deduplicated !== undefined) span.setAttribute('panel_license.deduplicated', result.deduplicated);
    return result;
  } catch (error) {
    markFailed(api, span, error);
    throw error;
  } finally {
    span.end();
  }
}

/** What an attempt came to, as the worker will record it (worker/failure.ts decides the same way). */
function outcomeOf(error: unknown): 'delivered' | 'retry' | 'dead' {
  const { action } = classifyFailure(error);
  return action === 'accepted' ? 'delivered' : action === 'dead' ? 'dead' : 'retry';
}

/**
 * One push of `row` to its mother inside a `send` span: a new trace (a delivery is not part of
 * the request that enqueued it, which has long ended), linked to the context its enqueue stored.
 * `push` gets the options to pass to the client, which tell the span the HTTP status.
 */
export function tracedPush<T>(tracing: Tracing, row: ClaimedRow, mother: string | undefined, push: (options: StatusObserving) => Promise<T>): Promise<T> {
  const { api, tracer } = tracing as ApiTracing;
  const created = parseTraceContext(api, row.traceContext);
  const links: Link[] = created === undefined ? [] : [{ context: created }];
  const span = tracer.startSpan(mother === undefined ? 'send' : `send ${mother}`, { kind: api.SpanKind.PRODUCER, root: true, links });
  // No SDK (or not sampled): nothing is recorded, so nothing more is done.
  if (!span.isRecording()) {
    span.end();
    return push({});
  }
  span.setAttributes({
    ...messaging('send', mother),
    ...release(row.panel, row.remoteTrackId),
    'messaging.message.id': String(row.id),
    'panel_license.attempt': row.attempts + 1,
  });
  return recordedPush(api, span, push);
}

async function recordedPush<T>(api: ApiTracing['api'], span: Span, push: (options: StatusObserving) => Promise<T>): Promise<T> {
  let status: number | undefined;
  const options: StatusObserving = { [RESPONSE_STATUS]: (answered: number) => (status = answered) };
  try {
    const answer = await api.context.with(api.trace.setSpan(api.context.active(), span), () => push(options));
    const releaseId = (answer as { release_id?: unknown } | undefined)?.release_id;
    span.setAttribute('panel_license.outcome', 'delivered');
    if (typeof releaseId === 'number') span.setAttribute('panel_license.release_id', releaseId);
    if (status !== undefined) span.setAttribute('http.response.status_code', status);
    return answer;
  } catch (error) {
    const outcome = outcomeOf(error);
    span.setAttribute('panel_license.outcome', outcome);
    const failedStatus = status ?? statusOf(error);
    if (failedStatus !== undefined) span.setAttribute('http.response.status_code', failedStatus);
    // A 2xx with an unreadable body: delivered, never resent; the span says so without failing.
    if (outcome !== 'delivered') markFailed(api, span, error);
    throw error;
  } finally {
    span.end();
  }
}

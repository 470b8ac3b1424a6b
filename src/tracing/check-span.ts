// A span per license check (`license check`): the panel, what the check came to, the HTTP status
// of the mother's answer; the span's duration is the check's latency. Never the key or secret.

import type { LicenseResponse } from '../client/license-response.js';
import { type MotherClient, RESPONSE_STATUS, type RequestOptions, type StatusObserving } from '../client/mother-client.js';
import { checkResult } from '../guard/telemetry.js';
import type { ApiTracing } from './otel-api.js';
import { markFailed, motherName, serverAttributes } from './span-attributes.js';
import type { Tracing } from './tracing-option.js';

export const CHECK_SPAN = 'license check';

/**
 * `client.checkLicense(options)`, inside a span when tracing is on. The check runs with its span
 * active, so an instrumented fetch or HTTP client records its request as the span's child.
 */
export async function tracedCheck(
  tracing: Tracing | undefined,
  panel: string,
  client: Pick<MotherClient, 'checkLicense'>,
  options: RequestOptions,
): Promise<LicenseResponse> {
  if (tracing === undefined) return client.checkLicense(options);
  const { api, tracer } = tracing as ApiTracing;
  const span = tracer.startSpan(CHECK_SPAN, {
    kind: api.SpanKind.CLIENT,
    attributes: { 'panel_license.panel': panel, ...serverAttributes(motherName(client)) },
  });
  let status: number | undefined;
  const observed: StatusObserving = { ...options, [RESPONSE_STATUS]: (answered: number) => (status = answered) };
  try {
    const answer = await api.context.with(api.trace.setSpan(api.context.active(), span), () => client.checkLicense(observed));
    // An inactive license is an answer, not a failure: the span's status stays unset.
    span.setAttribute('panel_license.check.result', checkResult(answer, null));
    if (status !== undefined) span.setAttribute('http.response.status_code', status);
    return answer;
  } catch (error) {
    const result = checkResult(undefined, error);
    span.setAttribute('panel_license.check.result', result);
    const failedStatus = status ?? (error as { status?: unknown } | null)?.status;
    if (typeof failedStatus === 'number') span.setAttribute('http.response.status_code', failedStatus);
    markFailed(api, span, error, result);
    throw error;
  } finally {
    span.end();
  }
}

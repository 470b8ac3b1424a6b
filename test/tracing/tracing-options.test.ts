// The `tracing` option: validated at construction, naming the option and the fix; the optional
// API loaded only when tracing may be used; a stored trace context read back strictly.
import * as api from '@opentelemetry/api';
import { describe, expect, it } from 'vitest';
import { licenseGuard } from '../../src/guard/license-guard.js';
import { OptionProblems } from '../../src/options.js';
import { createReleaseOutbox } from '../../src/outbox/outbox.js';
import { loadOtelApi } from '../../src/tracing/otel-api.js';
import { formatTraceContext, parseTraceContext } from '../../src/tracing/trace-context.js';
import { resolveTracing } from '../../src/tracing/tracing-option.js';
import { API_KEY, API_SECRET } from '../support/helpers.js';

const credentials = { baseUrl: 'https://mother.example', apiKey: API_KEY, apiSecret: API_SECRET };
const missing = (id: string): never => {
  throw Object.assign(new Error(`Cannot find module '${id}'`), { code: 'MODULE_NOT_FOUND' });
};

describe('the `tracing` option', () => {
  it('refuses anything but true, false or { tracerProvider }, by name', () => {
    expect(() => licenseGuard({ ...credentials, tracing: 'yes' as never })).toThrow(/`tracing` must be true, false or \{ tracerProvider \}, received "yes"/);
    expect(() => licenseGuard({ ...credentials, tracing: { tracerProvider: {} } as never })).toThrow(/`tracing` must be .*getTracer\(\) method/);
    expect(() =>
      createReleaseOutbox({
        file: ':memory:',
        client: { pushSerializedRelease: async () => ({ ok: true, release_id: 1 }) },
        tracing: { provider: 1 } as never,
        autoStart: false,
      }),
    ).toThrow(/createReleaseOutbox.*`tracing` must be/s);
  });

  it('loads @opentelemetry/api only when it may be used: missing, tracing is off unless required', () => {
    expect(loadOtelApi(false, missing)).toBeUndefined();
    expect(() => loadOtelApi(true, missing)).toThrow(
      /`tracing` needs @opentelemetry\/api .*is not installed\. Install it \(`npm install @opentelemetry\/api`\)/,
    );
    expect(() => loadOtelApi(true, () => ({ trace: {} }))).toThrow(/failed to load \(.*older than 1\.3/);
    expect(typeof loadOtelApi(true)?.trace.getTracer).toBe('function');
    let looked = 0;
    const counting = (id: string) => {
      looked++;
      return missing(id);
    };
    // `false` never even looks for it; left out, a missing API turns tracing off without a word.
    const problems = new OptionProblems();
    expect(resolveTracing(false, problems, counting)).toBeUndefined();
    expect(looked).toBe(0);
    expect(resolveTracing(undefined, problems, counting)).toBeUndefined();
    expect(looked).toBe(1);
    expect(() => problems.throwIfAny('licenseGuard')).not.toThrow();
  });
});

describe('a stored trace context', () => {
  const context: api.SpanContext = {
    traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
    spanId: '00f067aa0ba902b7',
    traceFlags: 1,
    traceState: api.createTraceState('congo=t61rcWkgMzE,rojo=00f067aa0ba902b7'),
  };

  it('round-trips traceparent and tracestate', () => {
    const stored = formatTraceContext(api, context);
    expect(stored).toBe('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 congo=t61rcWkgMzE,rojo=00f067aa0ba902b7');
    expect(parseTraceContext(api, stored)).toMatchObject({ traceId: context.traceId, spanId: context.spanId, traceFlags: 1, isRemote: true });
    expect(parseTraceContext(api, stored)?.traceState?.get('rojo')).toBe('00f067aa0ba902b7');
  });

  it('stores nothing for an invalid context, and drops a tracestate beyond W3C’s 512 characters', () => {
    expect(formatTraceContext(api, api.INVALID_SPAN_CONTEXT)).toBeUndefined();
    const long = api.createTraceState(Array.from({ length: 30 }, (_, i) => `vendor${i}=${'x'.repeat(20)}`).join(','));
    expect(formatTraceContext(api, { ...context, traceState: long })).toBe('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
  });

  it('reads a malformed value as no context: it costs the link, never the delivery', () => {
    for (const bad of [
      undefined,
      '',
      'garbage',
      '01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`,
      'x'.repeat(2000),
    ])
      expect(parseTraceContext(api, bad)).toBeUndefined();
  });
});

// OpenTelemetry, with the SDK's in-memory exporter and real HTTP to the emulator: an upload
// request's span, the `create` span its enqueue makes under it, and the `send` span of the
// delivery linked to that one; the `license check` span; what never appears in any span.
import { context, type Span, SpanKind, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import express from 'express';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../../src/emulator/emulator.js';
import { licenseGuard } from '../../src/guard/license-guard.js';
import { createReleaseOutbox } from '../../src/outbox/outbox.js';
import { API_KEY, API_SECRET, clientFor, listenLocal, startEmulator, waitFor } from '../support/helpers.js';

const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
// Global, as an app's SDK set-up does: the tracer provider, the AsyncLocalStorage context manager.
provider.register();

let emulator: MotherEmulator;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(async () => {
  await emulator.close();
  await provider.shutdown();
  trace.disable();
  context.disable();
});
afterEach(() => {
  emulator.setFaults({});
  emulator.reset();
  exporter.reset();
});

const silent = { warn: () => {}, error: () => {} };
const spans = (name: string) => exporter.getFinishedSpans().filter((span) => span.name === name);
const only = (name: string): ReadableSpan => {
  const found = spans(name);
  expect(found.map((span) => span.name)).toEqual([name]);
  return found[0] as ReadableSpan;
};

/** What an HTTP server instrumentation does: a SERVER span per request, active while the route runs. */
function serverSpans(app: express.Express): void {
  const tracer = provider.getTracer('test-http');
  app.use((req, res, next) => {
    const span: Span = tracer.startSpan(`${req.method} ${req.path}`, { kind: SpanKind.SERVER });
    res.on('finish', () => span.end());
    context.with(trace.setSpan(context.active(), span), next);
  });
}

/** No span of the package says the key, the secret or a release's title. */
function expectNoSecrets(): void {
  const said = JSON.stringify(exporter.getFinishedSpans().map((s) => [s.name, s.attributes, s.status, s.events, s.links]));
  for (const secret of [API_KEY, API_SECRET, 'Secret Title']) expect(said).not.toContain(secret);
}

describe('tracing an upload to its delivery', () => {
  it('links the delivery span to the create span of the request that enqueued it', async () => {
    const outbox = createReleaseOutbox({ client: clientFor(emulator), file: ':memory:', logger: silent });
    const app = express();
    serverSpans(app);
    app.post('/upload', async (_req, res) => {
      res.json(await outbox.enqueue({ title: 'Secret Title', remote_track_id: 'track-1' }));
    });
    const { server, origin } = await listenLocal(app);
    let answer: { id: number };
    try {
      answer = (await (await fetch(`${origin}/upload`, { method: 'POST' })).json()) as { id: number };
      await outbox.drain({ signal: AbortSignal.timeout(10_000) });
      await waitFor(() => spans(`send ${emulator.url}`).length === 1, 'the send span');
    } finally {
      await outbox.close();
      server.close();
    }
    const request = only('POST /upload');
    const created = only(`create ${emulator.url}`);
    const sent = only(`send ${emulator.url}`);
    // The create span is the request's child; the delivery is a trace of its own, linked to it.
    expect(created.spanContext().traceId).toBe(request.spanContext().traceId);
    expect(created.parentSpanContext?.spanId).toBe(request.spanContext().spanId);
    expect(created.kind).toBe(SpanKind.PRODUCER);
    expect(sent.kind).toBe(SpanKind.PRODUCER);
    expect(sent.parentSpanContext).toBeUndefined();
    expect(sent.spanContext().traceId).not.toBe(request.spanContext().traceId);
    expect(sent.links.map((link) => link.context)).toMatchObject([{ traceId: created.spanContext().traceId, spanId: created.spanContext().spanId }]);
    const port = Number(new URL(emulator.url).port);
    expect(created.attributes).toMatchObject({
      'messaging.system': 'panel-license-guard',
      'messaging.operation.type': 'create',
      'messaging.destination.name': emulator.url,
      'messaging.message.id': String(answer.id),
      'server.address': '127.0.0.1',
      'server.port': port,
      'panel_license.remote_track_id': 'track-1',
      'panel_license.release.state': 'pending',
    });
    expect(sent.attributes).toMatchObject({
      'messaging.system': 'panel-license-guard',
      'messaging.operation.type': 'send',
      'messaging.destination.name': emulator.url,
      'messaging.message.id': String(answer.id),
      'panel_license.attempt': 1,
      'panel_license.outcome': 'delivered',
      'panel_license.release_id': emulator.releases[0]?.releaseId,
    });
    expect(sent.attributes['http.response.status_code']).toBeGreaterThanOrEqual(200);
    expect(sent.attributes['http.response.status_code']).toBeLessThan(300);
    expectNoSecrets();
  });

  it('gives each push attempt a span of its own, a failed one marked with its status, every one linked to the enqueue', async () => {
    emulator.setFaults({ status: 503, endpoint: 'release.php' });
    const outbox = createReleaseOutbox({ client: clientFor(emulator), file: ':memory:', baseDelayMs: 10, maxDelayMs: 20, logger: silent });
    try {
      await outbox.enqueue({ title: 'Secret Title', remote_track_id: 'track-2' });
      await waitFor(() => spans(`send ${emulator.url}`).length >= 1, 'a failed attempt');
      emulator.setFaults({});
      await outbox.drain({ signal: AbortSignal.timeout(10_000) });
      await waitFor(() => spans(`send ${emulator.url}`).some((span) => span.attributes['panel_license.outcome'] === 'delivered'), 'the delivery');
    } finally {
      await outbox.close();
    }
    const created = only(`create ${emulator.url}`);
    expect(created.parentSpanContext).toBeUndefined(); // no request around it: the create span starts the trace
    const [failed, ...later] = spans(`send ${emulator.url}`);
    expect(failed?.attributes).toMatchObject({
      'panel_license.outcome': 'retry',
      'http.response.status_code': 503,
      'error.type': 'HTTP_STATUS',
      'panel_license.attempt': 1,
    });
    expect(failed?.status).toMatchObject({ code: 2, message: expect.stringMatching(/503/) });
    expect(later.at(-1)?.attributes).toMatchObject({ 'panel_license.outcome': 'delivered' });
    for (const span of [failed, ...later]) expect(span?.links[0]?.context.spanId).toBe(created.spanContext().spanId);
    expectNoSecrets();
  });

  it('makes no span with `tracing: false`, though an SDK is registered', async () => {
    const outbox = createReleaseOutbox({ client: clientFor(emulator), file: ':memory:', logger: silent, tracing: false });
    try {
      await outbox.enqueue({ title: 'Quiet', remote_track_id: 'track-3' });
      await outbox.drain({ signal: AbortSignal.timeout(10_000) });
    } finally {
      await outbox.close();
    }
    expect(exporter.getFinishedSpans()).toEqual([]);
  });
});

describe('tracing license checks', () => {
  it('makes a span per check: the panel, the result, the HTTP status; a failure says its code', async () => {
    const client = clientFor(emulator);
    const guard = licenseGuard({ client, logger: silent });
    try {
      await guard.start();
      const check = only('license check');
      expect(check.kind).toBe(SpanKind.CLIENT);
      expect(check.attributes).toMatchObject({
        'panel_license.panel': client.panelId,
        'panel_license.check.result': 'ok',
        'http.response.status_code': 200,
        'server.address': '127.0.0.1',
      });
      expect(check.status.code).toBe(0);
      exporter.reset();
      emulator.setFaults({ status: 500, endpoint: 'license.php' });
      await guard.refresh().catch(() => undefined);
      const failed = only('license check');
      expect(failed.attributes).toMatchObject({ 'panel_license.check.result': 'HTTP_STATUS', 'error.type': 'HTTP_STATUS', 'http.response.status_code': 500 });
      expect(failed.status.code).toBe(2);
    } finally {
      await guard.close();
    }
    expectNoSecrets();
  });

  it('makes one in `panels` mode too, for the panel a request asked for', async () => {
    const guard = licenseGuard({ baseUrl: emulator.url, panels: { resolve: () => ({ apiKey: API_KEY, apiSecret: API_SECRET }) }, logger: silent });
    try {
      expect(await guard.refresh('label.example')).toBe('active');
    } finally {
      await guard.close();
    }
    const check = spans('license check').at(-1);
    expect(check?.attributes).toMatchObject({ 'panel_license.panel': clientFor(emulator).panelId, 'panel_license.check.result': 'ok' });
    expectNoSecrets();
  });

  it('sends spans to the `tracerProvider` given instead of the global one', async () => {
    const own = new InMemorySpanExporter();
    const ownProvider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(own)] });
    const guard = licenseGuard({ client: clientFor(emulator), logger: silent, tracing: { tracerProvider: ownProvider } });
    try {
      await guard.start();
    } finally {
      await guard.close();
    }
    expect(own.getFinishedSpans().map((span) => span.name)).toEqual(['license check']);
    expect(spans('license check')).toEqual([]);
  });
});

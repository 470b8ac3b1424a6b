// What the package's spans say of a mother and of a failure, in OpenTelemetry's semantic
// conventions: never a key, a secret, a signature, a release's content or the mother's answer.

import { MotherError } from '../errors.js';
import type { OtelApi, Span } from './otel-api.js';

/** `messaging.system` of the outbox's spans: no registered system fits a push to a mother. */
export const MESSAGING_SYSTEM = 'panel-license-guard';

export type Attributes = Record<string, string | number | boolean>;

/** A mother client's base URL as span names and attributes say it: scheme, host, port and path, never user info or a query. */
export function motherName(client: unknown): string | undefined {
  const baseUrl = (client as { baseUrl?: unknown } | null | undefined)?.baseUrl;
  if (typeof baseUrl !== 'string') return undefined;
  // Asked per push: a URL is parsed once per mother, not once per release.
  let name = names.get(baseUrl);
  if (name === undefined) {
    try {
      const url = new URL(baseUrl);
      name = `${url.origin}${url.pathname.replace(/\/$/, '')}`;
    } catch {
      return undefined;
    }
    if (names.size < 1000) names.set(baseUrl, name);
  }
  return name;
}
const names = new Map<string, string>();

/** `server.address` and `server.port` of the mother (the port only when the URL says one). */
export function serverAttributes(mother: string | undefined): Attributes {
  if (mother === undefined) return {};
  const url = new URL(mother);
  return url.port === '' ? { 'server.address': url.hostname } : { 'server.address': url.hostname, 'server.port': Number(url.port) };
}

/** The error's code (`TIMEOUT`, `HTTP_STATUS`…), as `error.type` says it; `UNKNOWN` for an error without one. */
export function errorType(error: unknown): string {
  const code = (error as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' && /^[A-Za-z_]{1,40}$/.test(code) ? code : 'UNKNOWN';
}

/** The HTTP status an error carries (the mother answered, or had begun to), if any. */
export function statusOf(error: unknown): number | undefined {
  const status = (error as { status?: unknown } | null | undefined)?.status;
  return typeof status === 'number' && Number.isInteger(status) ? status : undefined;
}

/**
 * Marks `span` failed. The description is the message of the package's own client errors, which
 * never carry credentials (redacted from the mother's texts too); any other error (a custom
 * client's, a store's) is described by its type alone, since nothing vouches for its message.
 */
export function markFailed(api: OtelApi, span: Span, error: unknown, type = errorType(error)): void {
  span.setAttribute('error.type', type);
  span.setStatus({ code: api.SpanStatusCode.ERROR, message: error instanceof MotherError ? error.message : type });
}

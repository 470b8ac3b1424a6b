// Reading the mother's answers: a refusal as the error class of its kind, a success through its
// schema, and every text in either through the panel's redactor before anything keeps it.
import { AuthenticationError, HttpStatusError, MalformedResponseError, MethodNotAllowedError, type MotherError, ServerValidationError } from '../errors.js';
import { cleanText } from '../text.js';
import { parseRetryAfter, type RawResponse } from './http.js';
import { errorBodySchema, type LicenseResponse, type PanelRecord } from './license-response.js';
import type { Redactor } from './redaction.js';

function parseJson(raw: RawResponse): unknown {
  try {
    return JSON.parse(raw.text);
  } catch {
    const looksHtml = /^\s*</.test(raw.text);
    const what = raw.text.length === 0 ? 'an empty body' : looksHtml ? 'an HTML page' : 'a body that is not valid JSON';
    // No cause: JSON.parse's message quotes the body (whole when it is short), which may hold
    // anything the mother printed, a credential included.
    throw new MalformedResponseError(`The mother answered HTTP ${raw.status} with ${what}.`, raw.status);
  }
}

/** Turns a non-2xx answer into the error class of its kind. */
export function errorFor(raw: RawResponse, nowMs: number, redactor: Redactor, url: string): MotherError {
  let serverMessage: string | undefined;
  try {
    const parsed = errorBodySchema.safeParse(JSON.parse(raw.text));
    // Remote text headed for logs, terminals and the console: no control characters, bounded
    // length, no credentials (redacted before the cap, so a cut can never leave half a key behind).
    if (parsed.success) serverMessage = cleanText(redactor.errorText(parsed.data.error), 300) ?? undefined;
  } catch {
    // 401/405 bodies are not specified by the contract: HTML or empty is fine.
  }
  const suffix = serverMessage ? `: ${serverMessage}` : '.';
  if (raw.status === 401) return new AuthenticationError(`The mother rejected the credentials or signature (HTTP 401)${suffix}`);
  if (raw.status === 405) return new MethodNotAllowedError(`The mother refused the method (HTTP 405)${suffix}`);
  if (raw.status === 422) return new ServerValidationError(serverMessage ?? 'validation failed (no message given)');
  const retryAfter = parseRetryAfter(raw.headers.get('retry-after'), nowMs);
  // No such script there: most often a `baseUrl` that is not the directory of the scripts.
  const where = raw.status === 404 ? ` (POST ${url}: check \`baseUrl\`, the directory that holds license.php and release.php)` : '';
  return new HttpStatusError(raw.status, `The mother answered HTTP ${raw.status}${suffix}${where}`, retryAfter);
}

type Schema<T> = {
  safeParse(v: unknown): { success: true; data: T } | { success: false; error: { issues: { path: PropertyKey[]; message: string }[] } };
};

/** A 2xx answer through `schema`; a MalformedResponseError naming the first field that does not fit. */
export function parseWith<T>(schema: Schema<T>, raw: RawResponse, what: string, redactor: Redactor): T {
  const result = schema.safeParse(parseJson(raw));
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  // Key names come from the mother: redacted, cleaned and capped like any remote text.
  const path = cleanText(redactor.errorText(issue?.path.map(String).join('.') ?? ''), 100) ?? '(root)';
  const where = issue ? `\`${path}\`: ${issue.message}` : 'unknown shape';
  throw new MalformedResponseError(`The mother's ${what} answer does not match the contract (${where}).`, raw.status);
}

/**
 * The license answer with the key and secret cut out of its texts (the reason and every field of
 * the panel record): a mother that echoes them must not put them on the console, the lock page,
 * a log line or the shared verdict.
 */
export function redactedLicense(answer: LicenseResponse, redactor: Redactor): LicenseResponse {
  const panel: Record<string, string | undefined> = { ...answer.panel };
  for (const [name, value] of Object.entries(panel)) if (value !== undefined) panel[name] = redactor.field(value);
  return { ...answer, reason: answer.reason === null ? null : redactor.field(answer.reason), panel: panel as PanelRecord };
}

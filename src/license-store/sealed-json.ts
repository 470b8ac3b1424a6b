// JSON authenticated with an HMAC: how verdicts are kept anywhere outside the process (file, Redis).
import { timingSafeEqual } from 'node:crypto';

/** HMAC-SHA256 (hex) under a key derived from the panel's API secret (`MotherClient.localMac`). */
export type Mac = (data: string) => string;

/** Why a sealed value was refused; callers turn it into their own error message. */
export type UnsealProblem = 'corrupt' | 'unauthenticated' | 'forged';

/** On refusal, `claimed` is the unauthenticated payload: only for wording an error, never trusted. */
export type Unsealed = { ok: true; payload: Record<string, unknown> } | { ok: false; problem: UnsealProblem; claimed?: Record<string, unknown> };

/** Serializes `payload` and appends `mac` over exactly those bytes. */
export function seal(payload: Record<string, unknown>, mac: Mac): string {
  return JSON.stringify({ ...payload, mac: mac(JSON.stringify(payload)) });
}

function macMatches(expected: string, given: unknown): boolean {
  if (typeof given !== 'string' || given.length !== expected.length) return false;
  return timingSafeEqual(Buffer.from(expected), Buffer.from(given));
}

/**
 * Parses and authenticates a sealed value. The payload is re-serialized exactly as written
 * (JSON.stringify keeps key order) and its MAC compared in constant time: a value edited, or
 * written by someone without this panel's secret, is `forged`; one without a MAC at all is
 * `unauthenticated`. The payload still needs a schema parse by the caller.
 */
export function unseal(text: string, mac: Mac): Unsealed {
  let payload: Record<string, unknown>;
  let given: unknown;
  try {
    const raw = JSON.parse(text) as unknown;
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return { ok: false, problem: 'corrupt' };
    ({ mac: given, ...payload } = raw as Record<string, unknown>);
  } catch {
    // Includes nesting deep enough to exhaust the stack: corrupt, whatever the cause.
    return { ok: false, problem: 'corrupt' };
  }
  if (given === undefined) return { ok: false, problem: 'unauthenticated', claimed: payload };
  let payloadText: string;
  try {
    payloadText = JSON.stringify(payload);
  } catch {
    return { ok: false, problem: 'corrupt' };
  }
  if (!macMatches(mac(payloadText), given)) return { ok: false, problem: 'forged', claimed: payload };
  return { ok: true, payload: JSON.parse(payloadText) as Record<string, unknown> };
}

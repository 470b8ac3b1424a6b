// The cluster's verdict record: what the last check found, sealed so only this panel can write it.
import { z } from 'zod';
import { licenseResponseSchema } from '../../client/license-response.js';
import { LocalStateError } from '../../errors.js';
import { type Mac, seal, unseal } from '../../license-store/sealed-json.js';
import { warnedSchema } from '../expiry-warnings.js';
import { CLOCK_TOLERANCE_MS } from '../grace-clock.js';

const VERSION = 1;

const orderSchema = z.object({ stamp: z.number().int().nonnegative(), by: z.string().regex(/^[0-9a-f]{16}$/) });

const recordSchema = z.object({
  version: z.literal(VERSION),
  panel: z.string(),
  /** Where this check stands among the cluster's checks (see CheckOrder). */
  order: orderSchema,
  /** Order of the check that produced `verdict`. */
  successOrder: orderSchema.nullable(),
  /** Order of the verdict its checker held when that check started (absent from older writers). */
  basis: orderSchema.nullable().optional(),
  /** Wall time (ms) of the check that produced this record, by whichever instance ran it. */
  checkedAt: z.number().int().nonnegative(),
  /** The last verified verdict and when it arrived (null until the cluster has one). */
  verdict: licenseResponseSchema.nullable(),
  lastSuccessAt: z.number().int().nonnegative().nullable(),
  /** Error code of this check when it failed (null when it produced `verdict`). */
  failure: z.string().max(64).nullable(),
  /** Failed checks in a row. */
  failures: z.number().int().nonnegative(),
  /** When the checker expects the next scheduled check (ms), so a starting instance knows the record is current. */
  nextCheckAt: z.number().int().nonnegative().nullable(),
  /** The expiry warnings fired for the verdict's `expires_at` (expiry-warnings.ts; absent from older writers). */
  warned: warnedSchema.nullable().optional(),
  /** The writer's clock when it wrote the record (not its high-water mark: one past jump must not follow a host forever). */
  savedAt: z.number().int().nonnegative(),
});

export type SharedVerdict = Omit<z.output<typeof recordSchema>, 'version' | 'panel'>;

/** Seals a record for this panel (`panelId`) with the panel's MAC. */
export function encodeSharedVerdict(record: SharedVerdict, panelId: string, mac: Mac): string {
  return seal({ version: VERSION, panel: panelId, ...record }, mac);
}

const rejected = (why: string) =>
  new LocalStateError('SHARED_VERDICT_REJECTED', `The shared verdict in the license store ${why}; it was ignored and will be replaced after the next check.`);

/** Records are a few KiB; anything larger is refused before it is parsed. */
export const MAX_RECORD_BYTES = 64 * 1024;

/**
 * Opens a record read from the store: only when its MAC verifies (keyed from this panel's API
 * secret) and it names this panel. A value written by anyone without the secret is refused,
 * whatever it says. Whether its times are plausible is `refuseIfAhead`'s question.
 */
export function decodeSharedVerdict(text: string, panelId: string, mac: Mac): SharedVerdict {
  if (text.length > MAX_RECORD_BYTES) throw rejected(`is larger than ${MAX_RECORD_BYTES / 1024} KiB`);
  const unsealed = unseal(text, mac);
  if (!unsealed.ok) {
    const why = { corrupt: 'is not valid JSON', unauthenticated: 'carries no MAC', forged: 'does not verify (forged, edited, or written by another panel)' };
    throw rejected(why[unsealed.problem]);
  }
  const parsed = recordSchema.safeParse(unsealed.payload);
  if (!parsed.success) throw rejected(`has an unexpected shape (format ${VERSION} expected)`);
  const { version: _version, panel, ...record } = parsed.data;
  if (panel !== panelId) throw rejected('belongs to another panel or mother');
  return record;
}

/**
 * A genuine record from a host whose clock runs ahead of ours by more than the tolerance is not
 * applied: its stamp would outrank checks made after it, here, for as long as the skew lasts.
 */
export function refuseIfAhead(record: SharedVerdict, now: number): void {
  // Wall times only: stamps may run ahead of every clock by design (a hybrid logical clock).
  const latest = Math.max(record.checkedAt, record.savedAt);
  if (latest > now + CLOCK_TOLERANCE_MS)
    throw rejected(
      `was written by a host whose clock is ahead of this one's by more than ${CLOCK_TOLERANCE_MS / 60_000} minutes (${new Date(latest).toISOString()}): keep the instances' clocks in sync (NTP)`,
    );
}

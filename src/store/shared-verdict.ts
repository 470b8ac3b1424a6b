// The cluster's verdict record: what the last check found, sealed so only this panel can write it.
import { z } from 'zod';
import { licenseResponseSchema } from '../client/license-response.js';
import { LocalStateError } from '../errors.js';
import { CLOCK_TOLERANCE_MS } from '../guard/grace-clock.js';
import { type Mac, seal, unseal } from './sealed-json.js';

const VERSION = 1;

const recordSchema = z.object({
  version: z.literal(VERSION),
  panel: z.string(),
  /**
   * Order of this check in the cluster: a hybrid logical clock taken when the check started (the
   * writer's wall time, but above every stamp it had seen), so records order by cause and effect
   * even between hosts whose clocks differ, and a slow answer never overtakes a later check.
   */
  stamp: z.number().int().nonnegative(),
  /** Stamp of the check that produced `verdict`. */
  successStamp: z.number().int().nonnegative().nullable(),
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
  /** Latest wall time the writer had seen (clock high-water mark, as in the state file). */
  savedAt: z.number().int().nonnegative(),
});

export type SharedVerdict = Omit<z.output<typeof recordSchema>, 'version' | 'panel'>;

/** Seals a record for this panel (`panelId`) with the panel's MAC. */
export function encodeSharedVerdict(record: SharedVerdict, panelId: string, mac: Mac): string {
  return seal({ version: VERSION, panel: panelId, ...record }, mac);
}

const rejected = (why: string) =>
  new LocalStateError('SHARED_VERDICT_REJECTED', `The shared verdict in the license store ${why}; it was ignored and will be replaced after the next check.`);

/**
 * Opens a record read from the store. It is applied only when its MAC verifies (keyed from
 * this panel's API secret), it names this panel and it claims no time ahead of our clock: a
 * value written by anyone without the secret is refused, whatever it says.
 */
/** Records are a few KiB; anything larger is refused before it is parsed. */
export const MAX_RECORD_BYTES = 64 * 1024;

export function decodeSharedVerdict(text: string, panelId: string, mac: Mac, now: number): SharedVerdict {
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
  const latest = Math.max(record.checkedAt, record.savedAt);
  if (latest > now + CLOCK_TOLERANCE_MS)
    throw rejected(
      `records a time (${new Date(latest).toISOString()}) ahead of this host's clock by more than ${CLOCK_TOLERANCE_MS / 60_000} minutes: keep the instances' clocks in sync (NTP)`,
    );
  return record;
}

// Persists the last verified verdict, authenticated, so a restart during an outage keeps the panel's state.
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { z } from 'zod';
import { type LicenseResponse, licenseResponseSchema } from '../client/license-response.js';
import { LocalStateError } from '../errors.js';
import { type Mac, seal, unseal } from '../license-store/sealed-json.js';
import { shown } from '../options.js';
import { type WarnedThrough, warnedSchema } from './expiry-warnings.js';

export interface StoredVerdict {
  verdict: LicenseResponse;
  /** When that verdict was received (local ms); grace is measured from here. */
  lastSuccessAt: number;
  /** The latest wall time this panel had seen when the file was written (clock high-water mark). */
  savedAt: number;
  /** The expiry warnings fired for the verdict's `expires_at` (absent from older files: none). */
  warned?: WarnedThrough | null;
}

const VERSION = 2;
const MAX_FILE_BYTES = 1024 * 1024;
const payloadSchema = z.object({
  version: z.literal(VERSION),
  panel: z.string(),
  savedAt: z.number().int().nonnegative(),
  lastSuccessAt: z.number().int().nonnegative(),
  verdict: licenseResponseSchema,
  warned: warnedSchema.nullable().optional(),
});

const rejected = (file: string, why: string) =>
  new LocalStateError('STATE_FILE_REJECTED', `stateFile ${file} ${why} and was ignored; it will be rewritten after the next successful check.`);

/**
 * Reads the file. It is trusted only when its MAC verifies (keyed from the API secret, over
 * every stored field) and it names this panel (`panelId`: a hash of base URL and key).
 * Returns null when the file does not exist; throws a LocalStateError otherwise.
 */
export async function readStateFile(file: string, panelId: string, mac: Mac): Promise<StoredVerdict | null> {
  let text: string;
  try {
    // A FIFO or a device would block or never end: only a regular file of sane size is read.
    const info = await stat(file);
    if (!info.isFile() || info.size > MAX_FILE_BYTES) throw rejected(file, 'is not a regular file of at most 1 MiB');
    text = await readFile(file, 'utf8');
  } catch (error) {
    if (error instanceof LocalStateError) throw error;
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw rejected(file, `could not be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  const unsealed = unseal(text, mac);
  if (!unsealed.ok && unsealed.problem === 'corrupt') throw rejected(file, 'is corrupt');
  const version = unsealed.ok ? unsealed.payload.version : unsealed.claimed?.version;
  if (version !== VERSION) throw rejected(file, `has format version ${shown(version)}, not ${VERSION} (unauthenticated)`);
  if (!unsealed.ok) throw rejected(file, 'does not verify (edited, or written with another API secret)');
  const parsed = payloadSchema.safeParse(unsealed.payload);
  if (!parsed.success) throw rejected(file, 'is corrupt');
  if (parsed.data.panel !== panelId) throw rejected(file, 'belongs to another panel or mother');
  const { verdict, lastSuccessAt, savedAt, warned } = parsed.data;
  return { verdict, lastSuccessAt, savedAt, warned: warned ?? null };
}

/** Writes atomically: a temp file (mode 0600) renamed over the old one, so a crash leaves either. */
export async function writeStateFile(file: string, panelId: string, mac: Mac, stored: StoredVerdict): Promise<void> {
  await mkdir(dirname(file), { recursive: true });
  const temp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  const payload = {
    version: VERSION,
    panel: panelId,
    savedAt: stored.savedAt,
    lastSuccessAt: stored.lastSuccessAt,
    verdict: stored.verdict,
    warned: stored.warned ?? null,
  };
  const body = seal(payload, mac);
  try {
    await writeFile(temp, body, { mode: 0o600, flush: true });
    await rename(temp, file);
  } catch (error) {
    await rm(temp, { force: true }).catch(() => {});
    throw error;
  }
}

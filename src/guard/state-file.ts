// Persists the last verified verdict, authenticated, so a restart during an outage keeps the panel's state.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { z } from 'zod';
import { type LicenseResponse, licenseResponseSchema } from '../client/license-response.js';
import { LocalStateError } from '../errors.js';
import { shown } from '../options.js';

export interface StoredVerdict {
  verdict: LicenseResponse;
  /** When that verdict was received (local ms); grace is measured from here. */
  lastSuccessAt: number;
  /** The latest wall time this panel had seen when the file was written (clock high-water mark). */
  savedAt: number;
}

/** HMAC-SHA256 (hex) under a key derived from the panel's API secret (`MotherClient.localMac`). */
export type Mac = (data: string) => string;

const VERSION = 2;
const MAX_FILE_BYTES = 1024 * 1024;
const payloadSchema = z.object({
  version: z.literal(VERSION),
  panel: z.string(),
  savedAt: z.number().int().nonnegative(),
  lastSuccessAt: z.number().int().nonnegative(),
  verdict: licenseResponseSchema,
});

const rejected = (file: string, why: string) =>
  new LocalStateError('STATE_FILE_REJECTED', `stateFile ${file} ${why} and was ignored; it will be rewritten after the next successful check.`);

function macMatches(expected: string, given: unknown): boolean {
  if (typeof given !== 'string' || given.length !== expected.length) return false;
  return timingSafeEqual(Buffer.from(expected), Buffer.from(given));
}

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
  let raw: Record<string, unknown>;
  let payloadText: string;
  try {
    raw = JSON.parse(text) as Record<string, unknown>;
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new Error('not an object');
    const { mac: _given, ...payload } = raw;
    // Re-serialized exactly as written (JSON.stringify keeps key order), then authenticated.
    payloadText = JSON.stringify(payload);
  } catch {
    // Includes nesting deep enough to exhaust the stack: corrupt, whatever the cause.
    throw rejected(file, 'is corrupt');
  }
  if (raw.version !== VERSION) throw rejected(file, `has format version ${shown(raw.version)}, not ${VERSION} (unauthenticated)`);
  if (!macMatches(mac(payloadText), raw.mac)) throw rejected(file, 'does not verify (edited, or written with another API secret)');
  const parsed = payloadSchema.safeParse(JSON.parse(payloadText));
  if (!parsed.success) throw rejected(file, 'is corrupt');
  if (parsed.data.panel !== panelId) throw rejected(file, 'belongs to another panel or mother');
  const { verdict, lastSuccessAt, savedAt } = parsed.data;
  return { verdict, lastSuccessAt, savedAt };
}

/** Writes atomically: a temp file (mode 0600) renamed over the old one, so a crash leaves either. */
export async function writeStateFile(file: string, panelId: string, mac: Mac, stored: StoredVerdict): Promise<void> {
  await mkdir(dirname(file), { recursive: true });
  const temp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  const payload = { version: VERSION, panel: panelId, savedAt: stored.savedAt, lastSuccessAt: stored.lastSuccessAt, verdict: stored.verdict };
  const body = JSON.stringify({ ...payload, mac: mac(JSON.stringify(payload)) });
  try {
    await writeFile(temp, body, { mode: 0o600, flush: true });
    await rename(temp, file);
  } catch (error) {
    await rm(temp, { force: true }).catch(() => {});
    throw error;
  }
}

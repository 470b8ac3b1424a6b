// Persists the last verified verdict so a restart during an outage keeps the panel's state.
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { z } from 'zod';
import { type LicenseResponse, licenseResponseSchema } from '../client/license-response.js';

export interface StoredVerdict {
  verdict: LicenseResponse;
  /** When that verdict was received (local ms); grace is measured from here. */
  lastSuccessAt: number;
}

const fileSchema = z.object({
  version: z.literal(1),
  panel: z.string(),
  lastSuccessAt: z.number().int().nonnegative(),
  verdict: licenseResponseSchema,
});

/**
 * Reads the file; `panelId` (a hash of base URL and key) makes sure a file from another panel
 * is never trusted. Returns null when the file does not exist.
 * Throws a readable Error when it is corrupt.
 */
export async function readStateFile(file: string, panelId: string): Promise<StoredVerdict | null> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new Error(`Cannot read stateFile ${file}: ${(error as Error).message}`);
  }
  let parsed: z.output<typeof fileSchema>;
  try {
    parsed = fileSchema.parse(JSON.parse(text));
  } catch {
    throw new Error(`stateFile ${file} is corrupt and was ignored; it will be rewritten after the next successful check.`);
  }
  if (parsed.panel !== panelId) throw new Error(`stateFile ${file} belongs to another panel or mother and was ignored.`);
  return { verdict: parsed.verdict, lastSuccessAt: parsed.lastSuccessAt };
}

/** Writes atomically: a temp file (mode 0600) renamed over the old one, so a crash leaves either. */
export async function writeStateFile(file: string, panelId: string, stored: StoredVerdict): Promise<void> {
  await mkdir(dirname(file), { recursive: true });
  const temp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  const body = JSON.stringify({ version: 1, panel: panelId, lastSuccessAt: stored.lastSuccessAt, verdict: stored.verdict });
  try {
    await writeFile(temp, body, { mode: 0o600, flush: true });
    await rename(temp, file);
  } catch (error) {
    await rm(temp, { force: true }).catch(() => {});
    throw error;
  }
}

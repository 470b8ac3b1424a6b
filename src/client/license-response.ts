// Schema of the license answer (docs/partner-api.md). Everything the mother sends is untrusted.
import { z } from 'zod';

// Panel fields are strings in the contract; a real mother may send null for an unset one
// (e.g. no custom domain), so null reads as "not set" rather than failing the whole check.
const optionalText = z
  .string()
  .nullish()
  .transform((v) => v ?? undefined);

export const panelSchema = z.object({
  name: optionalText,
  billing_type: optionalText,
  status: optionalText,
  expires_at: optionalText,
  subdomain: optionalText,
  custom_domain: optionalText,
  brand_logo_url: optionalText,
  brand_color: optionalText,
});

/**
 * `ok` must be the boolean true and `active` a boolean: `"false"`, `0` or a missing field is a
 * malformed answer (a failed check), never a verdict.
 */
export const licenseResponseSchema = z.object({
  ok: z.literal(true),
  active: z.boolean(),
  reason: z
    .string()
    .nullish()
    .transform((v) => v ?? null),
  panel: panelSchema,
  server_time: z.number().int().nonnegative().optional(),
});

export type PanelRecord = z.output<typeof panelSchema>;
export type LicenseResponse = z.output<typeof licenseResponseSchema>;

export const releaseResponseSchema = z.object({
  ok: z.literal(true),
  release_id: z.number().int(),
});

export type ReleaseResponse = z.output<typeof releaseResponseSchema>;

/** Error body of the partner API (docs/partner-api.md); only used to pick the server's message out of a failure. */
export const errorBodySchema = z.object({ ok: z.literal(false), error: z.string().max(2000) });

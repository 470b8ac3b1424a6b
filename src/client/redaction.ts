// Cutting the panel's own credentials out of what the mother sends: the one place every text the
// client hands on (errors, a release's last error, the license reason and panel record that the
// console, logs, the lock page and the CLI show) passes through.
import { cleanText } from '../text.js';

// Anything shaped like an HMAC-SHA256 in hex, wherever it sits (`sig_<hex>`, `sha256=<hex>`):
// our signature, or one echoed from an earlier request.
const HEX_DIGEST = /[0-9a-f]{64}/gi;

export interface Redactor {
  /**
   * Error text (a refusal's message, a key name of a malformed answer): invisible characters
   * dropped (so `pk_te\u200bst` cannot hide the key from the match), whitespace tidied, the key,
   * the secret and anything shaped like a signature cut out.
   */
  errorText(text: string): string;
  /**
   * A field of the license answer: the very string given unless it holds the key or the secret,
   * which are cut out (not signature-shaped hex: a content-hashed logo URL is a real value).
   */
  field(text: string): string;
}

/** The redactor of one panel's credentials (longest first, so a secret holding the key is cut whole). */
export function redactorFor(apiKey: string, apiSecret: string): Redactor {
  const credentials = [
    [apiSecret, '[api secret]'],
    [apiKey, '[api key]'],
  ].sort(([a], [b]) => (b as string).length - (a as string).length) as [string, string][];
  const cut = (visible: string) => credentials.reduce((text, [value, label]) => text.replaceAll(value, label), visible);
  return {
    errorText: (text) => cut(cleanText(text, Number.POSITIVE_INFINITY) ?? '').replace(HEX_DIGEST, '[redacted]'),
    field(text) {
      const visible = cleanText(text, Number.POSITIVE_INFINITY) ?? '';
      return credentials.some(([value]) => visible.includes(value)) ? cut(visible) : text;
    },
  };
}

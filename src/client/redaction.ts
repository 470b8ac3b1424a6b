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

/**
 * Every run of `%XX` escapes decoded, one run at a time, as a URL parser decodes a host: a stray
 * `%` elsewhere (which makes decodeURIComponent give up on the whole text) changes nothing.
 */
function decoded(text: string): string {
  return text.replace(/(?:%[0-9a-f]{2})+/gi, (run) => Buffer.from(run.replaceAll('%', ''), 'hex').toString('utf8'));
}

/** The text and, when it is a URL, what the URL parser makes of it (its host mapped as IDNA maps it: `ẞ` to `ss`). */
function spellings(text: string): string[] {
  try {
    return [text, new URL(text).href];
  } catch {
    return [text];
  }
}

/**
 * `text` as what shows it may turn it: whitespace gone (a URL parser drops tabs and newlines),
 * percent-decoded twice, NFKC-mapped (full-width letters) and lower-cased (a host name, a
 * case-insensitive reader; `ß` as `ss`, as a host's mapping has it). A credential found only in
 * this form cannot be cut out in place.
 */
function folded(text: string): string {
  return decoded(decoded(text.replace(/\s+/g, '')))
    .normalize('NFKC')
    .toLowerCase()
    .replaceAll('ß', 'ss');
}

/** The redactor of one panel's credentials (longest first, so a secret holding the key is cut whole). */
export function redactorFor(apiKey: string, apiSecret: string): Redactor {
  const credentials = [
    [apiSecret, '[api secret]'],
    [apiKey, '[api key]'],
  ].sort(([a], [b]) => (b as string).length - (a as string).length) as [string, string][];
  const foldedCredentials = credentials.map(([value]) => folded(value));
  const cut = (visible: string) => credentials.reduce((text, [value, label]) => text.replaceAll(value, label), visible);
  /** The text with the credentials cut out, or `[redacted]` whole when one hides in another spelling of it. */
  const redacted = (text: string) => {
    const visible = cut(cleanText(text, Number.POSITIVE_INFINITY) ?? '');
    return holds(visible) ? '[redacted]' : visible;
  };
  /** Whether any spelling of `text`, folded, holds a credential. */
  const holds = (text: string) => spellings(text).some((spelling) => foldedCredentials.some((value) => folded(spelling).includes(value)));
  return {
    errorText: (text) => redacted(text).replace(HEX_DIGEST, '[redacted]'),
    field(text) {
      return holds(cleanText(text, Number.POSITIVE_INFINITY) ?? '') ? redacted(text) : text;
    },
  };
}

// Shared helpers for validating options at construction: errors name the option and the fix.

const PREFIX = 'panel-license-guard';

function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let previous = row[0] ?? 0;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const current = row[j] ?? 0;
      row[j] = Math.min(current + 1, (row[j - 1] ?? 0) + 1, previous + (a[i - 1] === b[j - 1] ? 0 : 1));
      previous = current;
    }
  }
  return row[b.length] ?? 0;
}

/** Suggests the closest known name for a misspelt one (`maxage` → `maxAge`), if any is close. */
export function closestName(name: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestScore = Number.POSITIVE_INFINITY;
  const lower = name.toLowerCase();
  for (const candidate of known) {
    const other = candidate.toLowerCase();
    // A name that extends a known one (`allowList` for `allow`) is as good as a typo of it.
    const extension = other.length >= 4 && (lower.startsWith(other) || other.startsWith(lower)) ? 1 : Number.POSITIVE_INFINITY;
    const score = Math.min(extension, distance(lower, other));
    if (score < bestScore) [best, bestScore] = [candidate, score];
  }
  return bestScore <= Math.max(2, Math.floor(name.length / 3)) ? best : undefined;
}

/**
 * The names of an options interface, as the list that catches typos: the compiler wants every
 * option of `Options` named here and nothing else, so a new option cannot be left out of it.
 */
export function optionNames<Options extends object>(names: { readonly [Name in keyof Required<Options>]: true }): readonly string[] {
  return Object.keys(names);
}

/** Records a TypeError for every option name that is not known, each with a suggestion. */
export function rejectUnknownOptions(factory: string, options: object, known: readonly string[], problems?: OptionProblems): void {
  const own = problems ?? new OptionProblems();
  for (const name of Object.keys(options)) {
    if (known.includes(name)) continue;
    const suggestion = closestName(name, known);
    const hint = suggestion ? ` Did you mean \`${suggestion}\`?` : ` Known options: ${known.join(', ')}.`;
    own.add(new TypeError(`${PREFIX}: ${factory}() received an unknown option \`${name}\`.${hint}`));
  }
  if (!problems) own.throwIfAny(factory);
}

/**
 * Collects every problem of one options object, so a user fixes them all in one go instead of
 * one per restart. Each validation runs through `check()`; `throwIfAny()` then throws one
 * TypeError listing them in the order they were checked (a stable order).
 */
export class OptionProblems {
  private readonly messages: string[] = [];
  private readonly secrets: string[] = [];

  /**
   * Values never to show: if the API secret lands in the wrong option (swapped environment
   * variables), the error that names that option must not print it.
   */
  redact(secret: unknown): void {
    if (typeof secret === 'string' && secret.length >= 4) this.secrets.push(secret);
  }

  /** Runs one validation; a TypeError it throws is recorded and `fallback` is returned instead. */
  check<T>(validate: () => T, fallback: T): T {
    try {
      return validate();
    } catch (error) {
      if (!(error instanceof TypeError)) throw error;
      this.add(error);
      return fallback;
    }
  }

  add(error: TypeError): void {
    // A nested factory (the guard creating its client) reports its own list: keep each item.
    const nested = (error as TypeError & { problems?: string[] }).problems;
    for (const message of nested ?? [error.message])
      this.messages.push(this.secrets.reduce((text, secret) => text.replaceAll(secret, '[api secret]'), message));
  }

  get count(): number {
    return this.messages.length;
  }

  throwIfAny(factory: string): void {
    if (this.messages.length === 0) return;
    if (this.messages.length === 1) throw Object.assign(new TypeError(this.messages[0]), { problems: [...this.messages] });
    const list = this.messages.map((message, i) => `  ${i + 1}. ${message.replace(`${PREFIX}: `, '')}`).join('\n');
    const error = new TypeError(`${PREFIX}: ${factory}() received ${this.messages.length} invalid options:\n${list}`);
    throw Object.assign(error, { problems: [...this.messages] });
  }
}

/**
 * A received value as shown in an option error: JSON where possible (a BigInt, a cycle or a
 * throwing toJSON must not replace the TypeError that names the option), at most 80 characters.
 */
export function shown(value: unknown): string {
  let text: string;
  try {
    text = value === undefined ? 'undefined' : (JSON.stringify(value) ?? typeof value);
  } catch {
    text = `a ${typeof value}`;
  }
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/** Largest delay setTimeout accepts; above it Node fires after 1 ms, which would turn a delay into a busy loop. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

export function optionError(option: string, problem: string, fix: string): TypeError {
  return new TypeError(`${PREFIX}: \`${option}\` ${problem}. ${fix}`);
}

/** Reads a positive integer option, or its default when undefined. */
export function positiveInteger(option: string, value: unknown, fallback: number, min = 1, max = Number.MAX_SAFE_INTEGER): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `of at least ${min}` : `from ${min} to ${max}`;
    throw optionError(option, `must be an integer ${range}, received ${shown(value)}`, `Pass a number such as ${fallback}.`);
  }
  return value;
}

/** A delay or timeout in milliseconds: a positive integer that setTimeout can honour. */
export function timerMs(option: string, value: unknown, fallback: number, min = 1): number {
  return positiveInteger(option, value, fallback, min, MAX_TIMER_MS);
}

export function optionalFunction<T>(option: string, value: unknown): T | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'function') throw optionError(option, `must be a function, received ${typeof value}`, 'Pass a function or leave it out.');
  return value as T;
}

/** Validates a base URL: absolute, http(s), https unless loopback or explicitly allowed. */
export function parseBaseUrl(value: unknown, allowInsecureHttp: boolean): URL {
  if (typeof value !== 'string' || value.trim() === '') {
    throw optionError('baseUrl', 'must be a non-empty string', 'Pass the mother\'s base address, e.g. "https://mother.example/api/partner".');
  }
  let url: URL;
  try {
    url = new URL(value.trim());
  } catch {
    throw optionError('baseUrl', `is not an absolute URL (received ${shown(value)})`, 'Include the scheme, e.g. "https://mother.example/api/partner".');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw optionError('baseUrl', `must use https: (received ${url.protocol})`, 'Use the https address of the mother.');
  }
  if (url.username || url.password || url.search || url.hash) {
    throw optionError('baseUrl', 'must not carry credentials, a query or a fragment', 'Pass only the scheme, host and path prefix.');
  }
  // `…/license.php` is a script, not the directory of the scripts: every call would 404.
  const last = url.pathname.replace(/\/+$/, '').split('/').pop() ?? '';
  if (/\.php$/i.test(last))
    throw optionError(
      'baseUrl',
      `ends in a script name (${shown(last)}); it is the directory that holds license.php and release.php`,
      `Pass ${shown(url.origin + url.pathname.slice(0, url.pathname.lastIndexOf(last)).replace(/\/$/, ''))}.`,
    );
  const loopback = ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname) || url.hostname.startsWith('127.');
  if (url.protocol === 'http:' && !loopback && !allowInsecureHttp) {
    throw optionError(
      'baseUrl',
      'uses plain http: to a non-loopback host, which would expose the signed requests',
      'Use https:, or pass `allowInsecureHttp: true` if you really mean it.',
    );
  }
  return url;
}

/** Joins the base URL and a script name with exactly one slash, whatever the base ends with. */
export function endpointUrl(base: URL, script: string): string {
  const path = base.pathname.endsWith('/') ? base.pathname : `${base.pathname}/`;
  return new URL(`${path}${script}`, base.origin).toString();
}

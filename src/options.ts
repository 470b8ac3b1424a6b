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
  for (const candidate of known) {
    const score = distance(name.toLowerCase(), candidate.toLowerCase());
    if (score < bestScore) [best, bestScore] = [candidate, score];
  }
  return bestScore <= Math.max(2, Math.floor(name.length / 3)) ? best : undefined;
}

/** Throws a TypeError for the first option name that is not known, with a suggestion. */
export function rejectUnknownOptions(factory: string, options: object, known: readonly string[]): void {
  for (const name of Object.keys(options)) {
    if (known.includes(name)) continue;
    const suggestion = closestName(name, known);
    const hint = suggestion ? ` Did you mean \`${suggestion}\`?` : ` Known options: ${known.join(', ')}.`;
    throw new TypeError(`${PREFIX}: ${factory}() received an unknown option \`${name}\`.${hint}`);
  }
}

export function optionError(option: string, problem: string, fix: string): TypeError {
  return new TypeError(`${PREFIX}: \`${option}\` ${problem}. ${fix}`);
}

/** Reads a positive integer option, or its default when undefined. */
export function positiveInteger(option: string, value: unknown, fallback: number, min = 1): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    throw optionError(option, `must be an integer of at least ${min}, received ${JSON.stringify(value)}`, `Pass a number such as ${fallback}.`);
  }
  return value;
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
    throw optionError('baseUrl', `is not an absolute URL (received "${value}")`, 'Include the scheme, e.g. "https://mother.example/api/partner".');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw optionError('baseUrl', `must use https: (received ${url.protocol})`, 'Use the https address of the mother.');
  }
  if (url.username || url.password || url.search || url.hash) {
    throw optionError('baseUrl', 'must not carry credentials, a query or a fragment', 'Pass only the scheme, host and path prefix.');
  }
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

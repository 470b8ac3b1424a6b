// Where a PostgreSQL pool points, safe to show: a connection URL read as its writer meant it, or
// not at all, and `host:port/database` of a pool (never a password). Used by the outbox store, the
// license store and the CLI.
//
// A PostgreSQL connection URL read as its writer meant it, or not at all. `postgres://user:2024/
// Winter@host/db` parses as host `user`, port 2024 and a path holding the password: anything that
// shows such a URL (the CLI, an error message) would print the password. So a URL counts only
// when its host is what follows its last `@`; otherwise nothing of it is shown.

/** The URL when it is well formed (`postgres://`, host after the last `@`, no fragment); else undefined. */
export function wellFormedPostgresUrl(location: string): URL | undefined {
  const text = location.trim();
  if (!/^postgres(ql)?:\/\/[^/]/i.test(text)) return undefined;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  if (url.hostname === '' || url.hash !== '') return undefined;
  const at = text.lastIndexOf('@');
  if (at === -1) return url;
  const afterAt = text.slice(at + 1).split(/[/?#]/)[0] ?? '';
  return afterAt.toLowerCase() === url.host.toLowerCase() && url.username !== '' ? url : undefined;
}

/**
 * Looks like a URL or carries what looks like credentials (`scheme:` anywhere, `://`, or `:…@`),
 * whatever comes before it (quotes from an env file, `<…>`, invisible characters): never a file
 * path, and never to be shown unless well formed.
 */
export function looksLikeUrl(location: string): boolean {
  return /[a-z][a-z0-9+.-]+:\/\/|postgres(ql)?:|:[^@]*@/i.test(location);
}

interface PoolSettings {
  connectionString?: string;
  host?: string;
  port?: number | string;
  database?: string;
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * `host:port/database` of the pool, as node-postgres resolves it; never the user's password.
 * Undefined when its connection string does not read as a well-formed URL (nothing of it, nor
 * of the driver's message, which may quote a misread part of it, can be shown safely).
 */
export function poolAddress(pool: unknown): string | undefined {
  const options = ((pool as { options?: PoolSettings } | null)?.options ?? {}) as PoolSettings;
  let host = options.host;
  let port = options.port === undefined ? undefined : String(options.port);
  let database = options.database;
  if (options.connectionString !== undefined) {
    // Only a URL read as its writer meant it: `postgres://u:Pa@ss/S3cr3t@host/db` would show
    // part of the password as host and database.
    const url = wellFormedPostgresUrl(options.connectionString);
    if (url === undefined) return undefined;
    host ??= url.hostname;
    port ??= url.port === '' ? undefined : url.port;
    database ??= safeDecode(url.pathname.slice(1)) || undefined;
  }
  host ??= process.env.PGHOST ?? 'localhost';
  port ??= process.env.PGPORT ?? '5432';
  database ??= process.env.PGDATABASE ?? '(the user name)';
  return `${host}:${port}/${database}`;
}

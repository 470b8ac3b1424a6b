// Where a CLI command finds the outbox: a SQLite file, or a PostgreSQL URL (`postgres://…`).
import { existsSync } from 'node:fs';
import { looksLikeUrl, wellFormedPostgresUrl } from '../db/postgres-url.js';
import { UsageError } from '../errors.js';
import { describeError } from '../logger.js';
import type { OutboxStore } from '../outbox/store.js';
import type { PgPool } from '../outbox/stores/postgres/postgres-schema.js';
import { postgresOutboxStore } from '../outbox/stores/postgres/postgres-store.js';
import { sqliteOutboxStore } from '../outbox/stores/sqlite/sqlite-store.js';

/** `postgres:` or `postgresql:` however it goes on: a PostgreSQL location, never a file path. */
const POSTGRES_SCHEME = /^postgres(ql)?:/i;

/** The default SQLite outbox of the CLI. */
export const DEFAULT_OUTBOX_FILE = './data/outbox.db';

/**
 * Where the CLI finds the outbox when `--outbox` is not given: `PANEL_LICENSE_OUTBOX` (so that a
 * URL with a password stays off the command line and out of shell history), else the default file.
 */
export function outboxFromEnv(env: Record<string, string | undefined>): string {
  const given = env.PANEL_LICENSE_OUTBOX;
  return given === undefined || given.trim() === '' ? DEFAULT_OUTBOX_FILE : given;
}

export interface OpenedOutboxStore {
  store: OutboxStore;
  /** The location as it may be shown: a file path, or the URL without its password. */
  shown: string;
  /** Closes the store and, for PostgreSQL, the pool opened for it. */
  close(): Promise<void>;
}

export function isPostgresUrl(location: string): boolean {
  return POSTGRES_SCHEME.test(location.trim());
}

/**
 * Any `scheme:` of two letters or more at the start (`mysql://…`, `postgres:/…`), or anything
 * URL-like or credential-like further in (`"postgres://…"` with the quotes an env file leaves):
 * refused unless it is a well-formed PostgreSQL URL, never taken for a file path (which would
 * create a file named after it, password included). One letter is a Windows drive.
 */
const ANY_SCHEME = /^\s*[a-z][a-z0-9+.-]+:/i;
const notAFile = (location: string) => ANY_SCHEME.test(location) || looksLikeUrl(location);

/** Said of a PostgreSQL URL that cannot be read as meant; never quotes it (it may hold a password). */
const MALFORMED =
  '--outbox starts like a PostgreSQL URL but is not a well-formed postgres://user@host/db URL (in a password, / # ? @ : must be percent-encoded, e.g. %2F; or leave the password out and set PGPASSWORD). The value is not shown: it may hold a password.';

/**
 * The URL as it may be shown: scheme, user, host, port and database only. A password can sit in
 * the user info or in the query (`password=`, `sslpassword=`, …), so the query is never shown.
 */
function shownUrl(url: URL): string {
  const user = url.username === '' ? '' : `${url.username}${url.password === '' ? '' : ':***'}@`;
  return `${url.protocol}//${user}${url.host}${url.pathname}`;
}

/** Every secret the URL carries, to scrub from error text the driver may echo. */
function secretsOf(url: URL): string[] {
  const values = [url.password];
  try {
    values.push(decodeURIComponent(url.password));
  } catch {
    // a malformed escape: the raw form is scrubbed already
  }
  for (const [key, value] of url.searchParams) if (/pass|key|secret|token/i.test(key)) values.push(value);
  return values.filter((value) => value.length >= 3);
}

function scrubbed(text: string, secrets: string[]): string {
  return secrets.reduce((out, secret) => out.split(secret).join('***'), text);
}

interface PgModule {
  Pool: new (config: {
    connectionString: string;
    max: number;
  }) => PgPool & { end(): Promise<void>; on(event: 'error', listener: (error: Error) => void): unknown };
}

/** `pg` is an optional peer dependency: loaded only when a postgres:// URL is given. */
async function loadPg(usage: string): Promise<PgModule> {
  try {
    const pg = (await import('pg')) as unknown as Partial<PgModule> & { default?: PgModule };
    return pg.default ?? (pg as PgModule);
  } catch (error) {
    throw new UsageError(`A PostgreSQL outbox needs the 'pg' package: npm install pg (${describeError(error)}).`, usage);
  }
}

/**
 * `?schema=` and `?table=` choose the table (default public.release_outbox); they are taken off
 * the URL before node-postgres sees it. `mustExist`: listing and requeueing never create a table
 * in a database given by mistake.
 */
async function openPostgres(location: string, mustExist: boolean, usage: string): Promise<OpenedOutboxStore> {
  const url = wellFormedPostgresUrl(location);
  if (url === undefined) throw new UsageError(MALFORMED, usage);
  const schema = url.searchParams.get('schema') ?? 'public';
  const table = url.searchParams.get('table') ?? 'release_outbox';
  url.searchParams.delete('schema');
  url.searchParams.delete('table');
  const shown = shownUrl(url);
  const secrets = secretsOf(url);
  const { Pool } = await loadPg(usage);
  const pool = new Pool({ connectionString: url.toString(), max: 4 });
  // An idle connection that drops (PostgreSQL restarting) is an 'error' event on the pool: with no
  // listener it ends the process. The outbox's next query reconnects, and retries meanwhile.
  pool.on('error', () => {});
  const close = () => pool.end().catch(() => {});
  try {
    const store = postgresOutboxStore({ pool, schema, table });
    if (mustExist) {
      const found = await pool.query('SELECT to_regclass($1) IS NOT NULL AS present', [`"${schema}"."${table}"`]);
      if (!found.rows[0]?.present) throw new UsageError(`There is no outbox table ${schema}.${table} at ${shown} (nothing was ever queued there).`, usage);
    }
    return { store, shown, close };
  } catch (error) {
    await close();
    if (error instanceof UsageError) throw error;
    throw new Error(`Cannot open the outbox at ${shown}: ${scrubbed(describeError(error), secrets)}`);
  }
}

/** Opens the outbox at `location`. `mode`: `create` for push, `write` for retry, `read` for listing. */
export async function openOutboxStore(location: string, mode: 'create' | 'write' | 'read', usage: string): Promise<OpenedOutboxStore> {
  if (isPostgresUrl(location)) return openPostgres(location, mode !== 'create', usage);
  if (notAFile(location))
    throw new UsageError(
      '--outbox takes a file path or a postgres:// URL; this looks like a URL but is not one (check for quotes or stray characters around it; it is not shown: it may hold a password).',
      usage,
    );
  if (mode !== 'create' && !existsSync(location))
    throw new UsageError(`There is no outbox at ${location} (nothing was ever queued there). Pass --outbox FILE or a postgres:// URL.`, usage);
  try {
    // Check read-only first that this is an outbox: `retry` must not add an outbox table (and
    // switch to WAL) in some other application's database given by mistake.
    if (mode === 'write') void sqliteOutboxStore({ file: location, readonly: true }).close();
    const store = sqliteOutboxStore({ file: location, readonly: mode === 'read' });
    return { store, shown: location, close: async () => store.close() };
  } catch (error) {
    throw new Error(`Cannot open the outbox ${location}: ${describeError(error)}`, { cause: error });
  }
}

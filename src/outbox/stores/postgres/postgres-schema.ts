// The PostgreSQL outbox table: names, the versioned idempotent migration, and clear privilege errors.
import type { PgQueryable } from '../shared/connections.js';

export type { PgQueryable, PgQueryConfig } from '../shared/connections.js';

/** A client the store checked out of its pool. */
export interface PgClient extends PgQueryable {
  release(error?: Error | boolean): void;
  on(event: 'error', listener: (error: Error) => void): unknown;
  off(event: 'error', listener: (error: Error) => void): unknown;
}

export interface PgPool extends PgQueryable {
  connect(): Promise<PgClient>;
}

/**
 * Borrows a client for `work`. While it is checked out, pg-pool does not listen for its errors:
 * a connection killed by a database restart would emit an unheard 'error' and end the process.
 * We listen (the failing query rejects anyway) and hand a broken client back as broken.
 */
export async function withClient<T>(pool: PgPool, work: (client: PgClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  const onError = (error: Error) => {
    broken = error;
  };
  client.on('error', onError);
  try {
    return await work(client);
  } catch (error) {
    broken ??= error instanceof Error && isConnectionError(error) ? error : undefined;
    throw error;
  } finally {
    client.off('error', onError);
    client.release(broken ?? false);
  }
}

function isConnectionError(error: Error): boolean {
  const code = (error as { code?: string }).code ?? '';
  return code.startsWith('08') || code === '57P01' || /Connection terminated|ECONNRESET|EPIPE/.test(error.message);
}

export const SCHEMA_VERSION = 7;
/**
 * The claim index's own condition (v5), said word for word by the claims so they may use
 * it; a lookup of a track's pending row does not say it, so it cannot take that index and walk a
 * panel's whole queue. Always true of a due time; unlike `IS NOT NULL` on a NOT NULL column, no
 * planner folds it away.
 */
export const CLAIMABLE = 'next_attempt_at < 9223372036854775807';

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

/** Lower-case SQL identifiers only: they are interpolated (quoted) into statements, never user text. */
export function validIdentifier(value: string): boolean {
  return IDENTIFIER.test(value);
}

export interface TableNames {
  /** `"schema"."table"`, quoted. */
  table: string;
  /** `"schema"."table_migrations"`, quoted. */
  migrations: string;
  /** `"schema"."table_deliveries"`, quoted: the sequence that orders deliveries. */
  deliveries: string;
  /** `"schema"."table_controls"`, quoted: values every process shares (pauses, feed positions). */
  controls: string;
  schema: string;
  bare: string;
}

export function tableNames(schema: string, table: string): TableNames {
  return {
    table: `"${schema}"."${table}"`,
    migrations: `"${schema}"."${table}_migrations"`,
    deliveries: `"${schema}"."${table}_deliveries"`,
    controls: `"${schema}"."${table}_controls"`,
    schema,
    bare: table,
  };
}

/** Times are epoch milliseconds (BIGINT), as in the SQLite store, so the row rules are shared. */
function migrationV1({ table, bare, schema }: TableNames): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS ${table} (
      id               BIGSERIAL PRIMARY KEY,
      remote_track_id  TEXT,
      body             TEXT    NOT NULL,
      content_hash     TEXT    NOT NULL,
      state            TEXT    NOT NULL CHECK (state IN ('pending', 'delivered', 'dead')),
      attempts         INTEGER NOT NULL DEFAULT 0,
      next_attempt_at  BIGINT  NOT NULL,
      last_error       TEXT,
      release_id       BIGINT,
      delivered_seq    INTEGER,
      lease_owner      TEXT,
      lease_expires_at BIGINT,
      created_at       BIGINT  NOT NULL,
      updated_at       BIGINT  NOT NULL,
      delivered_at     BIGINT
    )`,
    `CREATE INDEX IF NOT EXISTS "${bare}_due" ON ${table} (state, next_attempt_at, id)`,
    `CREATE INDEX IF NOT EXISTS "${bare}_track" ON ${table} (remote_track_id, state, id)`,
    `COMMENT ON TABLE ${table} IS 'panel-license-guard release outbox (schema "${schema}")'`,
  ];
}

/** v2: `history_of` marks a delivered payload kept after its row took a newer one (the row's id). */
function migrationV2({ table }: TableNames): string[] {
  return [`ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS history_of BIGINT`];
}

/**
 * v3: a unique index keeps one pending row per track, which lets enqueues run without a lock; a
 * sequence orders deliveries (a per-track MAX + 1 could tie between two unlocked settles).
 * Earlier versions could hold two pending rows of one track (a requeued older release): the
 * older one is marked dead first, saying why, since the newer content is what the mother must
 * end with. Every step is idempotent.
 */
function migrationV3({ table, bare, deliveries }: TableNames): string[] {
  return [
    `UPDATE ${table} AS older SET state = 'dead', lease_owner = NULL, lease_expires_at = NULL,
      last_error = 'Superseded by a newer release of the same track when the outbox table was upgraded (only the newest is sent).'
      WHERE state = 'pending' AND remote_track_id IS NOT NULL AND EXISTS (
        SELECT 1 FROM ${table} AS newer WHERE newer.remote_track_id = older.remote_track_id AND newer.state = 'pending' AND newer.id > older.id)`,
    `CREATE UNIQUE INDEX IF NOT EXISTS "${bare}_pending" ON ${table} (remote_track_id) WHERE state = 'pending'`,
    `CREATE SEQUENCE IF NOT EXISTS ${deliveries}`,
    `SELECT setval('${deliveries}', GREATEST((SELECT COALESCE(MAX(delivered_seq), 0) + 1 FROM ${table}), nextval('${deliveries}')), false)`,
  ];
}

/**
 * v4: every row records its panel (whose credentials it goes out with); rows of older versions
 * get '' and wait for `adoptUnassigned`. Tracks, the one-pending-row rule and claims become per
 * panel. The claim index is partial (pending rows only) and leads with the panel, so a claim
 * seeks from one panel to the next however long a panel's queue is.
 */
function migrationV4(names: TableNames): string[] {
  const { table, bare } = names;
  const dropOwn = (suffix: string) => dropOwnIndex(names, suffix);
  return [
    `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS panel TEXT NOT NULL DEFAULT ''`,
    `CREATE UNIQUE INDEX IF NOT EXISTS "${bare}_panel_pending" ON ${table} (panel, remote_track_id) WHERE state = 'pending'`,
    dropOwn('pending'),
    `CREATE INDEX IF NOT EXISTS "${bare}_panel_due" ON ${table} (panel, next_attempt_at, id) WHERE state = 'pending'`,
    dropOwn('due'),
    `CREATE INDEX IF NOT EXISTS "${bare}_panel_track" ON ${table} (panel, remote_track_id, state, id)`,
    dropOwn('track'),
  ];
}

/**
 * v5: the claim index's predicate also says CLAIMABLE (always true of a due time), which the
 * claims say too, so they still use it; a lookup of a track's pending row (every enqueue, every
 * row a claim considers) no longer can. Before the table has statistics (a new table, or
 * autovacuum off) the planner found both indexes as cheap for that lookup and could take this
 * one, walking every pending row of the panel per lookup: with 3,000 rows pending, a batch of 8
 * enqueues read 15 times the pages it reads now, and a claim of 8 2.4 times.
 */
function migrationV5(names: TableNames): string[] {
  const { table, bare } = names;
  // Dropped first: the table's strongest lock is then taken once, not raised from CREATE INDEX's.
  return [
    dropOwnIndex(names, 'panel_due'),
    `CREATE INDEX IF NOT EXISTS "${bare}_panel_claim" ON ${table} (panel, next_attempt_at, id) WHERE state = 'pending' AND ${CLAIMABLE}`,
  ];
}

/**
 * Drops `<table>_<suffix>` only when it is this table's index: another table of the schema may
 * own an index of that name (a table called "<table>_panel" has "<table>_panel_due"). Names are
 * validated identifiers, so interpolating them is safe.
 */
function dropOwnIndex({ table, bare, schema }: TableNames, suffix: string): string {
  return `DO $$ BEGIN
      IF EXISTS (SELECT 1 FROM pg_index JOIN pg_class ON pg_class.oid = pg_index.indexrelid JOIN pg_namespace ON pg_namespace.oid = pg_class.relnamespace
        WHERE pg_namespace.nspname = '${schema}' AND pg_class.relname = '${bare}_${suffix}' AND pg_index.indrelid = '${table}'::regclass)
      THEN DROP INDEX "${schema}"."${bare}_${suffix}"; END IF; END $$`;
}

/**
 * v6, what operators do: a `cancelled` state, a feed position per delivery, and shared controls.
 * The state CHECK was named by PostgreSQL (`<table>_state_check`, the table's part cut short for a
 * long name), so every CHECK on `state` is dropped by what it constrains, not by name, and one
 * named here replaces it. Feed positions are given after delivery (null until then, and for rows
 * delivered before v6 until the first feed read): one unique index orders them (and would refuse
 * one position given twice), one serves a panel's feed, and a partial one finds delivered rows
 * still without a position without walking the pending ones. Control names compare byte for byte
 * (COLLATE "C"), like panel ids.
 */
function migrationV6({ table, bare, schema, controls }: TableNames): string[] {
  return [
    `DO $$ DECLARE c record; BEGIN
      FOR c IN SELECT conname FROM pg_constraint JOIN pg_attribute ON attrelid = conrelid AND attnum = ANY (conkey)
        WHERE conrelid = '${table}'::regclass AND contype = 'c' AND attname = 'state' AND cardinality(conkey) = 1
      LOOP EXECUTE format('ALTER TABLE ${table} DROP CONSTRAINT %I', c.conname); END LOOP; END $$`,
    `ALTER TABLE ${table} ADD CONSTRAINT "${bare}_states" CHECK (state IN ('pending', 'delivered', 'dead', 'cancelled'))`,
    `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS feed_position BIGINT`,
    `CREATE UNIQUE INDEX IF NOT EXISTS "${bare}_feed" ON ${table} (feed_position) WHERE feed_position IS NOT NULL`,
    `CREATE INDEX IF NOT EXISTS "${bare}_panel_feed" ON ${table} (panel, feed_position) WHERE feed_position IS NOT NULL`,
    `CREATE INDEX IF NOT EXISTS "${bare}_unfed" ON ${table} (delivered_at, id) WHERE state = 'delivered' AND feed_position IS NULL`,
    `CREATE TABLE IF NOT EXISTS ${controls} (
      name       VARCHAR(220) COLLATE "C" PRIMARY KEY,
      value      VARCHAR(64)  NOT NULL,
      updated_at BIGINT       NOT NULL
    )`,
    `COMMENT ON TABLE ${controls} IS 'panel-license-guard release outbox controls (schema "${schema}")'`,
  ];
}

/** v7: the enqueuing caller's trace context (W3C), which the delivery span links to; null when none was traced. */
function migrationV7({ table }: TableNames): string[] {
  return [`ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS trace_context TEXT`];
}

const MIGRATIONS = [migrationV1, migrationV2, migrationV3, migrationV4, migrationV5, migrationV6, migrationV7];

/** A missing privilege, said in full: what to grant, on what. Other errors pass through. */
export function privilegeError(names: TableNames, error: unknown): Error {
  const code = (error as { code?: string }).code;
  if (code === '42501')
    return new Error(
      `panel-license-guard: the database user lacks a privilege the outbox table ${names.table} needs (${(error as Error).message}). Grant it CREATE and USAGE on schema "${names.schema}" (CREATE on the database too if the schema does not exist yet), or create the table once with a user that may (the store does it on first use); afterwards it needs SELECT, INSERT, UPDATE and DELETE (retention) on ${names.table}, SELECT, INSERT, UPDATE and DELETE on ${names.controls}, SELECT on ${names.migrations}, and USAGE and UPDATE on the sequences ${names.deliveries} and the id's. Upgrading the table to a new version needs its owner once.`,
      { cause: error },
    );
  return error instanceof Error ? error : new Error(String(error));
}

/**
 * Creates the schema, table and indexes when missing, once per database however many processes
 * start together (an advisory lock serializes them), and records the version. A table written by
 * a newer version of this package is refused rather than misread.
 */
export async function migrate(pool: PgPool, names: TableNames): Promise<void> {
  await withClient(pool, async (client) => {
    try {
      await client.query('BEGIN ISOLATION LEVEL READ COMMITTED');
      // Per schema: two tables of one schema must not both try to create it.
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`panel-license-guard:"${names.schema}"`]);
      // Look before creating: a user with only SELECT/INSERT/UPDATE on a table an owner created
      // must not need CREATE (PostgreSQL checks that privilege even for IF NOT EXISTS).
      const found = await client.query('SELECT to_regclass($1) IS NOT NULL AS present', [names.migrations]);
      const version = found.rows[0]?.present
        ? Number((await client.query(`SELECT COALESCE(MAX(version), 0) AS v FROM ${names.migrations}`)).rows[0]?.v ?? 0)
        : 0;
      if (version > SCHEMA_VERSION)
        throw new Error(
          `panel-license-guard: ${names.table} holds outbox schema v${version}, written by a newer version of this package; upgrade it to use this table.`,
        );
      if (version < 1) {
        const schema = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [names.schema]);
        if (schema.rowCount === 0) await client.query(`CREATE SCHEMA "${names.schema}"`);
        await client.query(`CREATE TABLE IF NOT EXISTS ${names.migrations} (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)`);
      }
      for (const [index, migration] of MIGRATIONS.entries()) {
        if (index + 1 <= version) continue;
        for (const statement of migration(names)) await client.query(statement);
        await client.query(`INSERT INTO ${names.migrations} (version, applied_at) VALUES ($1, $2)`, [index + 1, Date.now()]);
      }
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw privilegeError(names, error);
    }
  });
}

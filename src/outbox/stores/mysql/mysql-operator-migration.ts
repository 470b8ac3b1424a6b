// Schema step 2 of the MySQL/MariaDB outbox: what operators need — a 'cancelled' state, a feed
// position on delivered rows, and a table of control values (pauses, feed positions).
// One self-contained step: it looks at the table first and gives only the statements still
// missing, since MySQL commits each DDL statement on its own and a step may be cut off half-way.

import { run } from './mysql-params.js';
import type { MysqlQueryable, MysqlTableNames } from './mysql-schema.js';

type Row = Record<string, unknown>;
const rows = async (connection: MysqlQueryable, sql: string, values: (string | null)[]) => (await run(connection, sql, values))[0] as Row[];

/** The states a row may be in from this step on (store.ts, OUTBOX_STATES). */
const STATE_CHECK = "CHECK (state IN ('pending', 'delivered', 'dead', 'cancelled'))";

// information_schema, by the table's schema and bare name. MariaDB names an unnamed CHECK
// `CONSTRAINT_1` per table (its CHECK_CONSTRAINTS has TABLE_NAME); MySQL names it `<table>_chk_1`,
// unique in the schema, and its CHECK_CONSTRAINTS has no TABLE_NAME (TABLE_CONSTRAINTS says whose).
const MARIADB_CHECKS = `SELECT CONSTRAINT_NAME AS name, CHECK_CLAUSE AS clause FROM information_schema.CHECK_CONSTRAINTS
  WHERE CONSTRAINT_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?`;
const MYSQL_CHECKS = `SELECT tc.CONSTRAINT_NAME AS name, cc.CHECK_CLAUSE AS clause FROM information_schema.TABLE_CONSTRAINTS AS tc
  JOIN information_schema.CHECK_CONSTRAINTS AS cc ON cc.CONSTRAINT_SCHEMA = tc.CONSTRAINT_SCHEMA AND cc.CONSTRAINT_NAME = tc.CONSTRAINT_NAME
  WHERE tc.TABLE_SCHEMA = COALESCE(?, DATABASE()) AND tc.TABLE_NAME = ? AND tc.CONSTRAINT_TYPE = 'CHECK'`;
const COLUMN = `SELECT COUNT(*) AS n FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? AND COLUMN_NAME = 'feed_position'`;
const INDEXES = `SELECT DISTINCT INDEX_NAME AS name FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?`;

/**
 * Step 2. The CHECK on `state` is replaced by one named `<table>_state_check` that allows
 * 'cancelled' (a CHECK cannot be altered; both servers copy the table for it, as for any new
 * CHECK: writes wait meanwhile — measured 6.8 s for 100,000 rows of 300-byte releases on MariaDB
 * 10.11, against 0.2 s for the column and 0.6 s for each index, which are built online). `feed_position` is added empty:
 * rows delivered before get a position on the first feed read. Its indexes: `feed` (state,
 * feed_position, delivered_at, id) serves the feed read of every panel, and finding delivered
 * rows with no position yet in delivery order without walking pending rows; `feed_of_panel`
 * (panel, feed_position) the read of one panel's feed, without walking other panels' deliveries.
 */
export async function migrationOperators(names: MysqlTableNames, collation: string, connection: MysqlQueryable): Promise<string[]> {
  const { table, controls } = names;
  const where = [names.database ?? null, names.tableName];
  const [server] = await rows(connection, 'SELECT VERSION() AS version', []);
  const mariadb = /mariadb/i.test(String(server?.version));
  const statements = [
    // Names compare byte for byte (a binary NO PAD collation), as panel ids do: `pause:acme` and
    // `pause:acme ` are two panels' pauses.
    `CREATE TABLE IF NOT EXISTS ${controls} (
      name       VARCHAR(220) NOT NULL PRIMARY KEY,
      value      VARCHAR(64)  NOT NULL,
      updated_at BIGINT       NOT NULL
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation} COMMENT='panel-license-guard outbox: values every process shares (pauses, feed positions)'`,
  ];
  if (Number((await rows(connection, COLUMN, where))[0]?.n) === 0) statements.push(`ALTER TABLE ${table} ADD COLUMN feed_position BIGINT NULL`);
  const indexes = new Set((await rows(connection, INDEXES, where)).map((r) => String(r.name)));
  if (!indexes.has('feed')) statements.push(`ALTER TABLE ${table} ADD KEY feed (state, feed_position, delivered_at, id)`);
  if (!indexes.has('feed_of_panel')) statements.push(`ALTER TABLE ${table} ADD KEY feed_of_panel (panel, feed_position)`);
  const named = `${names.tableName}_state_check`;
  const checks = await rows(connection, mariadb ? MARIADB_CHECKS : MYSQL_CHECKS, where);
  const onState = checks.filter((check) => /\bstate\b/i.test(String(check.clause)) && String(check.clause).includes("'dead'"));
  const done = onState.some((check) => check.name === named && String(check.clause).includes("'cancelled'"));
  if (!done) {
    // One statement: the old CHECK goes only as the new one comes (DDL is atomic on InnoDB).
    const drop = onState.map((check) => `${mariadb ? 'DROP CONSTRAINT' : 'DROP CHECK'} \`${String(check.name)}\``);
    statements.push(`ALTER TABLE ${table} ${[...drop, `ADD CONSTRAINT \`${named}\` ${STATE_CHECK}`].join(', ')}`);
  }
  return statements;
}

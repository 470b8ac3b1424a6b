// How the MySQL store's statements carry values: apart from the SQL text (server-side prepared
// statements), so no session setting (sql_mode's NO_BACKSLASH_ESCAPES) can make a value read as SQL.
import type { MysqlQueryable, MysqlResult } from './mysql-schema.js';

/** A LIMIT's row count. MySQL 8.0.22+ refuses one sent as a DOUBLE (mysql2's type for numbers), so it goes as text. */
export class RowCount {
  constructor(readonly count: number) {}
}

/** A value of a statement: text, a number, NULL, or a LIMIT's row count. Never a list (see `padded`). */
export type MysqlValue = string | number | null | RowCount;

export const rowCount = (count: number) => new RowCount(count);

/**
 * Runs `sql` on `connection` with `values` apart from its text. mysql2's `execute()` prepares it
 * once per connection (server-side) and sends the values in the binary protocol. A connection with
 * only `query()` (Kysely's, whose MySQL driver offers nothing else) has mysql2 write the values into
 * the text; text then goes as a hex literal (X'…', which mysql2 makes of a Buffer): hex digits,
 * which no sql_mode reads as anything but bytes. Numbers go as digits.
 */
export function run(connection: MysqlQueryable, sql: string, values: readonly MysqlValue[] = []): Promise<MysqlResult> {
  if (values.length === 0) return connection.query(sql);
  if (typeof connection.execute === 'function') return connection.execute(sql, values.map(prepared));
  return connection.query(sql, values.map(inText));
}

const prepared = (value: MysqlValue) => (value instanceof RowCount ? String(value.count) : value);
const inText = (value: MysqlValue) => (value instanceof RowCount ? value.count : typeof value === 'string' ? Buffer.from(value, 'utf8') : value);

/**
 * The sizes a list of values comes in. mysql2 keeps every statement it prepared on a connection
 * until 16,000 (and the server counts them all in `max_prepared_stmt_count`, 16,382 by default,
 * shared by every client): a statement per list length would fill both. Padding to a few sizes
 * keeps a statement with one list to 6 texts at most, however long its lists.
 */
const SHAPES = [1, 8, 64, 512, 4096, 32_768];

/** The longest list a statement takes (the longest id lists are retention's, at most 10,000). */
export const MAX_LIST = SHAPES[SHAPES.length - 1] as number;

/**
 * `values` padded to the next of a few sizes with copies of its last value (`none` when it is
 * empty): `IN (…)` and `NOT IN (…)` then match the same rows, with a statement of a few shapes.
 */
export function padded<T extends MysqlValue>(values: readonly T[], none: T): T[] {
  const size = SHAPES.find((shape) => shape >= values.length);
  if (size === undefined) throw new RangeError(`panel-license-guard: a list of ${values.length} values is longer than the MySQL store sends (${MAX_LIST}).`);
  return [...values, ...new Array<T>(size - values.length).fill(values.at(-1) ?? none)];
}

const marks = new Map<number, string>();
/** `?, ?, …`: `count` placeholders (one of the shapes above). */
export function placeholders(count: number): string {
  let text = marks.get(count);
  if (text === undefined) {
    text = new Array(count).fill('?').join(', ');
    marks.set(count, text);
  }
  return text;
}

/**
 * A statement with lists: its text for the lists' lengths, built once per shape. `text` takes the
 * placeholders of each list.
 */
export function withLists(text: (...lists: string[]) => string): (...lengths: number[]) => string {
  const built = new Map<string, string>();
  return (...lengths) => {
    const key = lengths.join(',');
    let sql = built.get(key);
    if (sql === undefined) {
      sql = text(...lengths.map(placeholders));
      built.set(key, sql);
    }
    return sql;
  };
}

/**
 * `text` cut at a character's end to at most `maxBytes` of UTF-8, ending in `…` when cut: what a
 * column holds is then decided here, the same way whether the session is strict (which refuses
 * too long a value) or not (which cuts it where it falls).
 */
export function fitText(text: string, maxBytes: number): string {
  // A UTF-16 code unit is at most 3 bytes of UTF-8 (a surrogate pair, 2 units, is 4).
  if (text.length * 3 <= maxBytes || Buffer.byteLength(text) <= maxBytes) return text;
  const room = maxBytes - Buffer.byteLength('…');
  let bytes = 0;
  let end = 0;
  for (const character of text) {
    const code = character.codePointAt(0) as number;
    const size = code < 0x80 ? 1 : code < 0x800 ? 2 : code < 0x10000 ? 3 : 4;
    if (bytes + size > room) break;
    bytes += size;
    end += character.length;
  }
  return `${text.slice(0, end)}…`;
}

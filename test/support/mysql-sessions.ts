// MySQL sessions for the sql_mode tests: a mode switched on every pooled session mid-run (as an app
// sharing the pool would), a session variable read back from each, and a pool that refuses any
// value written into a statement's text.
import type mysql from 'mysql2/promise';

export const NO_BACKSLASH_ESCAPES_ON = "SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',NO_BACKSLASH_ESCAPES')";
export const STRICT_OFF = "SET SESSION sql_mode = REPLACE(REPLACE(@@SESSION.sql_mode, 'STRICT_TRANS_TABLES', ''), 'STRICT_ALL_TABLES', '')";

/**
 * Runs `sql` on each of the `size` sessions of `pool` (borrowed all at once, so every one of a pool
 * of that `connectionLimit`), and returns each one's rows.
 */
export async function onEverySession(pool: mysql.Pool, size: number, sql: string): Promise<unknown[]> {
  const sessions = await Promise.all(Array.from({ length: size }, () => pool.getConnection()));
  try {
    const answers: unknown[] = [];
    for (const session of sessions) answers.push((await session.query(sql))[0]);
    return answers;
  } finally {
    for (const session of sessions) session.release();
  }
}

/**
 * Injected SQL that counts, in the session variable @plg_probe, the rows it ran for (and sleeps
 * a little on each, as the attack of the report did). Text ending a quote under NO_BACKSLASH_ESCAPES.
 */
export const PROBE = "x') OR (SLEEP(0.01) + (@plg_probe := COALESCE(@plg_probe, 0) + 1)) #";

/** How many rows injected SQL ran for, on any session of `pool` (0: none ran). */
export async function probed(pool: mysql.Pool, size: number): Promise<number> {
  const answers = (await onEverySession(pool, size, 'SELECT @plg_probe AS n')) as [{ n: unknown }][];
  return answers.reduce((sum, [row]) => sum + Number(row?.n ?? 0), 0);
}

/**
 * `target` (a mysql2/promise pool or connection) that fails any `query()` given values: mysql2
 * writes those into the SQL text. `execute()` (values apart) and `query()` without values pass.
 */
export function valuesApartOnly<T extends object>(target: T): T {
  return new Proxy(target, {
    get(object, key) {
      const value = Reflect.get(object, key, object) as unknown;
      if (typeof value !== 'function') return value;
      if (key === 'query')
        return (sql: string, values?: unknown[]) => {
          if (values !== undefined && values.length > 0) throw new Error(`values written into the text of: ${sql}`);
          return value.call(object, sql);
        };
      if (key === 'getConnection') return async () => valuesApartOnly(await value.call(object));
      return value.bind(object);
    },
  });
}

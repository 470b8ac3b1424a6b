// The delivery feed of a SQLite outbox: delivered rows are given positions (stamped) in the order
// their deliveries committed, then read by position. The store runs in the app's own event loop,
// so a backlog (rows delivered before the feed was first read, or while no one read it) is
// stamped and read in slices, the loop getting a turn between them.
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { SqliteDatabase, SqliteStatement } from '../../../db/sqlite-driver.js';
import { describeError } from '../../../logger.js';
import type { FeedRequest, FeedRow } from '../../store-operations.js';
import type { WalSync } from './sqlite-wal-sync.js';

/**
 * Rows given positions per transaction: each is rewritten whole (its body too), about 16 µs a row
 * here, so 500 hold the loop and the write lock some 8 ms (100,000 rows stamped and read in 4.2 s).
 */
export const STAMP_BATCH = 500;
/** Positions one read statement looks at: a feed of one panel among many skips the others' rows by slices. */
export const READ_WINDOW = 5_000;
/** The control row holding the highest position given (release_outbox_controls). */
export const FEED_COUNTER = 'feed-position';

// Every statement reads the partial feed index (sqlite-operator-schema.ts), named: without
// statistics SQLite would rather take the (state, …) indexes and sort every delivered row. Each
// names `state = 'delivered'`, which lets it use that index at all.
export const FEED_SQL = {
  counter: `SELECT value FROM release_outbox_controls WHERE name = '${FEED_COUNTER}'`,
  anyUnstamped: `SELECT 1 AS found FROM release_outbox INDEXED BY release_outbox_feed WHERE state = 'delivered' AND feed_position IS NULL LIMIT 1`,
  // The next rows without a position in (delivered_at, id) order, numbered from @base + 1: the
  // inner LIMIT bounds the work (a window function over every unstamped row would not).
  stamp: `UPDATE release_outbox SET feed_position = @base + ranked.n FROM (
      SELECT id, row_number() OVER (ORDER BY delivered_at, id) AS n FROM (
        SELECT id, delivered_at FROM release_outbox INDEXED BY release_outbox_feed WHERE state = 'delivered' AND feed_position IS NULL ORDER BY delivered_at, id LIMIT @batch)
    ) AS ranked WHERE release_outbox.id = ranked.id`,
  setCounter: `INSERT INTO release_outbox_controls (name, value, updated_at) VALUES ('${FEED_COUNTER}', @value, @now)
    ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
  read: `SELECT feed_position AS position, id, panel, remote_track_id AS remoteTrackId, release_id AS releaseId, content_hash AS contentHash,
      delivered_at AS deliveredAt FROM release_outbox INDEXED BY release_outbox_feed
    WHERE state = 'delivered' AND feed_position > @after AND feed_position <= @upTo ORDER BY feed_position LIMIT @limit`,
  readOfPanel: `SELECT feed_position AS position, id, panel, remote_track_id AS remoteTrackId, release_id AS releaseId, content_hash AS contentHash,
      delivered_at AS deliveredAt FROM release_outbox INDEXED BY release_outbox_feed
    WHERE state = 'delivered' AND feed_position > @after AND feed_position <= @upTo AND panel = @panel ORDER BY feed_position LIMIT @limit`,
};

type Record = Omit<FeedRow, 'remoteTrackId' | 'releaseId'> & { remoteTrackId: string | null; releaseId: number | null };

/**
 * deliveries() of a writable store. Positions follow commit order: a row is stamped only after its
 * delivery committed, and stamping takes the write lock (BEGIN IMMEDIATE) before it reads the
 * counter, so two stampers, of this process or another, never interleave: no row gets two
 * positions, no position two rows, and every position given later is higher. A reader resuming
 * after P thus never misses a delivery that committed after it read P. The rows returned are on
 * disk first (the WAL synced, `wal`): a power loss cannot take back a position a reader has seen.
 */
export function createFeed(db: SqliteDatabase, wal: WalSync | undefined) {
  const statements = Object.fromEntries(Object.entries(FEED_SQL).map(([name, sql]) => [name, db.prepare(sql)])) as {
    [name in keyof typeof FEED_SQL]: SqliteStatement;
  };
  const counter = () => Number((statements.counter.get() as { value: string } | undefined)?.value ?? 0);
  const stampBatch = db.transaction((): number => {
    const base = counter();
    const stamped = statements.stamp.run({ base, batch: STAMP_BATCH }).changes;
    if (stamped > 0) statements.setCounter.run({ value: String(base + stamped), now: Date.now() });
    return stamped;
  });
  /** One batch; whether more rows may be waiting for a position. No write lock when none waits. */
  const stampSome = (): boolean => statements.anyUnstamped.get() !== undefined && stampBatch.immediate() === STAMP_BATCH;

  return async function deliveries({ after, limit, panel }: FeedRequest): Promise<FeedRow[]> {
    const rows: FeedRow[] = [];
    let from = after;
    let more = true;
    for (;;) {
      if (more) more = stampSome();
      // What is stamped now, a window of positions per statement, until the page is full.
      const top = counter();
      while (rows.length < limit && from < top) {
        const upTo = Math.min(from + READ_WINDOW, top);
        const wanted = limit - rows.length;
        const read = (
          panel === undefined
            ? statements.read.all({ after: from, upTo, limit: wanted })
            : statements.readOfPanel.all({ after: from, upTo, limit: wanted, panel })
        ) as Record[];
        for (const row of read) rows.push({ ...row, remoteTrackId: row.remoteTrackId ?? undefined, releaseId: row.releaseId ?? undefined });
        from = read.length === wanted ? (read.at(-1) as Record).position : upTo;
        if (rows.length < limit && from < top) await nextTurn();
      }
      if (rows.length >= limit || !more) break;
      await nextTurn();
    }
    if (rows.length > 0)
      await wal?.durable().catch((error: unknown) => {
        throw new Error(
          `panel-license-guard: the outbox file could not be synced to disk (${describeError(error)}); these deliveries' positions may not be on disk, so they are not given. Close the outbox and open it again (check the disk).`,
          { cause: error },
        );
      });
    return rows;
  };
}

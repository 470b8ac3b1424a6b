// The delivery-feed recipe: write the mother's release_id back onto the app's own rows, with the
// feed's cursor kept in the same database and the same transaction as those writes. A crash at
// any point either committed both (the next read starts after them) or neither (the same page is
// read again): no release_id is lost and none is applied twice.
import Database from 'better-sqlite3';

/** How often the follower looks for deliveries; a 'delivered' event in this process looks at once. */
const FOLLOW_EVERY_MS = 1_000;

/**
 * Follows `outbox`'s deliveries into `tracks` (the app's own table) in the SQLite file `file`.
 *
 * @param {{ outbox: import("panel-license-guard").ReleaseOutbox, file: string, pageSize?: number, onApplied?: (page: { position: number, remoteTrackId: string | undefined, releaseId: number | undefined }[]) => void }} options
 */
export function followDeliveries({ outbox, file, pageSize = 500, onApplied }) {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.exec(`CREATE TABLE IF NOT EXISTS tracks (
      remote_track_id TEXT PRIMARY KEY,
      release_id      INTEGER,
      delivered_at    INTEGER,
      applied         INTEGER NOT NULL DEFAULT 0  -- how many times a release_id was written (the recipe keeps it at 1)
    );
    CREATE TABLE IF NOT EXISTS feed_cursor (feed TEXT PRIMARY KEY, position INTEGER NOT NULL)`);
  const cursorOf = db.prepare(`SELECT position FROM feed_cursor WHERE feed = 'release-ids'`).pluck();
  const saveCursor = db.prepare(
    `INSERT INTO feed_cursor (feed, position) VALUES ('release-ids', ?) ON CONFLICT (feed) DO UPDATE SET position = excluded.position`,
  );
  const writeBack = db.prepare(`INSERT INTO tracks (remote_track_id, release_id, delivered_at, applied) VALUES (?, ?, ?, 1)
    ON CONFLICT (remote_track_id) DO UPDATE SET release_id = excluded.release_id, delivered_at = excluded.delivered_at, applied = applied + 1`);
  // One transaction: the writes of a page and the cursor after it commit together, or not at all.
  // Only if the cursor is still where this page was read from: another process following the same
  // feed into the same database may have applied the page first (then this one applies nothing).
  const applyPage = db.transaction((deliveries, after, cursor) => {
    if ((cursorOf.get() ?? 0) !== after) return false;
    for (const d of deliveries) if (d.remoteTrackId !== undefined) writeBack.run(d.remoteTrackId, d.releaseId ?? null, d.deliveredAt);
    saveCursor.run(cursor);
    return true;
  });

  let running;
  let stopped = false;
  async function follow() {
    // Named feed: the outbox keeps every delivery this feed has not read past (retention waits).
    for (;;) {
      const after = cursorOf.get() ?? 0;
      const page = await outbox.deliveries({ feed: 'release-ids', after, limit: pageSize });
      if (page.deliveries.length === 0) return;
      // IMMEDIATE: the cursor is read under the write lock, so two followers never both apply a page.
      if (applyPage.immediate(page.deliveries, after, page.cursor)) onApplied?.(page.deliveries);
    }
  }
  const look = () => {
    if (stopped) return;
    running ??= follow()
      .catch((error) => console.warn('release-ids: the feed could not be read, retrying:', error.message))
      .finally(() => {
        running = undefined;
      });
  };
  const timer = setInterval(look, FOLLOW_EVERY_MS);
  timer.unref();
  outbox.on('delivered', look);
  look();

  return {
    /** The app's own rows, as a page would show them. */
    tracks: () => db.prepare('SELECT remote_track_id AS remoteTrackId, release_id AS releaseId, applied FROM tracks ORDER BY remote_track_id').all(),
    /** Looks now, and resolves once what was there is applied. */
    async catchUp() {
      await running; // a read under way may have begun before the latest delivery
      look();
      await running;
    },
    async close() {
      stopped = true;
      clearInterval(timer);
      outbox.off('delivered', look);
      await running;
      db.close();
    },
  };
}

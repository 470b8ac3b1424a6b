// Figure 15: the delivery feed reading 100,000 deliveries on each store — the first read (which
// hands out the feed positions) and a second one (positions given), as deliveries per second and
// as a ratio to paging the same delivered rows with list() (by id, the store's plain read).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import { memoryOutboxStore } from 'panel-license-guard';
import { mysqlOutboxStore } from 'panel-license-guard/mysql';
import { postgresOutboxStore } from 'panel-license-guard/postgres';
import { sqliteOutboxStore } from 'panel-license-guard/sqlite';
import pg from 'pg';
import { fmt, round } from './stats.js';

const PAGE = 1000;
const PANEL = 'feed-bench';

/** `count` delivered rows, stored and settled through the store's own API, in batches. */
async function fill(store, count, log) {
  const started = performance.now();
  for (let done = 0; done < count; ) {
    const batch = Math.min(500, count - done);
    await Promise.all(
      Array.from({ length: batch }, (_, i) => {
        const body = JSON.stringify({ release: { title: `Song ${done + i}`, remote_track_id: `t-${done + i}` } });
        return store.enqueue({ panel: PANEL, remoteTrackId: `t-${done + i}`, body, contentHash: `h-${done + i}` }, Date.now());
      }),
    );
    const claimed = await store.claimDue({ panel: PANEL, owner: 'bench', limit: batch, nowMs: Date.now(), leaseMs: 60_000 });
    const settles = claimed.map((claim, i) => ({ claim, outcome: { kind: 'delivered', releaseId: done + i + 1 }, nowMs: Date.now() }));
    if (store.settleMany) await store.settleMany(settles, 'bench');
    else for (const s of settles) await store.settle(s.claim, 'bench', s.outcome, s.nowMs);
    done += batch;
  }
  log(`    filled ${fmt(count)} deliveries in ${fmt((performance.now() - started) / 1000, 1)} s`);
}

async function readFeed(store) {
  const started = performance.now();
  let after = 0;
  let read = 0;
  for (;;) {
    const rows = await store.deliveries({ after, limit: PAGE });
    if (rows.length === 0) break;
    read += rows.length;
    after = rows.at(-1).position;
  }
  return { read, seconds: (performance.now() - started) / 1000 };
}

async function readList(store) {
  const started = performance.now();
  let afterId;
  let read = 0;
  for (;;) {
    const rows = await store.list({ state: 'delivered', limit: PAGE, afterId });
    if (rows.length === 0) break;
    read += rows.length;
    afterId = rows.at(-1).id;
  }
  return { read, seconds: (performance.now() - started) / 1000 };
}

export async function measureDeliveryFeed({ count, databaseUrl, mysqlUrl, log }) {
  const dir = mkdtempSync(join(tmpdir(), 'feed-bench-'));
  const pgPool = databaseUrl ? new pg.Pool({ connectionString: databaseUrl, max: 4 }) : undefined;
  const myPool = mysqlUrl ? mysql.createPool({ uri: mysqlUrl, connectionLimit: 4 }) : undefined;
  const schema = `bench_feed_${process.pid}`;
  const table = `bench_feed_${process.pid}`;
  const stores = [
    ['memory', () => memoryOutboxStore()],
    ['SQLite', () => sqliteOutboxStore({ file: join(dir, 'feed.db') })],
    ...(pgPool ? [['PostgreSQL', () => postgresOutboxStore({ pool: pgPool, schema })]] : []),
    ...(myPool ? [['MySQL/MariaDB', () => mysqlOutboxStore({ pool: myPool, table })]] : []),
  ];
  log(`  delivery feed: ${fmt(count)} deliveries per store, pages of ${PAGE}`);
  const figures = [];
  try {
    for (const [name, open] of stores) {
      const store = open();
      try {
        await fill(store, count, log);
        const list = await readList(store);
        const first = await readFeed(store);
        const second = await readFeed(store);
        if (first.read !== count || second.read !== count)
          throw new Error(`bench: the feed gave ${first.read} / ${second.read} of ${count} deliveries on ${name}`);
        const rate = (r) => r.read / r.seconds;
        const ratio = round(rate(second) / rate(list), 3);
        log(
          `    ${name}: first read ${fmt(rate(first))}/s (${fmt(first.seconds, 2)} s, positions handed out), again ${fmt(rate(second))}/s, list() ${fmt(rate(list))}/s`,
        );
        figures.push({
          id: `feed-${name.toLowerCase().replace(/\W+/g, '-')}`,
          figure: `15. Delivery feed, ${fmt(count)} deliveries, ${name}`,
          measured: `${fmt(rate(second))}/s (first read ${fmt(rate(first))}/s, ${fmt(first.seconds, 1)} s)`,
          baseline: `${fmt(rate(list))}/s list()`,
          ratio,
          target: 'reads every delivery',
          met: true,
          raw: { count, page: PAGE, firstSeconds: first.seconds, againSeconds: second.seconds, listSeconds: list.seconds },
        });
      } finally {
        await store.close();
      }
    }
  } finally {
    if (pgPool) await pgPool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).finally(() => pgPool.end());
    if (myPool) await myPool.query(`DROP TABLE IF EXISTS ${table}, ${table}_tracks, ${table}_migrations, ${table}_controls`).finally(() => myPool.end());
    rmSync(dir, { recursive: true, force: true });
  }
  return figures;
}

// Figure 6c: cluster mode on the license stores that need no Redis — four processes sharing one
// verdict on PostgreSQL, on MySQL/MariaDB and (one host) on SQLite: license checks per schedule
// slot, and lock propagation p50/p99 to every process over HTTP.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { measureChecksPerSlot, measurePropagation, startInstances, stopInstances } from './cluster.js';
import { round } from './stats.js';

const PANEL = { apiKey: 'bench-cluster-stores', apiSecret: 'bench-cluster-stores-secret', active: true, panel: { name: 'Cluster Records' } };

/** Drops the store's tables of one run (a fresh table per run keeps runs apart). */
async function dropTables(kind, url, table) {
  if (kind === 'postgres') {
    const { default: pg } = await import('pg');
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query(`DROP TABLE IF EXISTS "${table}", "${table}_migrations"`);
    await client.end();
  } else if (kind === 'mysql') {
    const { default: mysql } = await import('mysql2/promise');
    const connection = await mysql.createConnection({ uri: url });
    await connection.query(`DROP TABLE IF EXISTS \`${table}\`, \`${table}_migrations\``);
    await connection.end();
  }
}

async function measureOne({ kind, name, url, emulator, flips, slotSeconds, log }) {
  const folder = kind === 'sqlite' ? mkdtempSync(join(tmpdir(), 'plg-bench-store-')) : undefined;
  const table = `bench_cluster_${randomBytes(4).toString('hex')}`;
  const store = { kind, url, file: folder && join(folder, 'license.db') };
  const common = { count: 4, baseUrl: emulator.url, apiKey: PANEL.apiKey, apiSecret: PANEL.apiSecret, store, prefix: table };
  let instances = [];
  try {
    instances = await startInstances({ ...common, schedule: '* * * * * *' });
    const slots = await measureChecksPerSlot({ instances, seconds: slotSeconds });
    stopInstances(instances);
    instances = await startInstances({ ...common, schedule: '0 0 1 1 *' });
    const propagation = await measurePropagation({ emulator, instances, apiKey: PANEL.apiKey, flips });
    log(`  ${name}: ${slots.calls} license calls in ${slots.slots} slots; propagation p50 ${propagation.p50} ms, p99 ${propagation.p99} ms`);
    return [
      {
        id: `cluster-${kind}-checks-per-slot`,
        figure: `6c. Cluster mode on ${name}: license checks per schedule slot, 4 processes`,
        measured: `${slots.calls} checks in ${slots.slots} slots`,
        baseline: '4 per slot without a store',
        ratio: slots.perSlot,
        target: '1 (±1 slot at the window edges)',
        met: Math.abs(slots.calls - slots.slots) <= 1,
        raw: slots,
      },
      {
        id: `cluster-${kind}-propagation`,
        figure: `6c. Cluster mode on ${name}: lock propagation to all 4 processes (HTTP, after one refresh)`,
        measured: `p50 ${propagation.p50} ms, p99 ${propagation.p99} ms`,
        baseline: '1 s target',
        ratio: round(propagation.p99 / 1000, 3),
        target: 'p99 < 1 s (ratio to 1 s < 1)',
        met: propagation.p99 < 1000,
        raw: propagation,
      },
    ];
  } finally {
    stopInstances(instances);
    if (folder) rmSync(folder, { recursive: true, force: true });
    else await dropTables(kind, url, table).catch(() => {});
  }
}

export async function measureClusterStores({ databaseUrl, mysqlUrl, flips, slotSeconds, log }) {
  const { createMotherEmulator } = await import('panel-license-guard/testing');
  const emulator = await createMotherEmulator({ panels: [PANEL] });
  const stores = [
    ...(databaseUrl ? [{ kind: 'postgres', name: 'PostgreSQL', url: databaseUrl }] : []),
    ...(mysqlUrl ? [{ kind: 'mysql', name: 'MySQL/MariaDB', url: mysqlUrl }] : []),
    { kind: 'sqlite', name: 'SQLite (one host)' },
  ];
  try {
    const rows = [];
    for (const store of stores) rows.push(...(await measureOne({ ...store, emulator, flips, slotSeconds, log })));
    return rows;
  } finally {
    await emulator.close();
  }
}

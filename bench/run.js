// `npm run bench`: runs every figure in one process tree on one machine, prints the table, writes bench/results.json.
import { fileURLToPath } from 'node:url';
import { LOAD_CPU, pinToCpu, SERVER_CPU, startChild } from './child.js';
import { measureCluster } from './cluster.js';
import { measureClusterStores } from './cluster-stores.js';
import { measureConsole } from './console.js';
import { measureDeliveryComparison } from './delivery.js';
import { measureDeliveryFeed } from './delivery-feed.js';
import { measureHandlerCost } from './handler-cost.js';
import { measureLockPage, measureRequestPath, measureRequestPathStores } from './http-overhead.js';
import { measureMemory } from './memory.js';
import { measureMetrics } from './metrics.js';
import { measureOutbox } from './outbox.js';
import { measureOutboxPanels } from './outbox-panels.js';
import { measurePostgresOutbox } from './outbox-postgres.js';
import { measureOutboxStores } from './outbox-stores.js';
import { measurePanels } from './panels.js';
import { measurePanelsProfile } from './panels-profile.js';
import { measurePanelsRestart } from './panels-restart.js';
import { measureRedisClients } from './redis-clients.js';
import { machineInfo, renderMachine, renderNotes, renderTable, writeResults } from './report.js';
import { mysqlAnswers, postgresAnswers, redisAnswers } from './services.js';
import { measureSigning } from './signing.js';
import { measureTracing, measureTracingCpu } from './tracing.js';

const quick = process.argv.includes('--quick');
/** `--only=6b,12`: just those figures (printed, not written to results.json). */
const only = process.argv
  .find((arg) => arg.startsWith('--only='))
  ?.slice('--only='.length)
  .split(',');

/**
 * Budget on 2 cores, about 2.5 minutes: request path 20 rounds x 4 variants x 1 s (~90 s),
 * lock page 20 x 2 x 1 s (~45 s), signing ~6 s, outbox ~12 s, memory ~15 s. autocannon works in
 * whole seconds (it samples once a second), so a round is 1 s. Many short rounds rather than a few
 * long ones: this machine's speed drifts by ±30 % within a minute, and a ratio is only as good as
 * the number of back-to-back pairs behind its median. `--quick` is a smoke test of the harness.
 * Figure 11 (six systems x four configurations x 5 rounds x 3,000 releases) adds about 7 minutes.
 */
const SETTINGS = quick
  ? {
      http: { rounds: 2, seconds: 1, warmupSeconds: 1, connections: 32 },
      signing: { rounds: 3, roundMs: 200 },
      handler: { rounds: 3 },
      outbox: { rounds: 1, count: 100, concurrency: 4 },
      memory: { first: 1000, total: 5000, connections: 32 },
      cluster: { flips: 4, slotSeconds: 3 },
      postgres: { rounds: 1, count: 100, concurrency: 4 },
      panels: { count: 1000, rounds: 1 },
      panelsProfile: { rounds: 1, seconds: 1, connections: 32 },
      outboxPanels: { count: 200, perPanel: 2, failing: 20, backlog: 500, rounds: 1, concurrency: 8 },
      metrics: { rounds: 2, rows: 1000 },
      delivery: { rounds: 1, count: 200 },
      redisClients: { rounds: 2, seconds: 1, warmupSeconds: 1, connections: 32, calls: 400 },
      stores: { rounds: 1, count: 100, concurrency: 4 },
      console: { panels: 500, releases: 2000, rounds: 3 },
      restart: { count: 500 },
      feed: { count: 2000 },
      tracing: { rounds: 1, count: 200 },
      tracingCpu: { rounds: 3, count: 2000 },
    }
  : {
      http: { rounds: 20, seconds: 1, warmupSeconds: 2, connections: 32 },
      signing: { rounds: 9, roundMs: 600 },
      handler: { rounds: 9 },
      outbox: { rounds: 5, count: 500, concurrency: 4 },
      memory: { first: 1000, total: 50_000, connections: 32 },
      cluster: { flips: 40, slotSeconds: 10 },
      postgres: { rounds: 5, count: 500, concurrency: 4 },
      panels: { count: 10_000, rounds: 5 },
      panelsProfile: { rounds: 6, seconds: 3, connections: 32 },
      outboxPanels: { count: 1000, perPanel: 5, failing: 100, backlog: 10_000, rounds: 5, concurrency: 8 },
      metrics: { rounds: 9, rows: 10_000 },
      delivery: { rounds: 5, count: 3000 },
      redisClients: { rounds: 10, seconds: 1, warmupSeconds: 2, connections: 32, calls: 4000 },
      stores: { rounds: 5, count: 500, concurrency: 4 },
      console: { panels: 10_000, releases: 100_000, rounds: 20 },
      restart: { count: 10_000 },
      feed: { count: 100_000 },
      tracing: { rounds: 5, count: 2000 },
      tracingCpu: { rounds: 21, count: 2000 },
    };

const log = (line) => console.error(line);
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const MYSQL_URL = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

async function main() {
  const started = performance.now();
  const machine = machineInfo();
  log(`panel-license-guard benchmarks${quick ? ' (--quick: a smoke test, not figures to quote)' : ''}: ${machine.cpus} CPUs, Node ${machine.node}`);
  const pinned = pinToCpu(process.pid, LOAD_CPU);
  log(
    pinned
      ? `  autocannon, signing and the outbox on CPU ${LOAD_CPU}; servers and the emulator on CPU ${SERVER_CPU}`
      : '  no CPU pinning (no taskset or one CPU)',
  );
  // The mother emulator gets its own process: idle during the HTTP figures, on its own core for the outbox.
  const redisUrl = (await redisAnswers(REDIS_URL)) ? REDIS_URL : undefined;
  if (!redisUrl) log(`  Redis at ${REDIS_URL} did not answer: the cluster-mode figures are skipped (set REDIS_URL).`);
  const databaseUrl = (await postgresAnswers(DATABASE_URL)) ? DATABASE_URL : undefined;
  if (!databaseUrl) log('  PostgreSQL did not answer: the PostgreSQL outbox figures are skipped (set DATABASE_URL).');
  const mysqlUrl = (await mysqlAnswers(MYSQL_URL)) ? MYSQL_URL : undefined;
  if (!mysqlUrl) log('  MySQL/MariaDB did not answer: figure 12 runs without it (set MYSQL_URL).');
  const emulator = await startChild({ role: 'emulator' });
  const baseUrl = emulator.info.url;
  const figures = [];
  try {
    const steps = [
      ['1. request path', () => measureRequestPath({ baseUrl, redisUrl, ...SETTINGS.http, log })],
      [
        '1b. handler cost',
        () =>
          measureHandlerCost({
            baseUrl,
            redisUrl,
            bareCpuMicros: figures.find((f) => f.id === 'request-path').raw.cpuMedians.bare,
            rounds: SETTINGS.handler.rounds,
            log,
          }),
      ],
      [
        '1c. request path on the SQL stores',
        () => measureRequestPathStores({ baseUrl, databaseUrl, mysqlUrl, ...SETTINGS.http, rounds: Math.ceil(SETTINGS.http.rounds / 2), log }),
      ],
      ['2. lock page', () => measureLockPage({ baseUrl, ...SETTINGS.http, log })],
      ['3. signing', () => measureSigning({ ...SETTINGS.signing, log })],
      ['4. release delivery', () => measureOutbox({ emulator, ...SETTINGS.outbox, log })],
      ['5. memory', () => measureMemory({ baseUrl, ...SETTINGS.memory, log })],
      ...(redisUrl ? [['6. cluster mode', () => measureCluster({ redisUrl, ...SETTINGS.cluster, log })]] : []),
      ...(redisUrl ? [['6b. cluster mode on ioredis', () => measureRedisClients({ baseUrl, redisUrl, ...SETTINGS.redisClients, log })]] : []),
      ['6c. cluster mode on the SQL stores', () => measureClusterStores({ databaseUrl, mysqlUrl, ...SETTINGS.cluster, log })],
      ...(databaseUrl ? [['7. PostgreSQL outbox', () => measurePostgresOutbox({ emulator, databaseUrl, ...SETTINGS.postgres, log })]] : []),
      ['8. many panels', () => measurePanels({ ...SETTINGS.panels, log })],
      ['8b. many panels under load', () => measurePanelsProfile({ baseUrl, ...SETTINGS.panelsProfile, log })],
      ['8c. a panels deployment restarted', () => measurePanelsRestart({ databaseUrl, ...SETTINGS.restart, log })],
      ['9. metrics', () => measureMetrics({ baseUrl, ...SETTINGS.metrics, log })],
      ["10. many panels' releases", () => measureOutboxPanels({ emulator, ...SETTINGS.outboxPanels, log })],
      ['13. the console at scale', () => measureConsole({ ...SETTINGS.console, log })],
      ['12. the stores side by side', () => measureOutboxStores({ emulator, databaseUrl, mysqlUrl, ...SETTINGS.stores, log })],
      ['15. the delivery feed', () => measureDeliveryFeed({ databaseUrl, mysqlUrl, ...SETTINGS.feed, log })],
      ['11. delivery side by side', () => measureDeliveryComparison({ emulator, databaseUrl, redisUrl, ...SETTINGS.delivery, log })],
      ['14. tracing', () => measureTracing({ baseUrl, emulator, databaseUrl, http: SETTINGS.http, ...SETTINGS.tracing, log })],
      ['14b. tracing, CPU per release', () => measureTracingCpu({ ...SETTINGS.tracingCpu, log })],
    ];
    for (const [name, measure] of steps.filter(([name]) => !only || only.includes(name.split('.')[0]))) {
      const stepStart = performance.now();
      log(name);
      figures.push(...(await measure()));
      log(`  (${Math.round((performance.now() - stepStart) / 1000)} s)`);
    }
  } finally {
    await emulator.close();
  }
  const seconds = (performance.now() - started) / 1000;
  console.log(`\n${renderTable(figures)}\n\n${renderNotes()}\n\n${renderMachine(machine, seconds, pinned)}\n`);
  if (!quick && !only)
    writeResults(fileURLToPath(new URL('./results.json', import.meta.url)), { machine, settings: { ...SETTINGS, pinned }, figures, seconds });
  const missed = figures.filter((f) => f.met === false);
  if (missed.length > 0) {
    console.log(`Targets missed: ${missed.map((f) => f.id).join(', ')}`);
    process.exitCode = 1;
  } else console.log('Every target met.');
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});

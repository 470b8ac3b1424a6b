// Figure 9: what metrics cost. The request path with metrics registered against the same guard
// without (per call, alternating rounds), and the time of one scrape with 10,000 outbox rows.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMotherClient, createReleaseOutbox, licenseGuard } from 'panel-license-guard';
import { registerMetrics } from 'panel-license-guard/metrics';
import { Registry } from 'prom-client';
import { PANELS } from './app.js';
import { fmt, median, round } from './stats.js';

const CALLS = 1_000_000;

function nsPerCall(middleware) {
  const next = () => {};
  const req = { url: '/', originalUrl: '/', method: 'GET', headers: {} };
  const start = process.hrtime.bigint();
  for (let i = 0; i < CALLS; i++) middleware(req, { locals: Object.create(null) }, next);
  return Number(process.hrtime.bigint() - start) / CALLS;
}

async function timeScrapes(registry, count) {
  const ms = [];
  for (let i = 0; i < count; i++) {
    const start = performance.now();
    await registry.metrics();
    ms.push(performance.now() - start);
  }
  return median(ms);
}

export async function measureMetrics({ baseUrl, rounds, rows, log }) {
  const { apiKey, apiSecret } = PANELS.active;
  const options = { baseUrl, apiKey, apiSecret, schedule: '0 0 1 1 *', jitterMs: 0 };
  const plain = licenseGuard(options);
  // An identical guard without metrics: the A/A control, so the figure shows what two equal guards differ by.
  const twin = licenseGuard(options);
  const measured = licenseGuard(options);
  const registry = new Registry();
  registerMetrics({ registry, guard: measured });
  const dir = mkdtempSync(join(tmpdir(), 'bench-metrics-'));
  const client = createMotherClient({ baseUrl, apiKey, apiSecret });
  const outbox = createReleaseOutbox({ client, file: join(dir, 'outbox.db'), autoStart: false, logger: { warn() {}, error() {} } });
  try {
    for (const guard of [plain, twin, measured]) if ((await guard.start()) !== 'active') throw new Error('the bench guards are not active');
    const withNs = [];
    const withoutNs = [];
    const twinNs = [];
    const orders = [
      [plain, twin, measured],
      [measured, plain, twin],
      [twin, measured, plain],
    ];
    for (let r = 0; r < rounds; r++) {
      for (const guard of orders[r % 3]) (guard === measured ? withNs : guard === twin ? twinNs : withoutNs).push(nsPerCall(guard));
      log(`    round ${r + 1}/${rounds}: with metrics ${fmt(withNs.at(-1), 1)} ns, without ${fmt(withoutNs.at(-1), 1)} ns, twin ${fmt(twinNs.at(-1), 1)} ns`);
    }
    const callRatio = median(withNs) / median(withoutNs);
    const twinRatio = median(twinNs) / median(withoutNs);

    const outboxRegistry = new Registry();
    registerMetrics({ registry: outboxRegistry, guard: plain, outbox });
    const emptyMs = await timeScrapes(outboxRegistry, 50);
    for (let i = 0; i < rows; i++) await outbox.enqueue({ title: `Track ${i}`, remote_track_id: `bench-${i}` });
    const fullMs = await timeScrapes(outboxRegistry, 50);
    if (!(await outboxRegistry.metrics()).includes(`panel_license_outbox_releases{state="pending"} ${rows}`))
      throw new Error('the scrape did not count the rows');
    log(`    scrape: ${fmt(emptyMs, 2)} ms empty, ${fmt(fullMs, 2)} ms with ${rows} rows`);
    return [
      {
        id: 'metrics-request-path',
        figure: '9a. Request path with metrics registered vs the same guard without (per call)',
        measured: `${fmt(median(withNs), 1)} ns with metrics`,
        baseline: `${fmt(median(withoutNs), 1)} ns without (an identical twin without: ratio ${fmt(twinRatio, 3)})`,
        ratio: round(callRatio, 3),
        target: '≤ 1.05',
        met: callRatio <= 1.05,
        raw: { calls: CALLS, withNs, withoutNs, twinNs, twinRatio },
      },
      {
        id: 'metrics-scrape',
        figure: `9b. One scrape (guard + SQLite outbox) with ${rows.toLocaleString('en')} pending rows vs an empty outbox`,
        measured: `${fmt(fullMs, 2)} ms`,
        baseline: `${fmt(emptyMs, 2)} ms empty`,
        ratio: round(fullMs / emptyMs, 2),
        target: 'report',
        met: null,
        raw: { rows, emptyMs, fullMs },
      },
    ];
  } finally {
    await Promise.all([plain.close(), twin.close(), measured.close(), outbox.close()]);
    rmSync(dir, { recursive: true, force: true });
  }
}

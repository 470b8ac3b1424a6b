// Figure 10: many panels' releases through one outbox (SQLite). With 1,000 panels x 5 releases
// and 100 of them at a mother that fails: the healthy panels' delivery rate as a ratio of the
// same run with every mother healthy. And the wait of one panel's single release behind another
// panel's backlog of 10,000, as a ratio of one delivery on an idle outbox.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HOSTED_COUNT, hostedPanels } from './app.js';
import { startChild } from './child.js';
import { loadCreateReleaseOutbox, makeRelease } from './outbox.js';
import { fmt, median, round } from './stats.js';

const quietLogger = { warn() {}, error() {} };

/** A panels outbox over the emulator's hosted panels; `mothers(i)` names panel i's base URL. */
function panelsOutbox(createReleaseOutbox, { file, baseUrl, mothers, concurrency, timeoutMs }) {
  const credentials = hostedPanels(HOSTED_COUNT);
  return createReleaseOutbox({
    file,
    baseUrl,
    timeoutMs,
    concurrency,
    autoStart: false,
    logger: quietLogger,
    panels: {
      resolve: (panel) => {
        const i = Number(panel.slice('tenant-'.length));
        const { apiKey, apiSecret } = credentials[i];
        return { apiKey, apiSecret, baseUrl: mothers(i) };
      },
    },
  });
}

/** Resolves when `predicate(event)` has held `count` times for 'delivered' events. */
function deliveries(outbox, count, predicate = () => true) {
  let seen = 0;
  return new Promise((resolve) => {
    outbox.on('delivered', (event) => {
      if (predicate(event) && ++seen === count) resolve(performance.now());
    });
  });
}

/** Healthy panels' releases per second, with `failing` panels at a mother that answers `fault`. */
async function healthyRate(createReleaseOutbox, { dir, run, count, perPanel, failing, emulator, failingMother, concurrency }) {
  const isFailing = (i) => i < failing;
  const outbox = panelsOutbox(createReleaseOutbox, {
    file: join(dir, `rate-${run}.db`),
    baseUrl: emulator.info.url,
    mothers: (i) => (isFailing(i) ? failingMother.info.url : undefined),
    concurrency,
    timeoutMs: 2000,
  });
  try {
    for (let r = 0; r < perPanel; r++) for (let i = 0; i < count; i++) await outbox.enqueue(makeRelease(`${run}-${i}`, r), { panel: `tenant-${i}` });
    const healthy = (count - failing) * perPanel;
    const done = deliveries(outbox, healthy, (event) => !isFailing(Number(event.panel.slice('tenant-'.length))));
    const start = performance.now();
    outbox.start();
    const end = await done;
    return healthy / ((end - start) / 1000);
  } finally {
    await outbox.close();
  }
}

/**
 * Milliseconds from enqueue to delivery of panel 1's single release behind panel 0's `backlog`,
 * and what one delivery took meanwhile (the median push of panel 0's releases delivered while
 * it waited): "about one delivery" is measured under the same load.
 */
async function singleDelay(createReleaseOutbox, { dir, run, backlog, emulator, concurrency }) {
  const outbox = panelsOutbox(createReleaseOutbox, {
    file: join(dir, `delay-${run}.db`),
    baseUrl: emulator.info.url,
    mothers: () => undefined,
    concurrency,
    timeoutMs: 10_000,
  });
  try {
    for (let i = 0; i < backlog; i++) await outbox.enqueue(makeRelease(`${run}-backlog`, i), { panel: 'tenant-0' });
    const warm = deliveries(outbox, Math.min(backlog, 200));
    outbox.start();
    if (backlog > 0) await warm;
    const pushes = [];
    outbox.on('delivered', (event) => {
      if (event.panel === 'tenant-0') pushes.push(event.durationMs);
    });
    const mine = deliveries(outbox, 1, (event) => event.panel === 'tenant-1');
    const enqueued = performance.now();
    await outbox.enqueue(makeRelease(`${run}-single`, 0), { panel: 'tenant-1' });
    const waitedMs = (await mine) - enqueued;
    return { waitedMs, deliveryMs: pushes.length > 0 ? median(pushes) : waitedMs };
  } finally {
    await outbox.close();
  }
}

/** Median ratio of the healthy panels' rate with `failing` panels at a mother answering `faults` to the rate with none. */
async function isolation(createReleaseOutbox, { dir, label, faults, count, perPanel, failing, rounds, concurrency, emulator, failingMother, log }) {
  await failingMother.request('faults', { faults });
  log(`  ${count} panels x ${perPanel} releases, ${failing} at a mother that ${label}; ${rounds} rounds, concurrency ${concurrency}`);
  const ratios = [];
  for (let r = 0; r < rounds; r++) {
    const rates = {};
    for (const name of r % 2 === 0 ? ['failing', 'healthy'] : ['healthy', 'failing']) {
      await emulator.request('reset');
      const settings = { dir, run: `${label.replaceAll(' ', '-')}-${name}-${r}`, count, perPanel, emulator, failingMother, concurrency };
      rates[name] = await healthyRate(createReleaseOutbox, { ...settings, failing: name === 'failing' ? failing : 0 });
    }
    ratios.push(rates.failing / rates.healthy);
    log(`    round ${r + 1}/${rounds}: healthy panels ${fmt(rates.failing)}/s with ${failing} failing, ${fmt(rates.healthy)}/s with none`);
  }
  return ratios;
}

export async function measureOutboxPanels({ emulator, count, perPanel, failing, backlog, rounds, concurrency, log }) {
  const createReleaseOutbox = await loadCreateReleaseOutbox();
  const dir = mkdtempSync(join(tmpdir(), 'bench-outbox-panels-'));
  const failingMother = await startChild({ role: 'emulator', hosted: count });
  try {
    const common = { dir, count, perPanel, failing, rounds, concurrency, emulator, failingMother, log };
    const ratios = await isolation(createReleaseOutbox, { ...common, label: 'answers 503', faults: { down: true } });
    // The harshest failure: every push there times out (2 s), holding its slot meanwhile.
    const hangingRatios = await isolation(createReleaseOutbox, { ...common, label: 'hangs', faults: { delayMs: 60_000 } });
    log(`  one release of one panel behind another panel's ${fmt(backlog)}, vs one delivery meanwhile`);
    const delays = { waitedMs: [], deliveryMs: [], idleMs: [] };
    for (let r = 0; r < rounds; r++) {
      await emulator.request('reset');
      const idle = await singleDelay(createReleaseOutbox, { dir, run: `idle-${r}`, backlog: 0, emulator, concurrency });
      const behind = await singleDelay(createReleaseOutbox, { dir, run: `behind-${r}`, backlog, emulator, concurrency });
      delays.idleMs.push(idle.waitedMs);
      delays.waitedMs.push(behind.waitedMs);
      delays.deliveryMs.push(behind.deliveryMs);
      log(
        `    round ${r + 1}/${rounds}: waited ${fmt(behind.waitedMs, 1)} ms; one delivery took ${fmt(behind.deliveryMs, 1)} ms meanwhile (${fmt(idle.waitedMs, 1)} ms on an idle outbox)`,
      );
    }
    const rateRatio = median(ratios);
    const delayRatio = median(delays.waitedMs.map((waited, i) => waited / delays.deliveryMs[i]));
    return [
      {
        id: 'outbox-panels-isolation',
        figure: `10. Many panels: healthy panels' delivery rate with ${failing} of ${fmt(count)} panels' mother failing vs none`,
        measured: `${round(rateRatio, 3)} of the healthy run`,
        baseline: `${fmt(count)} panels x ${perPanel} releases, concurrency ${concurrency}`,
        ratio: round(rateRatio, 3),
        target: '≥ 0.9',
        met: rateRatio >= 0.9,
        raw: { ratios },
      },
      {
        id: 'outbox-panels-isolation-hanging',
        figure: `10. Many panels: the same with ${failing} panels' mother hanging (every push there times out after 2 s)`,
        measured: `${round(median(hangingRatios), 3)} of the healthy run`,
        baseline: 'the first timeout costs the slots in flight there once; then one probe at a time, a quarter of the slots at most',
        ratio: round(median(hangingRatios), 3),
        target: 'report',
        met: null,
        raw: { ratios: hangingRatios },
      },
      {
        id: 'outbox-panels-fairness',
        figure: `10. Many panels: one panel's single release behind another's backlog of ${fmt(backlog)} vs one delivery's time meanwhile`,
        measured: `${fmt(median(delays.waitedMs), 1)} ms`,
        baseline: `${fmt(median(delays.deliveryMs), 1)} ms per delivery (${fmt(median(delays.idleMs), 1)} ms idle)`,
        ratio: round(delayRatio, 3),
        target: '≤ 2',
        met: delayRatio <= 2,
        raw: delays,
      },
    ];
  } finally {
    await failingMother.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

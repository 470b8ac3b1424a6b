// Figures 1 and 2: req/s of the guarded app vs bare (no-op middleware and helmet as references), and of the lock page.
import { closeAll, startChild } from './child.js';
import { compareVariants, fetchPage } from './load.js';
import { fmt, median, round } from './stats.js';

/** req/s, with the server's CPU µs per request in brackets (the cross-check that noise moves less). */
const rps = (run, name) => `${fmt(run.medians[name])} req/s (${fmt(run.cpuMedians[name], 1)} µs)`;

/**
 * Ratio of A to B as the median of the per-round ratios: A and B ran back to back in every round,
 * so each ratio compares two runs under the same machine conditions. On a shared machine whose
 * speed drifts by ±30 % over a minute, this is far steadier than dividing the two overall medians.
 */
export function pairedRatio(run, a, b) {
  const perRound = run.perRound[a].map((value, i) => value / run.perRound[b][i]);
  return { ratio: round(median(perRound), 3), perRound: perRound.map((value) => round(value, 3)), ofMedians: round(run.medians[a] / run.medians[b], 3) };
}

export async function startServers(variants, config) {
  const servers = {};
  try {
    for (const variant of variants) servers[variant] = await startChild({ role: 'server', variant, ...config });
    return servers;
  } catch (error) {
    await closeAll(Object.values(servers));
    throw error;
  }
}

/** Every variant must serve the same bytes: otherwise the comparison measures body size, not middleware. */
async function assertSameBody(servers, expectStatus) {
  const sizes = {};
  for (const [name, server] of Object.entries(servers)) {
    const page = await fetchPage(server.info.url);
    if (page.status !== expectStatus) throw new Error(`bench: ${name} answered ${page.status}, expected ${expectStatus}`);
    sizes[name] = Buffer.byteLength(page.body);
  }
  if (new Set(Object.values(sizes)).size !== 1) throw new Error(`bench: body sizes differ between variants: ${JSON.stringify(sizes)}`);
  return Object.values(sizes)[0];
}

export function row(id, figure, run, a, b, bLabel, target, isMet) {
  const ratio = pairedRatio(run, a, b);
  return { id, figure, measured: rps(run, a), baseline: `${rps(run, b)} ${bLabel}`, ratio: ratio.ratio, target, met: isMet(ratio.ratio), raw: { ratio } };
}

/** Figure 1: one small HTML route, bare vs behind an active licenseGuard, with a no-op middleware and helmet() as references. */
export async function measureRequestPath({ baseUrl, redisUrl, rounds, seconds, warmupSeconds, connections, log }) {
  const variants = ['bare', 'guard', 'noop', 'helmet', ...(redisUrl ? ['guard-redis'] : [])];
  const servers = await startServers(variants, { baseUrl, redisUrl });
  try {
    const bodyBytes = await assertSameBody(servers, 200);
    log(`  request path: ${rounds} rounds x ${seconds} s per variant, ${connections} connections, ${bodyBytes}-byte page`);
    const run = await compareVariants(servers, { rounds, seconds, warmupSeconds, connections, log });
    const rows = [
      row('request-path', '1. Request path: guarded vs bare', run, 'guard', 'bare', 'bare', '≥ 0.97', (r) => r >= 0.97),
      row('request-path-vs-helmet', '1. Request path: guarded vs helmet()', run, 'guard', 'helmet', 'helmet', '> 1 (cheaper)', (r) => r > 1),
      // What the guard itself adds, beyond the cost Express charges for any one middleware layer.
      row('request-path-vs-noop', '1. Reference: guarded vs a no-op middleware', run, 'guard', 'noop', 'no-op', 'reference', () => null),
      row('request-path-noop', '1. Reference: no-op middleware vs bare', run, 'noop', 'bare', 'bare', 'reference', () => null),
      row('request-path-helmet', '1. Reference: helmet() vs bare', run, 'helmet', 'bare', 'bare', 'reference', () => null),
    ];
    // Cluster mode must cost nothing per request: the request path reads the same in-process cache.
    if (redisUrl)
      rows.push(
        row(
          'request-path-redis',
          '1. Request path: cluster mode (Redis store) vs single-process guard',
          run,
          'guard-redis',
          'guard',
          'guard',
          '≈ 1 (0.97–1.03)',
          (r) => r >= 0.97 && r <= 1.03,
        ),
      );
    rows[0].raw = { ...rows[0].raw, bodyBytes, connections, seconds, ...run };
    return rows;
  } finally {
    await closeAll(Object.values(servers));
  }
}

/** Figure 1c: the request path in cluster mode on each SQL license store vs the single-process guard. */
export async function measureRequestPathStores({ baseUrl, databaseUrl, mysqlUrl, rounds, seconds, warmupSeconds, connections, log }) {
  const stores = [
    ...(databaseUrl ? [['guard-postgres', 'PostgreSQL']] : []),
    ...(mysqlUrl ? [['guard-mysql', 'MySQL/MariaDB']] : []),
    ['guard-sqlite', 'SQLite'],
  ];
  const servers = await startServers(['guard', ...stores.map(([variant]) => variant)], { baseUrl, databaseUrl, mysqlUrl });
  try {
    await assertSameBody(servers, 200);
    log(`  request path on the SQL stores: ${rounds} rounds x ${seconds} s per variant, ${connections} connections`);
    const run = await compareVariants(servers, { rounds, seconds, warmupSeconds, connections, log });
    // The request path reads the same in-process cache whatever the store: it must cost nothing.
    return stores.map(([variant, name]) =>
      row(
        `request-path-${variant}`,
        `1c. Request path: cluster mode (${name} store) vs single-process guard`,
        run,
        variant,
        'guard',
        'guard',
        '≈ 1 (0.97–1.03)',
        (r) => r >= 0.97 && r <= 1.03,
      ),
    );
  } finally {
    await closeAll(Object.values(servers));
  }
}

/** Figure 2: a locked guard serving its lock page vs a bare route sending a pre-built string of the same bytes. */
export async function measureLockPage({ baseUrl, rounds, seconds, warmupSeconds, connections, log }) {
  const servers = await startServers(['locked'], { baseUrl });
  try {
    const page = await fetchPage(servers.locked.info.url);
    if (page.status !== 503 || !page.body.includes('temporarily unavailable'))
      throw new Error(`bench: the locked guard answered ${page.status} without its lock page`);
    servers.static = await startChild({ role: 'server', variant: 'static-lock', baseUrl, lockHtml: page.body });
    const bodyBytes = await assertSameBody(servers, 503);
    log(`  lock page: ${rounds} rounds x ${seconds} s per variant, ${connections} connections, ${bodyBytes}-byte page`);
    const run = await compareVariants(servers, { rounds, seconds, warmupSeconds, connections, expectStatus: 503, log });
    const result = row('lock-page', '2. Lock page: locked guard vs pre-built string', run, 'locked', 'static', 'res.send(string)', '≥ 0.95', (r) => r >= 0.95);
    result.raw = { ...result.raw, bodyBytes, connections, seconds, ...run };
    return [result];
  } finally {
    await closeAll(Object.values(servers));
  }
}

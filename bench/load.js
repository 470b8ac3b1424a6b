// Drives an HTTP server with autocannon (programmatically, on loopback) and compares variants in alternating rounds.
import autocannon from 'autocannon';
import { median, rotations } from './stats.js';

/** Browser-like request: the lock page is chosen by `Accept`, so send what a browser sends. */
const HEADERS = { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' };

/**
 * One autocannon run against `url`, for `duration` seconds or `amount` requests.
 * Resolves with requests per second (completed requests / elapsed seconds) and the raw counts.
 * Socket errors or timeouts fail the benchmark: a figure built on failed requests means nothing.
 */
export async function load(url, { duration, amount, connections = 32, expectStatus = 200, hosts }) {
  const options = { url, connections, pipelining: 1, headers: HEADERS, ...(amount ? { amount } : { duration }) };
  // Each connection cycles through one request per host (the Host header picks the panel).
  if (hosts) options.requests = hosts.map((host) => ({ headers: { ...HEADERS, host } }));
  const result = await autocannon(options);
  const total = result.requests.total;
  if (result.errors > 0 || result.timeouts > 0) throw new Error(`bench: ${url}: ${result.errors} errors, ${result.timeouts} timeouts`);
  const matched = result.statusCodeStats?.[expectStatus]?.count ?? 0;
  if (matched !== total) throw new Error(`bench: ${url}: expected every response to be ${expectStatus}, got ${JSON.stringify(result.statusCodeStats)}`);
  return { rps: total / result.duration, total, seconds: result.duration };
}

/** One timed run against a server child, with the server's own CPU time per request (µs). */
async function measuredRun(server, options) {
  const before = await server.request('cpu');
  const result = await load(server.info.url, options);
  const after = await server.request('cpu');
  return { ...result, cpuMicrosPerRequest: (after.micros - before.micros) / result.total };
}

/**
 * Measures several servers the same way: a warm-up run each, then `rounds` rounds in which every
 * variant runs once for `seconds`, in a rotated order. Resolves with each variant's req/s per round
 * and their medians, plus the server CPU µs per request of each run (a noise-resistant cross-check).
 * @param servers {Record<string, { info: { url: string }, request: Function }>} children from startChild()
 */
export async function compareVariants(servers, { rounds, seconds, warmupSeconds, connections, expectStatus = 200, log = () => {} }) {
  const names = Object.keys(servers);
  for (const name of names) await load(servers[name].info.url, { duration: warmupSeconds, connections, expectStatus });
  const perRound = Object.fromEntries(names.map((name) => [name, []]));
  const cpuPerRound = Object.fromEntries(names.map((name) => [name, []]));
  const orders = rotations(names, rounds);
  for (const [index, order] of orders.entries()) {
    for (const name of order) {
      const run = await measuredRun(servers[name], { duration: seconds, connections, expectStatus });
      perRound[name].push(Math.round(run.rps));
      cpuPerRound[name].push(Math.round(run.cpuMicrosPerRequest * 10) / 10);
    }
    log(
      `    round ${index + 1}/${rounds}: ${names.map((name) => `${name} ${perRound[name].at(-1)} req/s (${cpuPerRound[name].at(-1)} µs CPU/req)`).join(', ')}`,
    );
  }
  const medians = Object.fromEntries(names.map((name) => [name, median(perRound[name])]));
  const cpuMedians = Object.fromEntries(names.map((name) => [name, median(cpuPerRound[name])]));
  return { perRound, medians, cpuPerRound, cpuMedians, orders };
}

/** GETs `url` once like a browser and returns the status, headers and body text. */
export async function fetchPage(url) {
  const response = await fetch(url, { headers: HEADERS });
  return { status: response.status, headers: response.headers, body: await response.text() };
}

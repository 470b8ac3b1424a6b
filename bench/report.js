// Turns the figures into a Markdown table for stdout and the README, and writes bench/results.json.
import { writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { fmt } from './stats.js';

/** What the numbers were measured on: they are only comparable within one run on one machine. */
export function machineInfo() {
  const cores = cpus();
  return {
    cpus: cores.length,
    cpuModel: cores[0]?.model ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 1024 ** 3),
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    date: new Date().toISOString(),
    loadAverageAtStart: loadavg().map((value) => Math.round(value * 100) / 100),
  };
}

const metLabel = (met) => (met === null ? '—' : met ? 'yes' : '**NO**');
// Tiny ratios (the handler's share of a request) keep their significant digits.
const ratioLabel = (ratio) => (ratio === null ? '—' : fmt(ratio, ratio < 0.01 ? 5 : 3));
const cell = (text) => String(text).replaceAll('|', '\\|');

/** The table as Markdown: figure | measured | baseline | ratio | target | met? */
export function renderTable(figures) {
  const lines = ['| Figure | Measured | Baseline | Ratio | Target | Met? |', '| --- | ---: | ---: | ---: | :---: | :---: |'];
  for (const f of figures) {
    lines.push(`| ${[f.figure, f.measured, f.baseline, ratioLabel(f.ratio), f.target, metLabel(f.met)].map(cell).join(' | ')} |`);
  }
  return lines.join('\n');
}

/** How to read the table, printed under it. */
export function renderNotes() {
  return [
    'Measured and Baseline are medians over the rounds; (µs) is the server process CPU time per request.',
    'Ratio is the median of the per-round ratios (each round runs A and B back to back, in rotating order),',
    'rounded to the 3 decimals shown; the target is checked on that number.',
  ].join('\n');
}

/** One line describing the machine, printed under the table. */
export function renderMachine(machine, seconds, pinned) {
  return [
    `${machine.cpus} × ${machine.cpuModel}, Node ${machine.node}, ${machine.platform}`,
    pinned ? 'load generator and server pinned to separate CPUs' : 'no CPU pinning',
    `load average at start ${machine.loadAverageAtStart.join(' / ')}`,
    `run took ${fmt(seconds)} s`,
    machine.date,
  ].join('; ');
}

export function writeResults(file, { machine, settings, figures, seconds }) {
  const body = {
    command: 'npm run bench',
    machine: { ...machine, loadAverageAtEnd: loadavg().map((value) => Math.round(value * 100) / 100) },
    runtimeSeconds: Math.round(seconds),
    settings,
    allTargetsMet: figures.every((f) => f.met !== false),
    figures: figures.map(({ id, figure, measured, baseline, ratio, target, met, raw }) => ({
      id,
      figure,
      measured,
      baseline,
      ratio: ratio === null ? null : ratio < 0.01 ? ratio : Math.round(ratio * 1000) / 1000,
      target,
      met,
      raw,
    })),
  };
  writeFileSync(file, `${JSON.stringify(body, null, 2)}\n`);
}

// Prints the table of the last full `npm run bench` from bench/results.json, as run.js printed it, without running anything.
import { readFileSync } from 'node:fs';
import { renderMachine, renderNotes, renderTable } from './report.js';

/**
 * docs/benchmarks.md's table is this script's output (`node bench/table.js`), so the page can be
 * brought up to date after a run, and checked against the raw figures, without measuring again.
 */
const results = JSON.parse(readFileSync(new URL('./results.json', import.meta.url), 'utf8'));
console.log(`${renderTable(results.figures)}\n\n${renderNotes()}\n\n${renderMachine(results.machine, results.runtimeSeconds, results.settings.pinned)}`);

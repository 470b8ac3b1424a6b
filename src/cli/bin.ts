#!/usr/bin/env node
// Executable entry of `panel-license`: wires the CLI to the real process.
import { describeError } from '../logger.js';
import { escapeControlsKeepLines } from '../text.js';
import { EXIT, type Io, inCliWords } from './io.js';
import { main } from './main.js';

// `panel-license outbox | head -1`: a closed pipe ends the command quietly, as for any Unix tool.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

const io: Io = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
  env: process.env,
  isTTY: Boolean(process.stdout.isTTY),
  columns: process.stdout.columns,
  write: (text) => process.stdout.write(text),
};

main(process.argv.slice(2), io).then(
  (code) => {
    // `emulate` keeps running; every other command sets the exit code and lets the loop drain.
    if (code >= 0) process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`panel-license: ${escapeControlsKeepLines(inCliWords(describeError(error)))}\n`);
    process.exitCode = EXIT.unreachable;
  },
);

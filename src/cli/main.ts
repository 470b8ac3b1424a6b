// The `panel-license` command: check a license, run the emulator, push and inspect releases.

import { UsageError } from '../errors.js';
import { escapeControlsKeepLines } from '../text.js';
import { runCheck } from './check.js';
import { runEmulate } from './emulate.js';
import { EXIT, type Io } from './io.js';
import { runOutbox } from './outbox.js';
import { runPush } from './push.js';

const USAGE = `Usage: panel-license <command> [options]

Commands:
  check                 Check the license once (exit 0 active, 1 inactive, 2 usage, 3 unreachable/rejected)
  emulate               Run the mother emulator on loopback and print its URL and demo credentials
  push FILE             Queue releases (JSON object or array) in the durable outbox and deliver them
  outbox                List outbox releases; "outbox retry ID|--all-dead" queues dead ones again

Run "panel-license <command> --help" for the options of a command; "panel-license --version" for the version.`;

/** The package version, read from package.json (two levels up from src/cli and from dist/cli). */
function version(): string {
  // CommonJS at run time (the package's build); Vitest provides `require` to the source.
  const manifest = require('../../package.json') as { version?: string };
  return manifest.version ?? 'unknown';
}

/**
 * Every line the CLI prints may carry artist or mother text: whatever a command forgot to
 * escape, no control sequence reaches the terminal (newlines and tabs of our own layout stay).
 */
function terminalSafe(io: Io): Io {
  return { ...io, out: (line) => io.out(escapeControlsKeepLines(line)), err: (line) => io.err(escapeControlsKeepLines(line)) };
}

export async function main(argv: string[], rawIo: Io): Promise<number> {
  const io = terminalSafe(rawIo);
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case 'check':
        return await runCheck(rest, io);
      case 'emulate':
        return await runEmulate(rest, io);
      case 'push':
        return await runPush(rest, io);
      case 'outbox':
        return await runOutbox(rest, io);
      case '--version':
      case '-v':
      case 'version':
        io.out(`panel-license ${version()}`);
        return EXIT.ok;
      case undefined:
      case '-h':
      case '--help':
      case 'help':
        io.out(USAGE);
        return command === undefined ? EXIT.usage : EXIT.ok;
      default:
        throw new UsageError(`Unknown command "${command}".`);
    }
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`panel-license: ${error.message}\n\n${error.usage ?? USAGE}`);
      return EXIT.usage;
    }
    throw error;
  }
}

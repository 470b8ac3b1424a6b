// `panel-license push FILE`: queues releases in the durable outbox and delivers them.
import { InvalidReleaseError } from '../errors.js';
import { createReleaseOutbox } from '../outbox/outbox.js';
import type { Release } from '../release.js';
import { escapeControls } from '../text.js';
import { CONNECTION_FLAGS, CONNECTION_USAGE, clientFromFlags, EXIT, type Io, parseFlags, readJsonFile, UsageError } from './io.js';

const USAGE = `Usage: panel-license push FILE [options]

FILE holds one release object or an array of them (JSON, contract §2.3).
Releases are stored in the outbox first, so nothing is lost if the mother is down:
run the command again (or any process on the same outbox file) to finish delivery.

  --outbox FILE       outbox database (default ./data/outbox.db)
  --wait-s N          how long to wait for delivery before leaving the rest queued (default 60)
${CONNECTION_USAGE}

Exit codes: 0 all delivered, 1 some invalid or refused by the mother, 2 usage error,
3 some still queued when --wait-s ran out.`;

export const DEFAULT_OUTBOX_FILE = './data/outbox.db';

async function readReleases(file: string): Promise<unknown[]> {
  const parsed = await readJsonFile(file, 'releases', USAGE);
  return Array.isArray(parsed) ? parsed : [parsed];
}

/** Artist-supplied ids are printed escaped: one line each, no terminal control sequences. */
const track = (remoteTrackId: string | undefined) => (remoteTrackId ? ` (${escapeControls(remoteTrackId)})` : '');

function progressBar(done: number, total: number): string {
  const width = 30;
  const filled = total === 0 ? width : Math.round((done / total) * width);
  return `\r[${'#'.repeat(filled)}${' '.repeat(width - filled)}] ${done}/${total}`;
}

export async function runPush(args: string[], io: Io): Promise<number> {
  const { values, positionals } = parseFlags(args, { ...CONNECTION_FLAGS, outbox: { type: 'string' }, 'wait-s': { type: 'string' } }, USAGE);
  if (values.help) {
    io.out(USAGE);
    return EXIT.ok;
  }
  const [file] = positionals;
  if (!file || positionals.length > 1) throw new UsageError('push needs exactly one FILE.', USAGE);
  const waitSeconds = Number(values['wait-s'] ?? 60);
  if (!Number.isFinite(waitSeconds) || waitSeconds < 0 || waitSeconds > 86_400)
    throw new UsageError('--wait-s must be a number of seconds from 0 to 86400.', USAGE);
  const releases = await readReleases(file);
  const client = clientFromFlags(values, io.env, USAGE);

  const outbox = createReleaseOutbox({
    client,
    file: (values.outbox as string | undefined) ?? DEFAULT_OUTBOX_FILE,
    logger: { warn: () => {}, error: () => {} },
  });
  const ours = new Set<number>();
  let finished = 0;
  let failed = 0;
  const report = (line: string) => {
    if (io.isTTY) io.write(`\r${' '.repeat(60)}\r`);
    io.out(line);
    if (io.isTTY) io.write(progressBar(finished, ours.size));
  };
  outbox.on('delivered', (event) => {
    if (!ours.has(event.id) || event.superseded) return;
    finished++;
    report(`delivered  #${event.id}${track(event.remoteTrackId)} → release_id ${event.releaseId ?? 'unknown'}`);
  });
  outbox.on('dead', (event) => {
    if (!ours.has(event.id)) return;
    finished++;
    failed++;
    report(`refused    #${event.id}${track(event.remoteTrackId)}: ${escapeControls(event.message)}`);
  });
  outbox.on('error', (event) => io.err(`warning    ${escapeControls(event.error.message)}`));

  try {
    for (const [index, release] of releases.entries()) {
      try {
        const result = await outbox.enqueue(release as Release);
        if (result.state === 'delivered') {
          io.out(`unchanged  #${result.id} already delivered → release_id ${result.releaseId}`);
          continue;
        }
        ours.add(result.id);
      } catch (error) {
        if (!(error instanceof InvalidReleaseError)) throw error;
        failed++;
        io.out(`invalid    [${index}] ${escapeControls(error.field)}: ${escapeControls(error.message)}`);
      }
    }
    const stats = await outbox.drain({ signal: AbortSignal.timeout(Math.max(1, waitSeconds * 1000)) }).catch(() => undefined);
    if (io.isTTY) io.write('\n');
    if (!stats) {
      io.err(`${ours.size - finished} release(s) still queued in the outbox; run the command again to finish delivery.`);
      return EXIT.unreachable;
    }
    return failed > 0 ? EXIT.inactive : EXIT.ok;
  } finally {
    await outbox.close();
  }
}

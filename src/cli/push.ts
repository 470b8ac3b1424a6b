// `panel-license push FILE`: queues releases in the durable outbox and delivers them.
import { InvalidReleaseError, UsageError } from '../errors.js';
import { createReleaseOutbox } from '../outbox/outbox.js';
import type { Release } from '../release.js';
import { escapeControls, jsonLine } from '../text.js';
import { CONNECTION_FLAGS, CONNECTION_USAGE, clientFromFlags, EXIT, type Io, parseFlags, readJsonFile } from './io.js';
import { openOutboxStore, outboxFromEnv } from './outbox-location.js';
import { createPushProgress } from './push-progress.js';

const USAGE = `Usage: panel-license push FILE [options]

FILE holds one release object or an array of them (JSON; see docs/partner-api.md for the fields).
Releases are stored in the outbox first, so nothing is lost if the mother is down:
run the command again (or any process on the same outbox file) to finish delivery.
Only the releases of FILE are waited for; older ones in the outbox are delivered meanwhile.

  --outbox FILE|URL   SQLite file (default: $PANEL_LICENSE_OUTBOX, else ./data/outbox.db), or a
                      PostgreSQL URL such as postgres://user@host/db?schema=public&table=release_outbox
                      (needs: npm install pg). Keep the password out of it: set PGPASSWORD, or put
                      the whole URL in PANEL_LICENSE_OUTBOX.
  --wait-s N          how long to wait for delivery before leaving the rest queued (default 60)
${CONNECTION_USAGE}
                      (with --json: one JSON object per line, see docs/cli.md)

Exit codes: 0 all delivered, 1 some invalid or refused by the mother, 2 usage error,
3 some still queued when --wait-s ran out.`;

async function readReleases(file: string): Promise<unknown[]> {
  const parsed = await readJsonFile(file, 'releases', USAGE);
  return Array.isArray(parsed) ? parsed : [parsed];
}

/** The `remote_track_id` and title of a release as given (strings only), for --json output. */
function named(release: unknown): { remoteTrackId: string | null; title: string | null } {
  const { remote_track_id: id, title } = (typeof release === 'object' && release !== null ? release : {}) as Record<string, unknown>;
  // Capped: a runaway title (refused as too long) must not be echoed whole into the output.
  const cap = (value: unknown) => (typeof value === 'string' ? [...value].slice(0, 200).join('') : null);
  return { remoteTrackId: cap(id), title: cap(title) };
}

/** `(trk-9 "My Song")`: how an artist's release is named in output, escaped for the terminal. */
function label(release: unknown): string {
  const { remote_track_id: id, title } = (typeof release === 'object' && release !== null ? release : {}) as Record<string, unknown>;
  const parts = [typeof id === 'string' ? id : '', typeof title === 'string' ? JSON.stringify([...title].slice(0, 60).join('')) : ''].filter(Boolean);
  return parts.length === 0 ? '' : ` (${escapeControls(parts.join(' '))})`;
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
  const json = values.json === true;
  const opened = await openOutboxStore((values.outbox as string | undefined) ?? outboxFromEnv(io.env), 'create', USAGE);
  const outbox = createReleaseOutbox({
    client,
    store: opened.store,
    // Long --timeout-ms values still get a lease that covers them.
    leaseMs: Math.max(60_000, client.timeoutMs + 5000),
    logger: { warn: () => {}, error: () => {} },
  });
  // Row id → indexes in FILE: two releases of one track share a row (the later content wins).
  const ours = new Map<number, number[]>();
  const progress = createPushProgress(io, json);
  const emit = (event: Record<string, unknown>, line: string) => progress.line(json ? jsonLine(event) : line);
  let invalid = 0;
  let refused = 0;
  let delivered = 0;
  let unchanged = 0;

  function onDelivered(event: { id: number; remoteTrackId: string | undefined; releaseId: number | undefined; attempts: number }): void {
    const indexes = ours.get(event.id);
    if (!indexes) return;
    ours.delete(event.id);
    delivered += indexes.length;
    const name = label(releases[indexes[0] ?? 0]);
    emit(
      {
        event: 'delivered',
        index: indexes,
        id: event.id,
        remoteTrackId: event.remoteTrackId ?? null,
        releaseId: event.releaseId ?? null,
        attempts: event.attempts,
      },
      `delivered  [${indexes.join(',')}] #${event.id}${name} → release_id ${event.releaseId ?? 'unknown (unreadable answer)'}`,
    );
    progress.settled(indexes.length);
  }
  function onRefused(event: { id: number; remoteTrackId: string | undefined; message: string }): void {
    const indexes = ours.get(event.id);
    if (!indexes) return;
    ours.delete(event.id);
    refused += indexes.length;
    emit(
      { event: 'refused', index: indexes, id: event.id, remoteTrackId: event.remoteTrackId ?? null, message: event.message },
      `refused    [${indexes.join(',')}] #${event.id}${label(releases[indexes[0] ?? 0])}: ${escapeControls(event.message)}`,
    );
    progress.settled(indexes.length);
  }
  outbox.on('delivered', (event) => {
    if (!event.superseded) onDelivered(event);
  });
  outbox.on('dead', onRefused);
  let lastError: string | null = null;
  outbox.on('retrying', (event) => {
    if (!ours.has(event.id)) return;
    lastError = escapeControls(event.error.message);
    progress.failing(lastError);
  });
  outbox.on('error', (event) => io.err(`warning    ${escapeControls(event.error.message)}`));

  try {
    for (const [index, release] of releases.entries()) {
      try {
        const result = await outbox.enqueue(release as Release);
        if (result.state === 'delivered') {
          unchanged++;
          emit(
            { event: 'unchanged', index: [index], id: result.id, releaseId: result.releaseId ?? null },
            `unchanged  [${index}] #${result.id}${label(release)} already delivered → release_id ${result.releaseId ?? 'unknown'}`,
          );
          continue;
        }
        ours.set(result.id, [...(ours.get(result.id) ?? []), index]);
      } catch (error) {
        if (!(error instanceof InvalidReleaseError)) throw error;
        invalid++;
        emit(
          { event: 'invalid', index: [index], ...named(release), field: error.field, message: error.message },
          `invalid    [${index}]${label(release)} ${escapeControls(error.field)}: ${escapeControls(error.message)}`,
        );
      }
    }
    progress.begin(releases.length - invalid - unchanged);
    // A release can be delivered before its enqueue() resolved here, so its event came before
    // we knew the id: ask the outbox once for rows already final.
    for (const id of [...ours.keys()]) {
      const row = await outbox.get(id);
      if (row?.state === 'delivered') onDelivered({ id, remoteTrackId: row.remoteTrackId, releaseId: row.releaseId, attempts: row.attempts });
      if (row?.state === 'dead') onRefused({ id, remoteTrackId: row.remoteTrackId, message: row.lastError ?? 'refused' });
    }
    const deadline = Date.now() + waitSeconds * 1000;
    while (ours.size > 0 && Date.now() < deadline) await progress.tick(Math.min(250, deadline - Date.now()));
    progress.end();
    const queued = [...ours.values()].reduce((sum, indexes) => sum + indexes.length, 0);
    const summary = { event: 'summary', total: releases.length, delivered, unchanged, invalid, refused, queued, lastError: queued > 0 ? lastError : null };
    if (json) io.out(jsonLine(summary));
    else if (queued > 0) {
      const why = lastError ? ` Last error: ${lastError}` : '';
      io.err(`${queued} release(s) of ${file} still queued in the outbox; run the command again (or any panel process on it) to finish.${why}`);
    }
    if (queued > 0) return EXIT.unreachable;
    return invalid + refused > 0 ? EXIT.inactive : EXIT.ok;
  } finally {
    await outbox.close();
    await opened.close();
  }
}

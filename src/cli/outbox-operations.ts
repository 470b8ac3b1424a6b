// `panel-license outbox cancel|pause|resume|deliveries`: what an operator does to the releases
// of a running deployment, through the store every process shares (nothing is sent from here).

import { UsageError } from '../errors.js';
import type { ReleaseOutbox } from '../outbox/outbox.js';
import { escapeControls, jsonLine } from '../text.js';
import { EXIT, type Io } from './io.js';

export const OPERATIONS = ['cancel', 'pause', 'resume', 'deliveries'] as const;
export type Operation = (typeof OPERATIONS)[number];

export const OPERATIONS_USAGE = `       panel-license outbox cancel ID | --track TRACK --panel ID [--reason TEXT] [--outbox FILE|URL]
       panel-license outbox pause|resume [--panel ID] [--outbox FILE|URL]
       panel-license outbox deliveries [--after POSITION] [--limit N] [--panel ID] [--json] [--outbox FILE|URL]`;

export const OPERATIONS_HELP = `"cancel" stops a pending release for good (it waits for an attempt in flight to end first).
"pause" stops delivery of every panel (or of --panel) in every process within a second, and
across restarts, until "resume"; releases keep being stored.
"deliveries" lists deliveries in the order they were recorded, after a feed position.`;

export interface OperationArgs {
  positionals: string[];
  panel: string | undefined;
  track: string | undefined;
  reason: string | undefined;
  after: string | undefined;
  limit: number;
  json: boolean;
}

const SAID: Record<string, string> = {
  cancelled: 'cancelled: it will never be sent',
  delivered: 'was already delivered: the mother has it',
  dead: 'is dead (refused by the mother): nothing to cancel',
  'already-cancelled': 'was already cancelled',
  'in-flight': 'is being sent right now',
  'not-found': 'was not found',
};

export async function runOperation(
  operation: Operation,
  outbox: ReleaseOutbox & { shown: string },
  args: OperationArgs,
  io: Io,
  usage: string,
): Promise<number> {
  const scope = args.panel === undefined ? {} : { panel: args.panel };
  if (operation === 'pause' || operation === 'resume') {
    if (args.positionals.length > 1) throw new UsageError(`Unexpected argument "${args.positionals.at(-1)}".`, usage);
    await outbox[operation](scope);
    const what = args.panel === undefined ? 'Delivery of every panel' : `Delivery of panel ${escapeControls(args.panel)}`;
    io.out(`${what} ${operation === 'pause' ? 'paused (every process stops claiming within a second)' : 'resumed'} in ${outbox.shown}.`);
    return EXIT.ok;
  }
  if (operation === 'deliveries') {
    const after = Number(args.after ?? 0);
    if ((args.after !== undefined && !/^\d{1,15}$/.test(args.after)) || !Number.isSafeInteger(after))
      throw new UsageError('--after must be a feed position (a non-negative integer).', usage);
    const page = await outbox.deliveries({ after, limit: args.limit, ...scope });
    if (args.json) io.out(jsonLine(page));
    else {
      for (const d of page.deliveries)
        io.out(
          [`@${d.position}`, `#${d.id}`, d.panel, d.remoteTrackId ?? '-', `release_id ${d.releaseId ?? 'unknown'}`, new Date(d.deliveredAt).toISOString()]
            .map(escapeControls)
            .join('\t'),
        );
      io.out(`cursor ${page.cursor}`);
    }
    return EXIT.ok;
  }
  const [, id] = args.positionals;
  if ((id === undefined) === (args.track === undefined)) throw new UsageError('cancel needs either an ID or --track TRACK --panel ID.', usage);
  if (id !== undefined && !/^\d+$/.test(id)) throw new UsageError(`"${id}" is not a release id.`, usage);
  if (args.track !== undefined && args.panel === undefined) throw new UsageError("cancel --track needs --panel: a track id is one panel's.", usage);
  const options = { ...scope, ...(args.reason === undefined ? {} : { reason: args.reason }) };
  const result = id === undefined ? await outbox.cancelTrack(args.track as string, options) : await outbox.cancel(Number(id), options);
  const which = result.id === undefined ? `The release of track ${escapeControls(args.track ?? '')}` : `Release #${result.id}`;
  const releaseId = result.releaseId === undefined ? '' : ` (release_id ${result.releaseId})`;
  const line = `${which} ${SAID[result.outcome]}${releaseId}.`;
  if (result.outcome === 'cancelled') io.out(line);
  else io.err(line);
  return result.outcome === 'cancelled' ? EXIT.ok : EXIT.inactive;
}

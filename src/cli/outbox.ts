// `panel-license outbox`: list queued, delivered and dead releases; send dead ones again.

import { UsageError } from '../errors.js';
import { createReleaseOutbox } from '../outbox/outbox.js';
import type { OutboxState } from '../outbox/store.js';
import { shownPanel, validatePanelId } from '../panel-id.js';
import { escapeControls, jsonLine } from '../text.js';
import { EXIT, type Io, parseFlags } from './io.js';
import { openOutboxStore, outboxFromEnv } from './outbox-location.js';
import { OPERATIONS, OPERATIONS_HELP, OPERATIONS_USAGE, runOperation } from './outbox-operations.js';

const USAGE = `Usage: panel-license outbox [--state pending|delivered|dead] [--panel ID] [--limit N] [--json] [--outbox FILE|URL]
       panel-license outbox panels [--limit N] [--json] [--outbox FILE|URL]
       panel-license outbox retry ID|--all-dead [--panel ID] [--outbox FILE|URL]
${OPERATIONS_USAGE}

  --outbox FILE|URL   SQLite file (default: $PANEL_LICENSE_OUTBOX, else ./data/outbox.db), or a
                      PostgreSQL URL such as postgres://user@host/db?schema=public&table=release_outbox
                      (needs: npm install pg). Keep the password out of it: set PGPASSWORD, or put
                      the whole URL in PANEL_LICENSE_OUTBOX.
  --panel ID          only this panel's releases (your id with \`panels\`, or a client's panelId)

"panels" lists the panels with pending or dead releases, most pending first.
"retry" moves dead releases back to the queue; the next push or panel process delivers them.
A dead release whose track was queued again since stays dead: its content is out of date.
${OPERATIONS_HELP}`;

const STATES = ['pending', 'delivered', 'dead', 'cancelled'];

/**
 * Listing and re-queuing never send anything: the outbox is opened without its worker. Listing
 * opens a file read-only, so it works on a read-only file or a full disk.
 */
async function openOutbox(location: string, mode: 'write' | 'read') {
  const opened = await openOutboxStore(location, mode, USAGE);
  // Every panel's rows are seen (`panels`), and no panel has credentials here: nothing can be sent.
  const outbox = createReleaseOutbox({ panels: { resolve: () => null }, store: opened.store, autoStart: false, logger: { warn: () => {}, error: () => {} } });
  return Object.assign(outbox, {
    shown: opened.shown,
    async closeAll() {
      await outbox.close();
      await opened.close();
    },
  });
}

export async function runOutbox(args: string[], io: Io): Promise<number> {
  const flags = {
    state: { type: 'string' },
    limit: { type: 'string' },
    json: { type: 'boolean', default: false },
    outbox: { type: 'string' },
    'all-dead': { type: 'boolean', default: false },
    panel: { type: 'string' },
    track: { type: 'string' },
    reason: { type: 'string' },
    after: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  } as const;
  const { values, positionals } = parseFlags(args, flags, USAGE);
  if (values.help) {
    io.out(USAGE);
    return EXIT.ok;
  }
  const file = (values.outbox as string | undefined) ?? outboxFromEnv(io.env);
  const [action, id] = positionals;
  const operation = OPERATIONS.find((name) => name === action);
  if (action !== undefined && action !== 'retry' && action !== 'panels' && !operation) throw new UsageError(`Unknown outbox action "${action}".`, USAGE);
  const panel = panelFlag(values.panel as string | undefined);
  const limit = Number(values.limit ?? 100);
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new UsageError('--limit must be an integer from 1 to 1000.', USAGE);
  if (action === 'panels') return listPanels(file, limit, values.json === true, io);
  if (operation) {
    const outbox = await openOutbox(file, 'write');
    const { track, reason, after } = values as { track?: string; reason?: string; after?: string };
    try {
      return await runOperation(operation, outbox, { positionals, panel, track, reason, after, limit, json: values.json === true }, io, USAGE);
    } finally {
      await outbox.closeAll();
    }
  }
  if (positionals.length > (action === 'retry' ? 2 : 1)) throw new UsageError(`Unexpected argument "${positionals.at(-1)}".`, USAGE);

  if (action === 'retry') {
    if ((id === undefined) === !values['all-dead']) throw new UsageError('retry needs either an ID or --all-dead.', USAGE);
    if (id !== undefined && !/^\d+$/.test(id)) throw new UsageError(`"${id}" is not a release id.`, USAGE);
    const outbox = await openOutbox(file, 'write');
    try {
      if (id === undefined) {
        const count = await outbox.retryAllDead(panel === undefined ? {} : { panel });
        io.out(count === 0 ? 'No dead releases: nothing to queue again.' : `${count} dead release(s) queued again.`);
        return EXIT.ok;
      }
      if (await outbox.retry(Number(id))) {
        io.out(`Release #${id} queued again; the next push or panel process delivers it.`);
        return EXIT.ok;
      }
      // Say why nothing happened: only dead releases can be queued again.
      const row = await outbox.get(Number(id));
      if (row === undefined) io.err(`No release #${id} in ${outbox.shown}.`);
      else if (row.state === 'dead') io.err(`Release #${id} stays dead: its track was queued again since, so its content is out of date.`);
      else if (row.state === 'pending') io.err(`Release #${id} is still pending (${row.attempts} attempt(s) so far): it is already queued.`);
      else io.err(`Release #${id} was already delivered${row.releaseId === undefined ? '' : ` (release_id ${row.releaseId})`}: nothing to retry.`);
      return EXIT.inactive;
    } finally {
      await outbox.closeAll();
    }
  }

  const state = values.state as string | undefined;
  if (state !== undefined && !STATES.includes(state)) throw new UsageError(`--state must be one of ${STATES.join(', ')}.`, USAGE);
  const outbox = await openOutbox(file, 'read');
  try {
    const scope = panel === undefined ? {} : { panel };
    const rows = await outbox.list({ ...(state ? { state: state as OutboxState } : {}), limit, ...scope });
    if (values.json) {
      io.out(jsonLine(rows));
      return EXIT.ok;
    }
    const stats = await outbox.stats(scope);
    io.out(`pending ${stats.pending} · delivered ${stats.delivered} · dead ${stats.dead} · cancelled ${stats.cancelled}${stats.paused ? ' · paused' : ''}`);
    for (const row of rows) {
      const outcome = row.state === 'delivered' ? `release_id ${row.releaseId ?? 'unknown'}` : (row.lastError ?? '');
      const cells = [
        `#${row.id}`,
        row.panel || '(no panel)',
        row.state,
        `${row.attempts} attempt(s)`,
        row.remoteTrackId ?? '-',
        String(row.release.title),
        outcome,
      ];
      // Titles and ids come from artists: escaped so no cell can move the cursor or fake a row.
      io.out(cells.map(escapeControls).join('\t'));
    }
    return EXIT.ok;
  } finally {
    await outbox.closeAll();
  }
}

async function listPanels(file: string, limit: number, json: boolean, io: Io): Promise<number> {
  const outbox = await openOutbox(file, 'read');
  try {
    const panels = await outbox.panelStats(limit);
    if (json) {
      io.out(jsonLine(panels));
      return EXIT.ok;
    }
    if (panels.length === 0) io.out('No panel has pending or dead releases.');
    for (const { panel, pending, dead, oldestPendingAt } of panels) {
      const oldest = oldestPendingAt === undefined ? '' : `oldest pending since ${new Date(oldestPendingAt).toISOString()}`;
      io.out([panel || '(no panel)', `pending ${pending}`, `dead ${dead}`, oldest].map(escapeControls).join('\t'));
    }
    return EXIT.ok;
  } finally {
    await outbox.closeAll();
  }
}

/** `--panel` checked as every other way in checks a panel id (the outbox would refuse it later, after opening the store). */
function panelFlag(panel: string | undefined): string | undefined {
  if (panel === undefined) return undefined;
  if (panel === '') throw new UsageError('--panel needs a panel id.', USAGE);
  try {
    return validatePanelId(panel, '--panel');
  } catch {
    throw new UsageError(`--panel ${shownPanel(panel)} is not a panel id: at most 200 characters of well-formed Unicode, no control characters.`, USAGE);
  }
}

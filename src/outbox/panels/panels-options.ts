// Options of the outbox's panels: one `client`, or many panels through `panels.resolve` — validated, resolved.

import { createMotherClient, type MotherClientOptions } from '../../client/mother-client.js';
import { type OptionProblems, optionalFunction, optionError, optionNames, positiveInteger, timerMs } from '../../options.js';
import { validatePanelId } from '../../panel-id.js';
import type { OutboxPanelsOptions } from '../options.js';
import type { ReleaseSender } from '../release-sender.js';
import { UNASSIGNED_PANEL } from '../store.js';
import type { PanelSendersOptions } from './panel-senders.js';

const PANELS_KEYS = optionNames<OutboxPanelsOptions>({ resolve: true, resolveTtlMs: true, resolveTimeoutMs: true, unresolvedRetryMs: true, max: true });
/** Options that configure the panels' clients: only meaningful with `panels` (a `client` has its own). */
const CLIENT_OPTIONS = ['baseUrl', 'timeoutMs', 'allowInsecureHttp', 'fetch'] as const;
/** Your id of a panel, as `enqueue(release, { panel })` takes it. */
export const validateEnqueuePanel = (panel: unknown) => validatePanelId(panel, 'enqueue()');

export type PanelsSource =
  | { kind: 'one'; client: ReleaseSender; panel: string }
  | { kind: 'many'; senders: PanelSendersOptions; validatePanel: (panel: unknown) => string };

/** The outbox's options as read here (its `client`, or `panels` and the options of their clients). */
type OutboxOptionsSeen = { client?: unknown; panels?: unknown } & Partial<Pick<MotherClientOptions, 'baseUrl' | 'timeoutMs' | 'allowInsecureHttp' | 'fetch'>>;

export function resolvePanelsSource(options: OutboxOptionsSeen, problems: OptionProblems): PanelsSource {
  const { client, panels } = options as { client?: unknown; panels?: unknown };
  if (panels === undefined) {
    for (const name of CLIENT_OPTIONS)
      if (options[name] !== undefined) problems.add(optionError(name, 'is for `panels`', 'Give it to createMotherClient() instead, and pass that `client`.'));
    const sender = client as Partial<ReleaseSender> | null | undefined;
    if (typeof sender?.pushSerializedRelease !== 'function') {
      problems.add(
        optionError(
          'client',
          'must be a mother client (an object with `pushSerializedRelease()`)',
          'Pass createMotherClient({ baseUrl, apiKey, apiSecret }), or `panels` for many panels.',
        ),
      );
      return { kind: 'one', client: { pushSerializedRelease: () => Promise.reject(new Error('no client')) }, panel: 'invalid' };
    }
    if (typeof sender.panelId !== 'string' || sender.panelId === UNASSIGNED_PANEL) {
      problems.add(
        optionError('client', 'has no `panelId`', 'Use createMotherClient(), or give your own client a `panelId`: the panel its rows are stored for.'),
      );
    }
    return { kind: 'one', client: sender as ReleaseSender, panel: sender.panelId ?? 'invalid' };
  }
  if (client !== undefined)
    problems.add(optionError('client', 'was given together with `panels`', 'Each panel gets its credentials from `panels.resolve(panel)`.'));
  if (typeof panels !== 'object' || panels === null) {
    problems.add(optionError('panels', 'must be an object', 'Pass { resolve: async (panel) => ({ apiKey, apiSecret, baseUrl }) }.'));
    return { kind: 'many', senders: placeholder(), validatePanel: validateEnqueuePanel };
  }
  const given = panels as Record<string, unknown>;
  for (const name of Object.keys(given))
    if (!PANELS_KEYS.includes(name)) problems.add(optionError(`panels.${name}`, 'is not a panels option', `Use ${PANELS_KEYS.join(', ')}.`));
  const resolve = problems.check(() => optionalFunction<PanelsSource & { kind: 'many' }>('panels.resolve', given.resolve), undefined);
  if (resolve === undefined) problems.add(optionError('panels.resolve', 'is required', 'Pass async (panel) => ({ apiKey, apiSecret, baseUrl? }) or null.'));
  const clientOptions = {
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    ...(options.allowInsecureHttp === undefined ? {} : { allowInsecureHttp: options.allowInsecureHttp }),
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
  };
  // A client with placeholder credentials checks `baseUrl` and the client options once, here.
  if (options.baseUrl !== undefined)
    problems.check(
      () => createMotherClient({ ...clientOptions, baseUrl: options.baseUrl as string, apiKey: 'placeholder', apiSecret: 'placeholder' }),
      undefined,
    );
  else
    problems.check(
      () => createMotherClient({ ...clientOptions, baseUrl: 'https://mother.invalid/', apiKey: 'placeholder', apiSecret: 'placeholder' }),
      undefined,
    );
  return {
    kind: 'many',
    validatePanel: validateEnqueuePanel,
    senders: {
      resolve: (resolve as never) ?? (() => null),
      baseUrl: options.baseUrl,
      clientOptions,
      resolveTtlMs: problems.check(() => timerMs('panels.resolveTtlMs', given.resolveTtlMs, 300_000), 1),
      resolveTimeoutMs: problems.check(() => timerMs('panels.resolveTimeoutMs', given.resolveTimeoutMs, 5000), 1),
      max: problems.check(() => positiveInteger('panels.max', given.max, 10_000, 1, 1_000_000), 1),
      now: Date.now,
    },
  };
}

function placeholder() {
  return { resolve: () => null, baseUrl: undefined, clientOptions: {}, resolveTtlMs: 1, resolveTimeoutMs: 1, max: 1, now: Date.now };
}

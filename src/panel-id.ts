// Your own id of a panel (a tenant id): what rows, events and `res.locals.panel` carry. Checked once, shown safely.
import { shown } from './options.js';
import { cleanText } from './text.js';

const MAX_PANEL_ID_LENGTH = 200;
// Control characters and the line/paragraph separators: an id lands in logs, metrics and the CLI.
const CONTROL = /[\p{Cc}\u2028\u2029]/u;

/** A panel id as shown in messages: capped, no control characters (it is the caller's text). */
export const shownPanel = (panel: string) => JSON.stringify(cleanText(panel, 80) ?? '');

/** Returns `panel` when it is a usable id; otherwise throws a TypeError that starts with `where`. */
export function validatePanelId(panel: unknown, where: string): string {
  if (typeof panel !== 'string' || panel === '' || panel.length > MAX_PANEL_ID_LENGTH || CONTROL.test(panel))
    throw new TypeError(
      `panel-license-guard: ${where} needs \`panel\`: your id of the panel (a non-empty string of at most ${MAX_PANEL_ID_LENGTH} characters, no control characters), received ${typeof panel === 'string' ? shownPanel(panel) : shown(panel)}.`,
    );
  return panel;
}

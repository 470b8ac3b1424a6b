// Your own id of a panel (a tenant id): what rows, events and `res.locals.panel` carry. Checked once, shown safely.
import { shown } from './options.js';
import { cleanText, isWellFormedText, showLoneSurrogates } from './text.js';

const MAX_PANEL_ID_LENGTH = 200;
// Control characters and the line/paragraph separators: an id lands in logs, metrics and the CLI.
const CONTROL = /[\p{Cc}\u2028\u2029]/u;

/** A panel id as shown in messages: capped, no control characters (it is the caller's text). */
export const shownPanel = (panel: string) => JSON.stringify(cleanText(showLoneSurrogates(panel), 80) ?? '');

/**
 * Returns `panel` when it is a usable id; otherwise throws a TypeError that starts with `where`.
 * A usable id is one every store keeps byte for byte: an id a driver would change on the way in
 * (a lone surrogate becomes U+FFFD) could become another panel's id there — its rows, its
 * de-duplication, its credentials. Ids are compared exactly everywhere else (no case folding, no
 * Unicode normalisation), so two ids that differ in any code point are two panels.
 */
export function validatePanelId(panel: unknown, where: string): string {
  if (typeof panel !== 'string' || panel === '' || panel.length > MAX_PANEL_ID_LENGTH || CONTROL.test(panel) || !isWellFormedText(panel))
    throw new TypeError(
      `panel-license-guard: ${where} needs \`panel\`: your id of the panel (a non-empty string of at most ${MAX_PANEL_ID_LENGTH} characters of well-formed Unicode, no control characters and no lone surrogate such as \`name.slice(0, n)\` leaves when it cuts an emoji), received ${typeof panel === 'string' ? shownPanel(panel) : shown(panel)}.`,
    );
  return panel;
}

// Which panel an outbox call is about: a single-panel outbox only ever touches its own panel's rows.
import { shown } from '../../options.js';
import { shownPanel, validatePanelId } from '../../panel-id.js';
import type { EnqueueOptions, PanelScope } from '../store.js';
import type { PanelsSource } from './panels-options.js';

export interface PanelScoping {
  /** The panel an enqueue is stored for, and the options the store gets (without `panel`). */
  enqueueTarget(method: string, options: (EnqueueOptions & { panel?: unknown }) | undefined): { panel: string; storeOptions: EnqueueOptions | undefined };
  /** The rows a read or a retry covers: the single panel's, or with `panels` one panel's or all. */
  scope(method: string, panel: unknown): PanelScope;
  /** The panel rows without one are adopted into. */
  adoptionTarget(panel: unknown): string;
}

export function panelScoping(source: PanelsSource): PanelScoping {
  const own = source.kind === 'one' ? source.panel : undefined;
  /** A single-panel outbox accepts no `panel` but its own (its panelId): anything else is a mistake worth saying. */
  const onlyOwn = (method: string, panel: unknown): string => {
    if (panel !== undefined && panel !== own)
      throw new TypeError(
        `panel-license-guard: ${method}() got \`panel\` ${typeof panel === 'string' ? shownPanel(panel) : shown(panel)}, but this outbox sends for one panel (its client's). Use \`panels\` in createReleaseOutbox() for many panels.`,
      );
    return own as string;
  };
  return {
    enqueueTarget(method, options) {
      const { panel, ...storeOptions } = options ?? {};
      const target = own === undefined ? validatePanelId(panel, `${method}()`) : onlyOwn(method, panel);
      return { panel: target, storeOptions: options === undefined ? undefined : storeOptions };
    },
    scope(method, panel) {
      if (own !== undefined) return { panel: onlyOwn(method, panel) };
      return panel === undefined ? {} : { panel: validatePanelId(panel, `${method}()`) };
    },
    adoptionTarget(panel) {
      return own === undefined ? validatePanelId(panel, 'adoptUnassigned()') : onlyOwn('adoptUnassigned', panel);
    },
  };
}

// Which rows a worker claims and whose credentials send them: one panel (a client), or many (a resolver).
import { PanelDeliveryError } from '../../errors.js';
import { shownPanel } from '../../panel-id.js';
import type { Pauses } from '../operations/pauses.js';
import type { ReleaseSender } from '../release-sender.js';
import type { ClaimedRow, ClaimRequest, OutboxStore } from '../store.js';
import type { PanelHolds } from './panel-holds.js';
import type { PanelSenders } from './panel-senders.js';

export type ClaimBase = Omit<ClaimRequest, 'panel'>;

export interface ClaimOutcome {
  rows: ClaimedRow[];
  /** Rows may be due in panels this claim did not reach: claim again before waiting. */
  more: boolean;
  /** When a held panel may be claimed from again, if one is held. */
  heldUntil: number | undefined;
}

/** What a claim asks of the worker's back-off (PanelHolds): which panels to skip, which probe. */
export type ClaimHolds = Pick<PanelHolds, 'claimFilter' | 'heldUntil' | 'isFailing' | 'probeStarted'>;

export interface PanelRouting {
  /** The panel of a single-panel outbox; undefined with `panels`. */
  readonly panel: string | undefined;
  /**
   * Claims rows for free slots: none of a held or paused panel, one of a panel that is probing.
   * `capPerPanel`: skip panels at their share of slots (see PanelHolds.claimFilter).
   */
  claim(request: ClaimBase, holds: ClaimHolds, capPerPanel: boolean, pauses: Pauses): Promise<ClaimOutcome>;
  /** The sender of `panel`'s releases; throws a PanelDeliveryError when there is none. */
  senderFor(panel: string): ReleaseSender | Promise<ReleaseSender>;
}

/** A single-panel outbox: only rows stored for its client's panel, only with that client. */
export function singlePanelRouting(store: OutboxStore, client: ReleaseSender, panel: string): PanelRouting {
  return {
    panel,
    async claim(request, holds, _capPerPanel, pauses) {
      if (pauses.isPaused(panel)) return { rows: [], more: false, heldUntil: undefined };
      const heldUntil = holds.heldUntil(panel);
      if (heldUntil !== undefined) return { rows: [], more: false, heldUntil };
      const probe = holds.isFailing(panel);
      const rows = await store.claimDue({ ...request, panel, limit: probe ? 1 : request.limit });
      if (probe && rows.length > 0) holds.probeStarted(panel);
      return { rows, more: false, heldUntil: undefined };
    },
    senderFor(rowPanel) {
      // A store that ignored `panel` (a custom one) must still never get another panel's row sent with our key.
      if (rowPanel !== panel)
        throw new PanelDeliveryError(
          'PANEL_MISMATCH',
          rowPanel,
          `panel-license-guard: the outbox store handed this worker a release of panel ${shownPanel(rowPanel)}; it is not sent with this outbox's credentials (panel ${shownPanel(panel)}). The store must honour \`panel\` in claimDue().`,
        );
      return client;
    },
  };
}

/** How many panels with pending rows one claim visits at most (beyond those held back). */
const PANELS_PER_CLAIM = 64;

/** With `panels`: rows of every panel, shared fairly, each sent with its own panel's credentials. */
export function manyPanelsRouting(store: OutboxStore, senders: PanelSenders): PanelRouting {
  const claimFair = store.claimFair?.bind(store);
  if (!claimFair) throw new TypeError('panel-license-guard: `panels` needs a store with claimFair() (every built-in store has it).');
  // Where the next claim goes on: each claim starts after the panels the last one served.
  let cursor = '';
  return {
    panel: undefined,
    async claim(request, holds, capPerPanel, pauses) {
      if (pauses.allPaused) return { rows: [], more: false, heldUntil: undefined };
      const { skip, probe, nextAt } = holds.claimFilter(capPerPanel);
      const maxPanels = Math.max(PANELS_PER_CLAIM, 4 * request.limit);
      const skipPanels = pauses.pausedPanels().length === 0 ? skip : [...skip, ...pauses.pausedPanels()];
      const { rows, lastPanel } = await claimFair({ ...request, after: cursor, maxPanels, skipPanels, probePanels: probe });
      cursor = lastPanel ?? '';
      const probing = new Set(probe);
      for (const row of rows) if (probing.has(row.panel)) holds.probeStarted(row.panel);
      return { rows, more: lastPanel !== undefined, heldUntil: nextAt };
    },
    senderFor: (panel) => senders.senderFor(panel),
  };
}

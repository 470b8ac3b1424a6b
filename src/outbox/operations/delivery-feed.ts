// The feed of deliveries: every delivered release exactly as the store recorded it, in the order
// the deliveries committed, read with a cursor the app keeps (so a crash anywhere loses none and
// repeats none). A named feed also holds retention back until it has read past a delivery.

import { createHash } from 'node:crypto';
import { shown } from '../../options.js';
import type { PanelScoping } from '../panels/panel-scope.js';
import type { FeedRow, OutboxStore } from '../store.js';

/** One delivery as the feed gives it. */
export type Delivery = Omit<FeedRow, 'contentHash'>;

export interface DeliveryPage {
  /** In feed order (the order the deliveries committed), at most `limit`. */
  deliveries: Delivery[];
  /** Pass it as `after` next time: the last delivery's position, or `after` when none came. */
  cursor: number;
}

export interface DeliveriesQuery {
  /** The position of the last delivery you have handled (kept in your own database). @default 0 */
  after?: number;
  /** @default 100 (at most 1000) */
  limit?: number;
  /**
   * Names your feed: the store remembers `after` as how far it got, and retention deletes no
   * delivered release this feed has not read past. Leave it out for a read that holds nothing
   * back. Letters, digits, `_`, `.`, `-` (at most 100). Stop holding with `forgetFeed(name)`.
   */
  feed?: string;
  /** With `panels`: only this panel's deliveries (positions stay the store's). */
  panel?: string;
}

/** The control under which a feed's acknowledged position is kept. */
export const FEED_PREFIX = 'feed:';
const FEED_NAME = /^[A-Za-z0-9_.-]{1,100}$/;
const MAX_LIMIT = 1000;

/** A feed's control: its name, and a digest of the panel it is read for (a control name stays short). */
function feedControl(name: string, panel: string | undefined): string {
  return panel === undefined ? `${FEED_PREFIX}${name}` : `${FEED_PREFIX}${name}:${createHash('sha256').update(panel, 'utf8').digest('hex').slice(0, 32)}`;
}

/** The lowest position any named feed acknowledged, from the store's controls (undefined: no feed). */
export function feedHold(controls: Record<string, string>): number | undefined {
  let lowest: number | undefined;
  for (const [name, value] of Object.entries(controls)) {
    if (!name.startsWith(FEED_PREFIX)) continue;
    const position = Number(value);
    // A value the package did not write holds everything: losing a delivery is worse than keeping rows.
    const safe = Number.isSafeInteger(position) && position >= 0 ? position : 0;
    lowest = Math.min(lowest ?? safe, safe);
  }
  return lowest;
}

export interface DeliveryFeed {
  deliveries(query?: DeliveriesQuery): Promise<DeliveryPage>;
  /** Stops `name` (read for `panel`, when it was) holding retention back: a feed you no longer read. */
  forgetFeed(name: string, query?: { panel?: string }): Promise<void>;
}

export function feedReader(deps: {
  store: OutboxStore;
  scoping: PanelScoping;
  now: () => number;
  assertOpen: (method: string) => void;
  needs: <K extends 'deliveries' | 'setControl'>(method: string, name: K) => NonNullable<OutboxStore[K]>;
}): DeliveryFeed {
  const checkName = (method: string, name: unknown): string => {
    if (typeof name !== 'string' || !FEED_NAME.test(name))
      throw new TypeError(`panel-license-guard: ${method}() \`feed\` must be a name of 1 to 100 letters, digits, '_', '.' or '-', received ${shown(name)}.`);
    return name;
  };
  return {
    async deliveries(query = {}) {
      deps.assertOpen('deliveries');
      const { after = 0, limit = 100 } = query;
      if (!Number.isSafeInteger(after) || after < 0)
        throw new RangeError(
          `panel-license-guard: deliveries() \`after\` must be a feed position (a non-negative integer: the last \`cursor\`), received ${shown(after)}.`,
        );
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT)
        throw new RangeError(`panel-license-guard: deliveries() \`limit\` must be an integer from 1 to ${MAX_LIMIT}, received ${shown(limit)}.`);
      const { panel } = deps.scoping.scope('deliveries', query.panel);
      const read = deps.needs('deliveries', 'deliveries');
      if (query.feed !== undefined) {
        const name = checkName('deliveries', query.feed);
        // Acknowledged before reading on: what the app says it has handled may go. Kept per panel
        // read: one feed name followed panel by panel must not let one panel's cursor free another's rows.
        await deps.needs('deliveries', 'setControl')(feedControl(name, panel), String(after), deps.now());
      }
      const rows = await read({ after, limit, panel });
      // Checked, not trusted: a custom store must not page backwards or repeat.
      const deliveries = rows.filter((row) => row.position > after).map(({ contentHash: _hash, ...row }) => row);
      return { deliveries, cursor: deliveries.at(-1)?.position ?? after };
    },
    async forgetFeed(name, query = {}) {
      deps.assertOpen('forgetFeed');
      const { panel } = deps.scoping.scope('forgetFeed', query.panel);
      await deps.needs('forgetFeed', 'setControl')(feedControl(checkName('forgetFeed', name), panel), undefined, deps.now());
    },
  };
}

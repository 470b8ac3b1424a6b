// Claims on MySQL/MariaDB: one panel's due rows, or rows of many panels shared fairly, locked with
// FOR UPDATE SKIP LOCKED and leased in one short transaction (MySQL has no UPDATE … RETURNING).

import type { ClaimedRow, ClaimRequest, FairClaim, FairClaimRequest } from '../../store.js';
import { gatherHeads, pickFairly } from '../shared/fair-claim.js';
import { padded, rowCount, run } from './mysql-params.js';
import { type MysqlQueryable, type Row, rowsOf } from './mysql-schema.js';
import { claimedRow, type MysqlStatements } from './mysql-sql.js';

type InTransaction = <T>(work: (connection: MysqlQueryable) => Promise<T>) => Promise<T>;

/** The rows' ids as a list to send (0, no row's id, stands for none: `NOT IN ()` is no SQL). */
const idsOf = (rows: readonly Row[]) =>
  padded(
    rows.map((row) => Number(row.id)),
    0,
  );

/** `claimDue` and `claimFair` of the MySQL store, on the statements `sql`. */
export function createMysqlClaims(sql: MysqlStatements, inTransaction: InTransaction) {
  /** Leases `rows` (locked by this transaction) to the claimer. */
  async function lease(connection: MysqlQueryable, rows: Row[], request: ClaimRequest | FairClaimRequest): Promise<ClaimedRow[]> {
    if (rows.length === 0) return [];
    const ids = idsOf(rows);
    await run(connection, sql.lease(ids.length), [request.owner, request.nowMs, request.leaseMs, ...ids]);
    return rows.map(claimedRow);
  }

  return {
    claimDue: (request: ClaimRequest): Promise<ClaimedRow[]> =>
      inTransaction(async (connection) => {
        const { panel, nowMs, exclude = [], limit } = request;
        const skipped = padded(exclude, 0);
        return lease(connection, rowsOf(await run(connection, sql.claim(skipped.length), [panel, nowMs, nowMs, ...skipped, rowCount(limit)])), request);
      }),
    claimFair: (request: FairClaimRequest): Promise<FairClaim> =>
      inTransaction(async (connection) => {
        const { nowMs, exclude = [], after, maxPanels, skipPanels, limit } = request;
        // The ring of panels with pending rows (fair-claim.ts), read ahead in two queries.
        const wanted = maxPanels + skipPanels.length + 1;
        const first = after === '' ? run(connection, sql.panelsFirst, [rowCount(wanted)]) : run(connection, sql.panelsAfter, [after, rowCount(wanted)]);
        const ring = rowsOf(await first).map((r) => r.panel as string);
        if (after !== '' && ring.length < wanted)
          ring.push(...rowsOf(await run(connection, sql.panelsUpTo, [after, rowCount(wanted - ring.length)])).map((r) => r.panel as string));
        const skip = new Set(skipPanels);
        const visit = ring.filter((panel) => panel !== '' && !skip.has(panel)).slice(0, maxPanels);
        const [panels, skipped] = [padded(visit, ''), padded(exclude, 0)];
        const due =
          visit.length === 0 ? [] : rowsOf(await run(connection, sql.heads(panels.length, skipped.length), [nowMs, nowMs, ...panels, ...skipped, limit]));
        const byPanel = new Map<string, Row[]>();
        for (const row of due) byPanel.set(row.panel as string, [...(byPanel.get(row.panel as string) ?? []), row]);
        const { heads, resumeAfter } = gatherHeads(ring, request, (panel, most) =>
          (byPanel.get(panel) ?? []).sort((a, b) => Number(a.turn) - Number(b.turn)).slice(0, most),
        );
        const picked = pickFairly(heads, limit, resumeAfter);
        // Still due and unleased, and not being claimed by another host right now.
        const ids = idsOf(picked.rows as Row[]);
        const chosen = picked.rows.length === 0 ? [] : rowsOf(await run(connection, sql.lockChosen(ids.length), [...ids, nowMs, nowMs]));
        const order = new Map(picked.rows.map((row, index) => [Number(row.id), index]));
        chosen.sort((a, b) => (order.get(Number(a.id)) ?? 0) - (order.get(Number(b.id)) ?? 0));
        return { rows: await lease(connection, chosen, request), lastPanel: picked.lastPanel };
      }),
  };
}

// Settling an attempt on PostgreSQL: one compare-and-set UPDATE in the common case, the track's
// lock only when a replaced payload adds a history row (or the row keeps changing).

import { mayBeRecordedHistory, planSettle, type RowSnapshot, type RowUpdate } from '../../rules.js';
import type { ClaimedRow, OutboxState, OutboxStore, SettleRequest, SettleResult } from '../../store.js';
import { settleEach } from '../shared/settle-each.js';
import { num, orNull, type PgStoreContext, type Row } from './postgres-sql.js';

/** How often a read-then-write is retried when the row changed in between, before taking locks. */
const MAX_REREADS = 3;

export function createPostgresSettle({ pool, names, sql, hot, ready, inTransaction }: PgStoreContext): Required<Pick<OutboxStore, 'settle' | 'settleMany'>> {
  const snapshotOf = (current: Row | undefined): RowSnapshot | undefined =>
    current && {
      state: current.state as OutboxState,
      contentHash: current.content_hash as string,
      leaseOwner: (current.lease_owner as string | null) ?? undefined,
      nextAttemptAt: Number(current.next_attempt_at),
      releaseId: num(current.release_id),
    };
  const updateValues = (claim: ClaimedRow, update: RowUpdate, nowMs: number) => {
    const { state, attempts, nextAttemptAt, lastError, releaseId, deliveredAt, leaseOwner } = update;
    const next = Number.isNaN(nextAttemptAt) ? null : nextAttemptAt;
    return [claim.id, state, attempts, next, orNull(lastError), orNull(releaseId), orNull(deliveredAt), nowMs, orNull(leaseOwner)];
  };

  // The rules applied to the row as this worker claimed it (still pending, same payload, our
  // lease). `nextAttemptAt` unknown: the rules only carry it over, and the statements keep it then.
  const planAsClaimed = (...[claim, owner, outcome, nowMs]: Parameters<OutboxStore['settle']>) =>
    planSettle(
      { state: 'pending', contentHash: claim.contentHash, leaseOwner: owner, nextAttemptAt: Number.NaN, releaseId: undefined },
      claim,
      owner,
      outcome,
      nowMs,
    );

  /**
   * The common case in one round trip and no transaction: the row is as this worker claimed it,
   * so the write is made only if that still holds. Otherwise: read the row, apply the rules, write
   * only if the row is still as read. A payload replaced in flight (which adds a history row)
   * takes the locked path.
   */
  async function settleQuickly(...[claim, owner, outcome, nowMs]: Parameters<OutboxStore['settle']>): Promise<SettleResult> {
    await ready();
    const asClaimed = planAsClaimed(claim, owner, outcome, nowMs);
    if (asClaimed.update && !asClaimed.history) {
      const values = updateValues(claim, asClaimed.update, nowMs);
      if ((await pool.query(hot.updateAsClaimed, [...values, claim.contentHash, owner])).rowCount === 1) return asClaimed.result;
    }
    for (let round = 0; round < MAX_REREADS; round++) {
      const snapshot = snapshotOf((await pool.query(hot.peek, [claim.id])).rows[0]);
      const plan = planSettle(snapshot, claim, owner, outcome, nowMs);
      if (plan.history || !snapshot || mayBeRecordedHistory(snapshot, claim, owner, outcome)) break;
      if (!plan.update) return plan.result;
      const values = [...updateValues(claim, plan.update, nowMs), snapshot.contentHash, orNull(snapshot.leaseOwner), snapshot.nextAttemptAt];
      if ((await pool.query(hot.updateIfUnchanged, values)).rowCount === 1) return plan.result;
    }
    return settleLocked(claim, owner, outcome, nowMs);
  }

  /** Under the track's lock and the row's: for history rows, and rows that keep changing. */
  function settleLocked(...[claim, owner, outcome, nowMs]: Parameters<OutboxStore['settle']>): Promise<SettleResult> {
    return inTransaction(async (client) => {
      if (claim.remoteTrackId !== undefined) await client.query(sql.lockTrack, [names.table, claim.panel, claim.remoteTrackId]);
      const snapshot = snapshotOf((await client.query(sql.snapshot, [claim.id])).rows[0]);
      const recorded =
        mayBeRecordedHistory(snapshot, claim, owner, outcome) &&
        (await client.query(sql.recordedHistory, [claim.panel, orNull(claim.remoteTrackId), claim.id, claim.contentHash, owner, orNull(outcome.releaseId)]))
          .rowCount === 1;
      const plan = planSettle(snapshot, claim, owner, outcome, nowMs, recorded);
      if (plan.history) {
        const { body, contentHash, attempts, releaseId } = plan.history;
        const values = [orNull(claim.remoteTrackId), body, contentHash, attempts, nowMs, orNull(releaseId), claim.id, claim.panel, owner];
        await client.query(sql.insertDelivered, values);
      }
      if (plan.update) await client.query(sql.update, updateValues(claim, plan.update, nowMs));
      return plan.result;
    });
  }

  /**
   * Every outcome whose row is as claimed in one statement; the rest (a row changed or locked
   * meanwhile, a payload replaced in flight) one at a time, exactly as settle() would.
   */
  async function settleMany(settles: readonly SettleRequest[], owner: string): Promise<SettleResult[]> {
    await ready();
    const results: (SettleResult | undefined)[] = new Array(settles.length);
    const quick = settles.flatMap(({ claim, outcome, nowMs }, index) => {
      const plan = planAsClaimed(claim, owner, outcome, nowMs);
      return plan.update && !plan.history ? [{ index, claim, update: plan.update, result: plan.result, nowMs }] : [];
    });
    if (quick.length > 1) {
      const rows = quick.map(({ claim, update, nowMs }) => updateValues(claim, update, nowMs));
      // Column by column: unnest() turns the ten arrays back into rows.
      const columns = Array.from({ length: 9 }, (_, column) => rows.map((values) => values[column]));
      const { rows: applied } = await pool.query(hot.settleMany, [...columns, quick.map(({ claim }) => claim.contentHash), owner]);
      const done = new Set(applied.map((row) => Number(row.id)));
      for (const { index, claim, result } of quick) if (done.has(claim.id)) results[index] = result;
    }
    return settleEach(settles, ({ claim, outcome, nowMs }) => settleQuickly(claim, owner, outcome, nowMs), results);
  }

  return { settle: settleQuickly, settleMany };
}

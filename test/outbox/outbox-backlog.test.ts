import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { MotherEmulator } from '../../src/emulator/emulator.js';
import type { ReleaseSender } from '../../src/outbox/options.js';
import { createReleaseOutbox } from '../../src/outbox/outbox.js';
import type { ClaimedRow, OutboxStore } from '../../src/outbox/store.js';
import { sqliteOutboxStore } from '../../src/outbox/stores/sqlite/sqlite-store.js';
import { clientFor, sleep, startEmulator, waitFor } from '../support/helpers.js';

let emulator: MotherEmulator;
const dir = mkdtempSync(join(tmpdir(), 'outbox-backlog-'));
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(async () => {
  await emulator.close();
  rmSync(dir, { recursive: true, force: true });
});

const BACKLOG = 10_000;
const CONCURRENCY = 4;
/** Rows the worker may hold at once: its pushes, and as many claimed ahead (at least 32). */
const HELD = CONCURRENCY + Math.max(32, CONCURRENCY);

describe('createReleaseOutbox()', () => {
  describe('with 10,000 releases queued while the mother is down', () => {
    it('never holds more than one batch, keeps at most `concurrency` pushes in flight, and counts correctly', async () => {
      emulator.setFaults({ down: true });
      const inner = sqliteOutboxStore({ file: join(dir, 'backlog.db') });
      const claims: { limit: number; returned: number }[] = [];
      const store: OutboxStore = {
        ...inner,
        async claimDue(request) {
          const rows: ClaimedRow[] = await inner.claimDue(request);
          claims.push({ limit: request.limit, returned: rows.length });
          return rows;
        },
      };
      const client = clientFor(emulator);
      let active = 0;
      let mostActive = 0;
      const countingClient: ReleaseSender = {
        panelId: client.panelId,
        async pushSerializedRelease(body) {
          mostActive = Math.max(mostActive, ++active);
          try {
            return await client.pushSerializedRelease(body);
          } finally {
            active--;
          }
        },
      };
      const outbox = createReleaseOutbox({
        client: countingClient,
        store,
        concurrency: CONCURRENCY,
        baseDelayMs: 200,
        maxDelayMs: 5000,
        logger: { warn: vi.fn(), error: vi.fn() },
      });
      try {
        for (let i = 0; i < BACKLOG; i++) await outbox.enqueue({ title: `Track ${i}`, remote_track_id: `bulk-${i}` });
        await waitFor(() => claims.length >= 2, 'the worker to claim twice');
        await sleep(300);

        expect(await outbox.stats()).toMatchObject({ pending: BACKLOG, delivered: 0, dead: 0 });
        expect(Math.max(...claims.map((c) => c.limit))).toBeLessThanOrEqual(HELD);
        expect(Math.max(...claims.map((c) => c.returned))).toBeLessThanOrEqual(HELD);
        expect(mostActive).toBeLessThanOrEqual(CONCURRENCY);
        expect((await outbox.stats()).inFlight).toBeLessThanOrEqual(CONCURRENCY);
        // The worker backs off as a whole: a dead mother sees a handful of probes, not one per row.
        expect(emulator.requests.length).toBeLessThan(100);
        expect(await outbox.list({ state: 'pending', limit: 3 })).toMatchObject([{ id: 1 }, { id: 2 }, { id: 3 }]);
      } finally {
        await outbox.close();
        await inner.close();
        emulator.setFaults({});
      }
    });
  });
});

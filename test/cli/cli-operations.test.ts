import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { EXIT, type Io } from '../../src/cli/io.js';
import { main } from '../../src/cli/main.js';
import type { MotherEmulator } from '../../src/emulator/emulator.js';
import { createReleaseOutbox } from '../../src/outbox/outbox.js';
import { clientFor, startEmulator } from '../support/helpers.js';

// What an operator does from a shell to the outbox a running panel shares: pause, cancel, resume,
// read the delivery feed — every answer said plainly, with an exit code a script can use.
let emulator: MotherEmulator;
const dir = mkdtempSync(join(tmpdir(), 'cli-operations-'));
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(async () => {
  await emulator.close();
  rmSync(dir, { recursive: true, force: true });
});

function fakeIo() {
  const out: string[] = [];
  const err: string[] = [];
  const io: Io = { out: (l) => out.push(l), err: (l) => err.push(l), write: (t) => out.push(t), env: {}, isTTY: false };
  return { io, out, err };
}

it('pauses delivery for a running panel, cancels a release by id and by track, resumes, and lists the deliveries', async () => {
  const file = join(dir, 'outbox.db');
  const client = clientFor(emulator);
  const panel = createReleaseOutbox({ client, file, pollIntervalMs: 20, logger: { warn() {}, error() {} } });
  try {
    const paused = fakeIo();
    expect(await main(['outbox', 'pause', '--outbox', file], paused.io)).toBe(EXIT.ok);
    expect(paused.out[0]).toMatch(/^Delivery of every panel paused/);
    await new Promise((resolve) => setTimeout(resolve, 1_200)); // the running panel reads pauses once a second
    const first = await panel.enqueue({ title: 'One', primary_artist: 'Ada', remote_track_id: 'cli-op-1' });
    await panel.enqueue({ title: 'Two', primary_artist: 'Ada', remote_track_id: 'cli-op-2' });
    await panel.enqueue({ title: 'Three', primary_artist: 'Ada', remote_track_id: 'cli-op-3' });
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(emulator.releases).toHaveLength(0);
    const listed = fakeIo();
    expect(await main(['outbox', '--outbox', file], listed.io)).toBe(EXIT.ok);
    expect(listed.out[0]).toBe('pending 3 · delivered 0 · dead 0 · cancelled 0 · paused');

    const byId = fakeIo();
    expect(await main(['outbox', 'cancel', String(first.id), '--reason', 'wrong artwork', '--outbox', file], byId.io)).toBe(EXIT.ok);
    expect(byId.out[0]).toBe(`Release #${first.id} cancelled: it will never be sent.`);
    const again = fakeIo();
    expect(await main(['outbox', 'cancel', String(first.id), '--outbox', file], again.io)).toBe(EXIT.inactive);
    expect(again.err[0]).toBe(`Release #${first.id} was already cancelled.`);
    const byTrack = fakeIo();
    expect(await main(['outbox', 'cancel', '--track', 'cli-op-2', '--panel', client.panelId, '--outbox', file], byTrack.io)).toBe(EXIT.ok);
    expect(await main(['outbox', 'cancel', '--track', 'cli-op-2', '--outbox', file], fakeIo().io)).toBe(EXIT.usage);
    expect(await main(['outbox', 'cancel', '--outbox', file], fakeIo().io)).toBe(EXIT.usage);

    expect(await main(['outbox', 'resume', '--outbox', file], fakeIo().io)).toBe(EXIT.ok);
    await panel.drain({ signal: AbortSignal.timeout(10_000) });
    expect(emulator.releases.map((r) => r.release.title)).toEqual(['Three']);
    const feed = fakeIo();
    expect(await main(['outbox', 'deliveries', '--json', '--outbox', file], feed.io)).toBe(EXIT.ok);
    const page = JSON.parse(feed.out[0] ?? '{}') as { deliveries: { remoteTrackId: string; releaseId: number }[]; cursor: number };
    expect(page.deliveries).toEqual([expect.objectContaining({ remoteTrackId: 'cli-op-3', releaseId: emulator.releases[0]?.releaseId })]);
    const after = fakeIo();
    expect(await main(['outbox', 'deliveries', '--after', String(page.cursor), '--outbox', file], after.io)).toBe(EXIT.ok);
    expect(after.out).toEqual([`cursor ${page.cursor}`]);
    const delivered = fakeIo();
    expect(await main(['outbox', 'cancel', '--track', 'cli-op-3', '--panel', client.panelId, '--outbox', file], delivered.io)).toBe(EXIT.inactive);
    expect(delivered.err[0]).toMatch(/was already delivered: the mother has it \(release_id \d+\)\.$/);
  } finally {
    await panel.close();
  }
});

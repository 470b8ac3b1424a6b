import { describe, expect, it } from 'vitest';
import { createPushProgress } from '../../src/cli/push-progress.js';

function terminal(isTTY: boolean, columns = 120) {
  const lines: string[] = [];
  const writes: string[] = [];
  return { io: { out: (l: string) => lines.push(l), write: (t: string) => writes.push(t), isTTY, columns }, lines, writes };
}

describe('createPushProgress()', () => {
  it('shows done/total, a rate and the latest failure on a terminal', async () => {
    const { io, lines, writes } = terminal(true);
    const progress = createPushProgress(io, false);
    progress.begin(4);
    progress.failing('The mother answered HTTP 503.');
    expect(writes.at(-1)).toMatch(/^\[\.{24}\] 0\/4 · \d+\.\d\/s · retrying: The mother answered HTTP 503\.$/);
    progress.line('delivered  [0] #1 → release_id 1000');
    progress.settled(1);
    expect(lines).toEqual(['delivered  [0] #1 → release_id 1000']);
    expect(writes.at(-1)).toMatch(/^\[#{6}\.{18}\] 1\/4 · \d+\.\d\/s$/);
    await progress.tick(1);
    progress.end();
    expect(writes.at(-1)).toBe('\n');
  });

  it('never wraps: the line is cut to the terminal width', () => {
    const { io, writes } = terminal(true, 40);
    const progress = createPushProgress(io, false);
    progress.begin(4);
    progress.failing('The mother answered HTTP 503 with a very long explanation.');
    expect([...(writes.at(-1) ?? '')]).toHaveLength(39);
  });

  it('prints only result lines when not on a terminal, or with --json', () => {
    for (const [isTTY, json] of [
      [false, false],
      [true, true],
    ] as const) {
      const { io, lines, writes } = terminal(isTTY);
      const progress = createPushProgress(io, json);
      progress.begin(2);
      progress.line('x');
      progress.settled(1);
      progress.end();
      expect(lines).toEqual(['x']);
      expect(writes).toEqual([]);
    }
  });
});

// The progress line of `panel-license push` on a terminal: done/total, rate, and what is failing.

export interface PushProgress {
  /** Prints a result line (above the progress line on a terminal). */
  line(text: string): void;
  /** Starts counting: `total` releases of FILE are on their way. */
  begin(total: number): void;
  /** `count` releases reached a final state. */
  settled(count: number): void;
  /** The latest failure of one of ours (shown until the next success). */
  failing(message: string): void;
  /** Waits up to `ms`, redrawing the line. */
  tick(ms: number): Promise<void>;
  end(): void;
}

interface ProgressIo {
  out(line: string): void;
  write(text: string): void;
  isTTY: boolean;
  /** Terminal width: the line must not wrap, or clearing it would leave stale rows. @default 80 */
  columns?: number | undefined;
}

const WIDTH = 24;

/** On a terminal, one self-updating line; otherwise (pipes, CI logs, --json) nothing but result lines. */
export function createPushProgress(io: ProgressIo, json: boolean): PushProgress {
  const live = io.isTTY && !json;
  let total = 0;
  let done = 0;
  let startedAt = Date.now();
  let lastFailure: string | undefined;
  let drawn = false;

  function render(): string {
    const filled = total === 0 ? WIDTH : Math.round((done / total) * WIDTH);
    const seconds = Math.max(0.001, (Date.now() - startedAt) / 1000);
    const rate = `${(done / seconds).toFixed(1)}/s`;
    const failing = lastFailure ? ` · retrying: ${lastFailure}` : '';
    const line = `[${'#'.repeat(filled)}${'.'.repeat(WIDTH - filled)}] ${done}/${total} · ${rate}${failing}`;
    return [...line].slice(0, Math.max(20, (io.columns ?? 80) - 1)).join('');
  }

  function clear(): void {
    if (drawn) io.write('\r\u001b[2K');
    drawn = false;
  }

  function draw(): void {
    if (!live || total === 0) return;
    clear();
    io.write(render());
    drawn = true;
  }

  return {
    line(text) {
      clear();
      io.out(text);
      draw();
    },
    begin(count) {
      total = count;
      startedAt = Date.now();
      draw();
    },
    settled(count) {
      done += count;
      lastFailure = undefined;
      draw();
    },
    failing(message) {
      lastFailure = message;
      draw();
    },
    tick(ms) {
      draw();
      return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
    },
    end() {
      if (drawn) io.write('\n');
      drawn = false;
    },
  };
}

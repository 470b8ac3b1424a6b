// The console's two pictures, drawn on the server as SVG (no script, nothing fetched): a panel's
// last checks, and deliveries and failures per minute over the last hour.
import type { CheckPoint, MinuteCounts } from './activity.js';
import { escapeHtml } from './layout.js';

const WIDTH = 600;
const HEIGHT = 120;

/** One bar per check: its height the latency, its colour the outcome. */
export function checkTimeline(points: readonly CheckPoint[]): string {
  if (points.length === 0) return '<p class="muted">No check run by this instance yet.</p>';
  const slowest = Math.max(...points.map((p) => p.durationMs), 1);
  const step = WIDTH / Math.max(points.length, 10);
  const bars = points
    .map((point, i) => {
      const height = Math.max(3, Math.round((point.durationMs / slowest) * (HEIGHT - 20)));
      const kind = point.result === 'ok' ? 'ok' : point.result === 'inactive' ? 'locked' : 'failed';
      const label = `${new Date(point.at).toISOString()}: ${point.result}, ${Math.round(point.durationMs)} ms`;
      return `<rect class="${kind}" x="${(i * step + 1).toFixed(1)}" y="${HEIGHT - height}" width="${(step - 2).toFixed(1)}" height="${height}"><title>${escapeHtml(label)}</title></rect>`;
    })
    .join('');
  return svg(`Last ${points.length} checks; the slowest took ${Math.round(slowest)} ms`, bars);
}

/** Deliveries (up) and failed attempts (down) per minute. */
export function throughputChart(minutes: readonly MinuteCounts[]): string {
  const most = Math.max(...minutes.map((m) => Math.max(m.delivered, m.failed)), 1);
  const step = WIDTH / minutes.length;
  const half = HEIGHT / 2;
  const bars = minutes
    .map((minute, i) => {
      const x = (i * step + 0.5).toFixed(1);
      const width = Math.max(step - 1, 1).toFixed(1);
      const up = Math.round((minute.delivered / most) * (half - 4));
      const down = Math.round((minute.failed / most) * (half - 4));
      const label = escapeHtml(`${new Date(minute.at).toISOString().slice(11, 16)} UTC: ${minute.delivered} delivered, ${minute.failed} failed`);
      return `<g><title>${label}</title><rect class="ok" x="${x}" y="${half - up}" width="${width}" height="${up}"/><rect class="failed" x="${x}" y="${half}" width="${width}" height="${down}"/></g>`;
    })
    .join('');
  const total = minutes.reduce((sum, m) => sum + m.delivered, 0);
  const failed = minutes.reduce((sum, m) => sum + m.failed, 0);
  return svg(
    `Last hour on this instance: ${total} delivered, ${failed} failed attempts (most in a minute: ${most})`,
    `<line class="axis" x1="0" y1="${half}" x2="${WIDTH}" y2="${half}"/>${bars}`,
  );
}

function svg(caption: string, body: string): string {
  return `<figure><svg viewBox="0 0 ${WIDTH} ${HEIGHT}" width="100%" role="img" aria-label="${escapeHtml(caption)}">${body}</svg><figcaption>${escapeHtml(caption)}</figcaption></figure>`;
}

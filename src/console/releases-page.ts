// The releases: counts by state and by panel, the last hour's deliveries, a list per state (of
// one panel, or all), a release's page, and the retry actions. Reads go through the outbox's
// own API, so every store works the same (memory, SQLite, PostgreSQL, MySQL).
import type { OutboxEntry, ReleaseOutbox } from '../outbox/outbox.js';
import type { OutboxState } from '../outbox/store.js';
import type { ConsoleActivity } from './activity.js';
import { throughputChart } from './charts.js';
import { action, escapeHtml, fields, link, type PageContext, stateBadge, when } from './layout.js';

const STATES: OutboxState[] = ['dead', 'pending', 'delivered'];
const LIST_LIMIT = 100;
const PANELS_SHOWN = 20;

export interface ReleasesQuery {
  state: OutboxState;
  panel: string | undefined;
}

/** `?state=` and `?panel=` as the list takes them (dead releases of every panel otherwise). */
export function releasesQuery(query: Record<string, unknown>): ReleasesQuery {
  const state = STATES.find((s) => s === query.state) ?? 'dead';
  const panel = typeof query.panel === 'string' && query.panel.length > 0 && query.panel.length <= 200 ? query.panel : undefined;
  return { state, panel };
}

export async function releasesList(
  ctx: PageContext,
  outbox: ReleaseOutbox,
  activity: ConsoleActivity,
  { state, panel }: ReleasesQuery,
  notice: string | undefined,
): Promise<string> {
  const scope = panel === undefined ? undefined : { panel };
  const [stats, byPanel, entries] = await Promise.all([
    outbox.stats(scope),
    panel === undefined ? outbox.panelStats(PANELS_SHOWN).catch(() => []) : Promise.resolve([]),
    outbox.list({ state, limit: LIST_LIMIT, ...scope }),
  ]);
  const cards = STATES.map((s) => `<div class="card"><b>${stats[s]}</b><span>${s}</span></div>`).join('');
  const query = (s: OutboxState) => `/releases?${new URLSearchParams({ state: s, ...(panel ? { panel } : {}) })}`;
  const tabs = STATES.map((s) => `<a href="${escapeHtml(ctx.base + query(s))}"${s === state ? ' class="here"' : ''}>${s}</a>`).join('');
  const panelsTable =
    byPanel.length === 0
      ? ''
      : `<h2>Panels with releases waiting</h2><table><thead><tr><th>Panel</th><th>Pending</th><th>Dead</th></tr></thead><tbody>${byPanel
          .map(
            (p) =>
              `<tr><td>${link(ctx, `/releases?${new URLSearchParams({ state: 'dead', panel: p.panel })}`, p.panel || '(no panel)')}</td><td>${p.pending}</td><td>${p.dead}</td></tr>`,
          )
          .join('')}</tbody></table>`;
  const retryAll =
    state === 'dead' && entries.length > 0
      ? action(ctx, '/releases/retry-dead', panel ? `Retry every dead release of ${panel}` : 'Retry every dead release', panel ? { panel } : {})
      : '';
  return `${notice ? `<p class="notice">${escapeHtml(notice)}</p>` : ''}<h1>Releases${panel ? ` of ${escapeHtml(panel)}` : ''}</h1><div class="cards">${cards}</div>
<h2>Deliveries</h2>${throughputChart(activity.lastHour())}${panelsTable}
<h2>${escapeHtml(state)} releases${entries.length === LIST_LIMIT ? ` (the first ${LIST_LIMIT})` : ''}</h2><p class="filters">${tabs}</p><p>${retryAll}</p>
<table><thead><tr><th>#</th><th>Panel</th><th>Title</th><th>Track id</th><th>Attempts</th><th>Last error</th><th>Updated</th></tr></thead>
<tbody>${entries.map((entry) => releaseRow(ctx, entry)).join('') || '<tr><td colspan="7" class="muted">None.</td></tr>'}</tbody></table>`;
}

function releaseRow(ctx: PageContext, entry: OutboxEntry): string {
  const title = typeof entry.release.title === 'string' ? entry.release.title : '(no title)';
  return `<tr><td>${link(ctx, `/releases/${entry.id}`, String(entry.id))}</td><td>${escapeHtml(entry.panel || '—')}</td><td>${link(ctx, `/releases/${entry.id}`, title)}</td>
<td>${escapeHtml(entry.remoteTrackId ?? '—')}</td><td>${entry.attempts}</td><td>${escapeHtml(truncate(entry.lastError ?? '', 120))}</td><td>${when(entry.updatedAt, ctx.now)}</td></tr>`;
}

export function releasePage(ctx: PageContext, entry: OutboxEntry | undefined, notice: string | undefined): string {
  if (!entry) return '<h1>Release</h1><p class="muted">No such release (it may have been pruned).</p>';
  const rows: [string, string][] = [
    ['State', `${stateBadge(entry.state)}${entry.leased ? ' <span class="muted">(being sent)</span>' : ''}`],
    ['Panel', escapeHtml(entry.panel || '—')],
    ['Track id', escapeHtml(entry.remoteTrackId ?? '—')],
    ['Attempts', String(entry.attempts)],
    ['Last error', escapeHtml(entry.lastError ?? '—')],
    ["Mother's release_id", entry.releaseId === undefined ? '—' : String(entry.releaseId)],
    ['Stored', when(entry.createdAt, ctx.now)],
    ['Next attempt', entry.state === 'pending' ? when(entry.nextAttemptAt, ctx.now) : '—'],
    ['Delivered', when(entry.deliveredAt, ctx.now)],
  ];
  const retry = entry.state === 'dead' ? `<p>${action(ctx, `/releases/${entry.id}/retry`, 'Retry this release')}</p>` : '';
  return `${notice ? `<p class="notice">${escapeHtml(notice)}</p>` : ''}<h1>Release #${entry.id} ${stateBadge(entry.state)}</h1>${retry}${fields(rows)}
<h2>What is sent</h2><pre>${escapeHtml(JSON.stringify(entry.release, null, 2))}</pre>`;
}

function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

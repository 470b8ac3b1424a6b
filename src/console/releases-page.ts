// The releases: counts by state and by panel, the last hour's deliveries, a list per state (of
// one panel, or all), a release's page, and the retry actions. Reads go through the outbox's
// own API, so every store works the same (memory, SQLite, PostgreSQL, MySQL).
import type { OutboxEntry, ReleaseOutbox } from '../outbox/outbox.js';
import type { OutboxState } from '../outbox/store.js';
import type { ConsoleActivity } from './activity.js';
import { throughputChart } from './charts.js';
import { action, escapeHtml, fields, link, type PageContext, stateBadge, when } from './layout.js';
import { asOneSearch, readSliced } from './slices.js';
import { findByTitle, searchWords, titleMatches } from './title-search.js';

const STATES: OutboxState[] = ['dead', 'pending', 'delivered', 'cancelled'];
const PAGE_SIZE = 50;
const PANELS_SHOWN = 20;
/**
 * Ranking panels reads every waiting release (one statement on SQLite, about 20 ms per 50,000
 * rows, in the app's own event loop): past this many, the page says so instead of ranking them.
 */
export const RANK_PANELS_UP_TO = 50_000;

export interface ReleasesQuery {
  state: OutboxState;
  panel: string | undefined;
  /** A `remote_track_id` searched for. */
  track: string | undefined;
  /** Words searched for in titles. */
  title: string | undefined;
  /** The last id of the previous page. */
  after: number | undefined;
}

/** `?state=`, `?panel=`, `?track=`, `?title=` and `?after=` as the list takes them (dead releases of every panel otherwise). */
export function releasesQuery(query: Record<string, unknown>): ReleasesQuery {
  const state = STATES.find((s) => s === query.state) ?? 'dead';
  const text = (value: unknown, max: number) => (typeof value === 'string' && value.trim().length > 0 && value.length <= max ? value.trim() : undefined);
  const after = typeof query.after === 'string' && /^\d{1,15}$/.test(query.after) ? Number(query.after) : undefined;
  return { state, panel: text(query.panel, 200), track: text(query.track, 500), title: text(query.title, 200), after };
}

/** The releases page; `signal` aborts its reading (the browser went away). */
export async function releasesList(
  ctx: PageContext,
  outbox: ReleaseOutbox,
  activity: ConsoleActivity,
  query: ReleasesQuery,
  notice: string | undefined,
  signal?: AbortSignal,
) {
  const { state, panel, track, title, after } = query;
  const scope = panel === undefined ? undefined : { panel };
  const [stats, { shown, next, stoppedEarly, read }] = await Promise.all([outbox.stats(scope), listed(outbox, query, signal)]);
  const waiting = stats.pending + stats.dead;
  const ranked = panel === undefined && waiting <= RANK_PANELS_UP_TO;
  const byPanel = ranked ? await outbox.panelStats(PANELS_SHOWN).catch(() => []) : [];
  const cards = STATES.map((s) => `<div class="card"><b>${stats[s]}</b><span>${s}</span></div>`).join('');
  const listPath = (s: OutboxState, extra: Record<string, string> = {}) =>
    `/releases?${new URLSearchParams({ state: s, ...(panel ? { panel } : {}), ...(track ? { track } : {}), ...(title ? { title } : {}), ...extra })}`;
  const tabs = STATES.map((s) => `<a href="${escapeHtml(ctx.base + listPath(s))}"${s === state ? ' class="here"' : ''}>${s}</a>`).join('');
  const search = `<form method="get" action="${escapeHtml(`${ctx.base}/releases`)}"><input type="hidden" name="state" value="${escapeHtml(state)}">${
    panel ? `<input type="hidden" name="panel" value="${escapeHtml(panel)}">` : ''
  }<input name="track" placeholder="remote_track_id" value="${escapeHtml(track ?? '')}" aria-label="Find by remote_track_id"> <input name="title" placeholder="words of the title" value="${escapeHtml(
    title ?? '',
  )}" aria-label="Find by title"> <button class="quiet">Find</button></form>`;
  const pages = [
    after === undefined ? '' : link(ctx, listPath(state), '← First page'),
    next === undefined ? '' : link(ctx, listPath(state, { after: String(next) }), stoppedEarly ? 'Search further →' : 'Next page →'),
  ].join(' ');
  const searched = stoppedEarly
    ? `<p class="muted">Titles are not indexed: this page read ${read.toLocaleString('en')} releases (up to #${next}) and stopped there.</p>`
    : '';
  const panelsTable =
    panel === undefined && !ranked
      ? `<p class="muted">${waiting.toLocaleString('en')} releases are waiting: too many to rank their panels here without holding up the app. <code>panel-license outbox panels</code> ranks them outside it.</p>`
      : byPanel.length === 0
        ? ''
        : `<h2>Panels with releases waiting</h2><table><thead><tr><th>Panel</th><th>Pending</th><th>Dead</th></tr></thead><tbody>${byPanel
            .map((p) => `<tr><td>${link(ctx, listPath('dead', { panel: p.panel }), p.panel || '(no panel)')}</td><td>${p.pending}</td><td>${p.dead}</td></tr>`)
            .join('')}</tbody></table>`;
  const label = panel ? `Retry every dead release of ${panel}` : 'Retry every dead release';
  const retryAll =
    state === 'dead' && shown.length > 0 && track === undefined && title === undefined
      ? action(ctx, '/releases/retry-dead', label, panel ? { panel } : {})
      : '';
  // Pausing acts on what is shown: one panel's releases, or every panel's.
  const pausing = stats.paused
    ? `<p class="notice paused">Delivery${panel ? ` of ${escapeHtml(panel)}` : ''} is paused: releases are stored and wait. ${action(ctx, '/releases/resume', 'Resume delivery', panel ? { panel } : {})}</p>`
    : `<p>${action(ctx, '/releases/pause', panel ? `Pause delivery of ${panel}` : 'Pause delivery', panel ? { panel } : {}, true)}</p>`;
  return `${notice ? `<p class="notice">${escapeHtml(notice)}</p>` : ''}<h1>Releases${panel ? ` of ${escapeHtml(panel)}` : ''}</h1>${pausing}<div class="cards">${cards}</div>
<h2>Deliveries</h2>${throughputChart(activity.lastHour())}${panelsTable}
<h2>${escapeHtml(state)} releases${track ? ` of track ${escapeHtml(track)}` : ''}${title ? ` titled like “${escapeHtml(title)}”` : ''}</h2><p class="filters">${tabs}</p>${search}<p>${retryAll}</p>
<table><thead><tr><th>#</th><th>Panel</th><th>Title</th><th>Track id</th><th>Attempts</th><th>Last error</th><th>Updated</th></tr></thead>
<tbody>${shown.map((entry) => releaseRow(ctx, entry)).join('') || '<tr><td colspan="7" class="muted">None.</td></tr>'}</tbody></table>${searched}<p>${pages}</p>`;
}

/** One page of the list: by the store's own filters, or, with a title, by reading the list (bounded). */
async function listed(outbox: ReleaseOutbox, { state, panel, track, title, after }: ReleasesQuery, signal: AbortSignal | undefined) {
  if (title !== undefined && track === undefined) {
    const { found, ...rest } = await asOneSearch(() => findByTitle(outbox, { state, panel, title, after }, PAGE_SIZE, signal));
    return { shown: found, ...rest };
  }
  // One more than a page: whether there is a next one.
  const entries = await readSliced(outbox, { state, panel, track, after }, PAGE_SIZE + 1, signal);
  const shown = entries.slice(0, PAGE_SIZE);
  const more = entries.length > PAGE_SIZE;
  const words = title === undefined ? undefined : searchWords(title);
  const filtered = words === undefined ? shown : shown.filter((entry) => titleMatches(entry.release.title, words));
  return { shown: filtered, next: more ? shown.at(-1)?.id : undefined, stoppedEarly: false, read: entries.length };
}

function releaseRow(ctx: PageContext, entry: OutboxEntry): string {
  const title = typeof entry.release.title === 'string' ? entry.release.title : '(no title)';
  return `<tr><td>${link(ctx, `/releases/${entry.id}`, String(entry.id))}</td><td>${escapeHtml(entry.panel || '—')}</td><td>${link(ctx, `/releases/${entry.id}`, title)}</td>
<td>${escapeHtml(entry.remoteTrackId ?? '—')}</td><td>${entry.attempts}</td><td>${escapeHtml(truncate(entry.lastError ?? '', 120))}</td><td>${when(entry.updatedAt, ctx.now)}</td></tr>`;
}

export function releasePage(ctx: PageContext, entry: OutboxEntry, notice: string | undefined): string {
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
  const retry =
    entry.state === 'dead'
      ? `<p>${action(ctx, `/releases/${entry.id}/retry`, 'Retry this release')}</p>`
      : entry.state === 'pending'
        ? `<p>${action(ctx, `/releases/${entry.id}/cancel`, 'Cancel this release (it will never be sent)', {}, true)}</p>`
        : '';
  return `${notice ? `<p class="notice">${escapeHtml(notice)}</p>` : ''}<h1>Release #${entry.id} ${stateBadge(entry.state)}</h1>${retry}${fields(rows)}
<h2>What is sent</h2><pre>${escapeHtml(JSON.stringify(entry.release, null, 2))}</pre>`;
}

function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

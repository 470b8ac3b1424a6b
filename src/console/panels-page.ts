// The panels: one row each (the most telling first: locked, expiring soon, in grace, failing), filtered by state
// and paged; a panel's page with its status, hosts and last checks, and "check now".
import type { LicenseGuard } from '../guard/guard-api.js';
import type { LicenseStatus } from '../guard/license-status.js';
import type { GuardInstruments, PanelReading, PanelView } from '../guard/telemetry.js';
import type { LicenseState } from '../serve/license-state.js';
import { licensedHosts } from '../serve/licensed-domains.js';
import type { GuardSnapshot } from '../serve/snapshot.js';
import type { ConsoleActivity } from './activity.js';
import { checkTimeline } from './charts.js';
import { action, escapeHtml, fields, link, type PageContext, stateBadge, when } from './layout.js';
import { panelsPage } from './panel-pass.js';

export const PAGE_SIZE = 50;
const STATES = ['locked', 'grace', 'pending', 'active'] as const;

export interface PanelsSource {
  guard: LicenseGuard;
  instruments: GuardInstruments;
  activity: ConsoleActivity;
}

/** `?state=` and `?page=` as the list takes them (anything else: all states, the first page). */
export function panelsQuery(query: Record<string, unknown>): { state: LicenseState | undefined; page: number } {
  const state = STATES.find((s) => s === query.state);
  const page = Math.min(Math.max(Number.parseInt(String(query.page ?? '0'), 10) || 0, 0), 10_000);
  return { state, page };
}

/** The panels list; `signal` aborts its pass over the panels (the browser went away). */
export async function panelsList(
  ctx: PageContext,
  source: PanelsSource,
  { state, page }: { state: LicenseState | undefined; page: number },
  signal?: AbortSignal,
): Promise<string> {
  const { shown, more: hasMore, byState: counts, failing } = await panelsPage(source.instruments, state, page, PAGE_SIZE, signal);
  const cards = STATES.map((s) => `<div class="card"><b>${counts[s] ?? 0}</b><span>${s}</span></div>`).join('');
  const filters = [undefined, ...STATES]
    .map((s) => `<a href="${escapeHtml(`${ctx.base}/${s ? `?state=${s}` : ''}`)}"${s === state ? ' class="here"' : ''}>${s ?? 'all'}</a>`)
    .join('');
  const rows = shown.map((reading) => panelRow(ctx, source, reading)).join('');
  const more = hasMore ? link(ctx, `/?${new URLSearchParams({ ...(state ? { state } : {}), page: String(page + 1) })}`, 'Next page →') : '';
  const back = page > 0 ? link(ctx, `/?${new URLSearchParams({ ...(state ? { state } : {}), page: String(page - 1) })}`, '← Previous page') : '';
  return `<h1>Panels</h1><div class="cards">${cards}${failing === undefined ? '' : `<div class="card"><b>${failing}</b><span>failing</span></div>`}</div>
<h2>${state ? `${escapeHtml(state)} panels` : 'All panels: locked first, then those expiring soon, in grace, failing'}</h2><p class="filters">${filters}</p>
<table><thead><tr><th>Panel</th><th>State</th><th>Grace left</th><th>Expires in</th><th>Last check</th><th>Next check</th><th>Failures in a row</th><th>Store</th><th>Licensed domains</th></tr></thead>
<tbody>${rows || '<tr><td colspan="9" class="muted">No panel here.</td></tr>'}</tbody></table><p>${back} ${more}</p>`;
}

function panelRow(ctx: PageContext, source: PanelsSource, { panel, status, graceLeftMs, expiresInMs }: PanelReading): string {
  const hosts = source.instruments.multiPanel ? source.guard.hostsOf(panel).slice(0, 3) : [];
  // Operators know a panel by its host (one panel: by its brand name); its id (derived from its
  // key, never the key) comes second.
  const known = hosts.length > 0 ? hosts.join(', ') : singlePanelName(source);
  const name =
    known !== undefined
      ? `${link(ctx, `/panels/${encodeURIComponent(panel)}`, known)}<br><span class="muted">${escapeHtml(panel)}</span>`
      : link(ctx, `/panels/${encodeURIComponent(panel)}`, panel);
  return `<tr><td>${name}</td><td>${stateBadge(status.state)}</td>
<td>${status.state === 'locked' || status.state === 'pending' ? '—' : escapeHtml(duration(graceLeftMs))}</td>
<td>${expiresInMs === null ? '—' : escapeHtml(expiresInMs <= 0 ? 'passed' : duration(expiresInMs))}</td>
<td>${when(status.lastCheckAt, ctx.now)} ${escapeHtml(lastOutcome(status))}</td>
<td>${when(status.nextCheckAt, ctx.now)}</td><td>${status.consecutiveFailures}</td><td>${escapeHtml(status.store)}</td>
<td>${escapeHtml(domainsOf(viewOf(source, panel, hosts[0])).hosts)}</td></tr>`;
}

/** One panel's guard: the panel's brand name, as its templates show it (the mother's `name`, or `defaultName`). */
function singlePanelName(source: PanelsSource): string | undefined {
  return source.instruments.multiPanel ? undefined : source.instruments.view?.()?.snapshot.branding.name;
}

/** The panel's view through `host`, if that host is still this panel's (a host may move to another panel). */
function viewOf(source: PanelsSource, panel: string, host: string | undefined): PanelView | undefined {
  if (host !== undefined && source.guard.status(host)?.panel !== panel) return undefined;
  return source.instruments.view?.(host);
}

/**
 * The hosts the panel's license names (its custom domain, then `<subdomain>.<subdomainBase>`),
 * and what the guard does with a request for any other host.
 */
function domainsOf(view: PanelView | undefined): { hosts: string; policy: string } {
  if (view === undefined) return { hosts: '—', policy: '—' };
  const { mode, allowHosts } = view.domains;
  const hosts = licensedHosts(view.snapshot.branding, view.domains.subdomainBase);
  const allowed = allowHosts.size > 0 ? `; always served: ${[...allowHosts].join(', ')}` : '';
  // As checkDomain() decides: a license that names no host this guard can check is served everywhere.
  const policy =
    mode === 'off'
      ? "not checked (domains: 'off'): every host is served"
      : hosts.length === 0
        ? `not checked: the license names no domain, so every host is served (domains: '${mode}')`
        : mode === 'enforce'
          ? `enforced (domains: 'enforce'): a request for another host is refused${allowed}`
          : `redirected (domains: 'redirect'): a request for another host is sent to ${hosts[0]}${allowed}`;
  return { hosts: hosts.length > 0 ? hosts.join(', ') : 'none named by the license', policy };
}

/** The status of `panel`: through one of its hosts with `panels`, the guard's own otherwise. */
export function statusOf(source: PanelsSource, panel: string): { status: LicenseStatus; host: string | undefined } | undefined {
  if (!source.instruments.multiPanel) {
    const status = source.guard.status();
    return source.instruments.readings(1)[0]?.panel === panel ? { status, host: undefined } : undefined;
  }
  for (const host of source.guard.hostsOf(panel)) {
    const status = source.guard.status(host);
    if (status) return { status, host };
  }
  return undefined;
}

export function panelPage(ctx: PageContext, source: PanelsSource, panel: string, notice: string | undefined): string {
  const found = statusOf(source, panel);
  if (!found) return `<h1>Panel ${escapeHtml(panel)}</h1><p class="muted">This instance has no such panel in memory.</p>`;
  const { status } = found;
  const hosts = source.instruments.multiPanel ? source.guard.hostsOf(panel) : [];
  const rows: [string, string][] = [
    ['Panel id', escapeHtml(panel)],
    ['State', stateBadge(status.state)],
    ['Reason', escapeHtml(status.reason ?? '—')],
    ['Last check', `${when(status.lastCheckAt, ctx.now)} ${escapeHtml(lastOutcome(status))}`],
    ['Last verified verdict', when(status.lastSuccessAt, ctx.now)],
    ['Next check', when(status.nextCheckAt, ctx.now)],
    ['Grace ends', when(status.graceEndsAt, ctx.now)],
    ['Failures in a row', String(status.consecutiveFailures)],
    ["Mother's clock offset", `${Math.round(status.clockOffsetMs)} ms`],
    ['Shared store', escapeHtml(status.store)],
    ['Last check by', escapeHtml(status.lastCheckBy ?? '—')],
    ...(hosts.length > 0 ? [['Hosts asked for', escapeHtml(hosts.join(', '))] as [string, string]] : []),
  ];
  const view = viewOf(source, panel, found.host);
  const domains = domainsOf(view);
  rows.push(['Licensed domains', escapeHtml(domains.hosts)], ['Other hosts', escapeHtml(domains.policy)]);
  return `${notice ? `<p class="notice">${escapeHtml(notice)}</p>` : ''}<h1>${escapeHtml(hosts[0] ?? singlePanelName(source) ?? `Panel ${panel}`)} ${stateBadge(status.state)}</h1>
<p>${action(ctx, `/panels/${encodeURIComponent(panel)}/refresh`, 'Check now')}</p>${fields(rows)}
<h2>Last checks on this instance</h2>${checkTimeline(source.activity.checksOf(panel))}${view ? brandingSection(view.snapshot) : ''}`;
}

/** What the panel's templates get now (`res.locals.branding` and `.license`); the logo as its address, never loaded. */
function brandingSection({ branding, license }: GuardSnapshot): string {
  // The colour is always #rrggbb (validated when the answer was read): safe as an SVG attribute.
  const swatch = `<svg width="14" height="14" aria-hidden="true"><rect width="14" height="14" rx="3" fill="${escapeHtml(branding.color)}"/></svg>`;
  const rows: [string, string][] = [
    ['Name', escapeHtml(branding.name)],
    ['Colour', `${swatch} ${escapeHtml(branding.color)}`],
    ['Logo', escapeHtml(branding.logoUrl ?? '—')],
    ['Subdomain', escapeHtml(branding.subdomain ?? '—')],
    ['Custom domain', escapeHtml(branding.customDomain ?? '—')],
    ['License status', escapeHtml(license.status ?? '—')],
    ['Billing', escapeHtml(license.billingType ?? '—')],
    ['Expires', `${escapeHtml(license.expiresAt ?? '—')}${license.daysLeft === null ? '' : ` (${license.daysLeft} days left)`}`],
    ['Expiry warning', license.expiryWarning === null ? '—' : `reached: ${license.expiryWarning} days`],
  ];
  return `<h2>Branding, as the templates get it</h2>${fields(rows)}`;
}

/** What the last check came to: the failure's code, or the verdict. */
function lastOutcome(status: LicenseStatus): string {
  if (status.lastCheckAt === null) return '';
  return status.lastError ?? (status.state === 'locked' ? 'inactive' : 'ok');
}

function duration(ms: number): string {
  if (ms <= 0) return '—';
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min`;
  if (ms < 172_800_000) return `${Math.round(ms / 3_600_000)} h`;
  return `${Math.round(ms / 86_400_000)} d`;
}

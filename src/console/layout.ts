// The console's page shell and small pieces: every value is escaped here or by the caller before
// it reaches HTML (titles and panel names come from uploads and the mother: untrusted).
import { escapeHtml } from '../serve/html.js';

export { escapeHtml };

/** What every page needs: where the console is mounted, the CSRF token, the CSP nonce. */
export interface PageContext {
  base: string;
  csrf: string;
  nonce: string;
  now: number;
  /** The sections this console has: no "Releases" without an outbox, no "Panels" without a guard. */
  sections: { panels: boolean; releases: boolean };
}

const STYLE = `
:root{--ink:#1f2937;--muted:#6b7280;--line:#e5e7eb;--bg:#f9fafb;--ok:#0f766e;--grace:#b45309;--locked:#b91c1c;--pending:#4b5563;--accent:#1d4ed8}
*{box-sizing:border-box}body{margin:0;font:14px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--ink);background:var(--bg)}
header{background:#111827;color:#fff;padding:12px 24px;display:flex;gap:24px;align-items:center}header strong{font-size:15px}
header a{color:#d1d5db;text-decoration:none}header a:hover,header a.here{color:#fff}
main{max-width:1100px;margin:0 auto;padding:24px}h1{font-size:20px;margin:0 0 16px}h2{font-size:16px;margin:24px 0 8px}
.cards{display:flex;gap:12px;flex-wrap:wrap}.card{background:#fff;border:1px solid var(--line);border-radius:8px;padding:12px 16px;min-width:120px}
.card b{display:block;font-size:22px}.card span{color:var(--muted)}
table{width:100%;border-collapse:collapse;background:#fff;border:1px solid var(--line);border-radius:8px;overflow:hidden}
th,td{text-align:left;padding:8px 12px;border-bottom:1px solid var(--line);vertical-align:top}th{background:#f3f4f6;font-weight:600;color:#374151}
tr:last-child td{border-bottom:0}a{color:var(--accent)}.muted{color:var(--muted)}
.state{display:inline-block;padding:1px 8px;border-radius:999px;font-size:12px;font-weight:600;color:#fff}
.state.active,.state.delivered{background:var(--ok)}.state.grace{background:var(--grace)}.state.locked,.state.dead{background:var(--locked)}.state.cancelled{background:var(--pending);opacity:.7}.state.pending{background:var(--pending)}
form.inline{display:inline}button{font:inherit;padding:6px 12px;border-radius:6px;border:1px solid var(--accent);background:var(--accent);color:#fff;cursor:pointer}
button.quiet{background:#fff;color:var(--accent)}.filters a{margin-right:12px}.filters a.here{font-weight:600;color:var(--ink);text-decoration:none}
dl{display:grid;grid-template-columns:200px 1fr;gap:6px 16px;background:#fff;border:1px solid var(--line);border-radius:8px;padding:16px;margin:0}dt{color:var(--muted)}dd{margin:0;overflow-wrap:anywhere}
pre{background:#fff;border:1px solid var(--line);border-radius:8px;padding:12px;overflow:auto;white-space:pre-wrap;overflow-wrap:anywhere}
figure{margin:0;background:#fff;border:1px solid var(--line);border-radius:8px;padding:12px}figcaption{color:var(--muted);font-size:12px}
svg .ok{fill:var(--ok)}svg .failed{fill:var(--locked)}svg .locked{fill:var(--grace)}svg .axis{stroke:var(--line)}
.notice{background:#ecfdf5;border:1px solid #a7f3d0;border-radius:8px;padding:8px 12px;margin-bottom:16px}
`;

/** A whole page: head with the styles (by CSP nonce), the navigation, and `body`. */
export function page(ctx: PageContext, title: string, here: 'panels' | 'releases', body: string): string {
  const nav = (path: string, label: string, name: string) => `<a href="${escapeHtml(ctx.base + path)}"${here === name ? ' class="here"' : ''}>${label}</a>`;
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${escapeHtml(title)} · License console</title><style nonce="${ctx.nonce}">${STYLE}</style></head>
<body><header><strong>License console</strong>${ctx.sections.panels ? nav('/', 'Panels', 'panels') : ''}${ctx.sections.releases ? nav('/releases', 'Releases', 'releases') : ''}</header><main>${body}</main></body></html>`;
}

/** A button that POSTs to `path` with the CSRF token. */
export function action(ctx: PageContext, path: string, label: string, fields: Record<string, string> = {}, quiet = false): string {
  const hidden = Object.entries({ ...fields, csrf: ctx.csrf })
    .map(([name, value]) => `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`)
    .join('');
  return `<form class="inline" method="post" action="${escapeHtml(ctx.base + path)}">${hidden}<button${quiet ? ' class="quiet"' : ''}>${escapeHtml(label)}</button></form>`;
}

export function stateBadge(state: string): string {
  return `<span class="state ${escapeHtml(state)}">${escapeHtml(state)}</span>`;
}

/** `ms` as a date and how long ago or ahead it is. */
export function when(ms: number | null | undefined, now: number): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '<span class="muted">—</span>';
  const delta = ms - now;
  const span = Math.abs(delta);
  const words =
    span < 60_000
      ? `${Math.round(span / 1000)} s`
      : span < 3_600_000
        ? `${Math.round(span / 60_000)} min`
        : span < 172_800_000
          ? `${Math.round(span / 3_600_000)} h`
          : `${Math.round(span / 86_400_000)} d`;
  return `<time datetime="${new Date(ms).toISOString()}" title="${new Date(ms).toISOString()}">${delta < 0 ? `${words} ago` : `in ${words}`}</time>`;
}

/** A definition list of already-escaped values. */
export function fields(rows: [string, string][]): string {
  return `<dl>${rows.map(([name, value]) => `<dt>${escapeHtml(name)}</dt><dd>${value}</dd>`).join('')}</dl>`;
}

/** A link to `path` under the console, its text escaped. */
export function link(ctx: PageContext, path: string, text: string): string {
  return `<a href="${escapeHtml(ctx.base + path)}">${escapeHtml(text)}</a>`;
}

// The built-in locked page: self-contained (inline CSS, nothing fetched but the panel's own logo).
import type { Branding } from './branding.js';
import { escapeHtml } from './html.js';
import type { SupportContact } from './public-message.js';

/** Picks black or white text for the best contrast on the brand colour (WCAG relative luminance). */
function textOn(hex: string): string {
  const channel = (i: number) => {
    const c = Number.parseInt(hex.slice(i, i + 2), 16) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  const luminance = 0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5);
  return luminance > 0.179 ? '#111111' : '#ffffff';
}

export interface LockPageInput {
  branding: Branding;
  /** The public message (never the operator's reason unless `publicMessage` chose to show it). */
  message: string;
  supportContact: SupportContact | undefined;
  /** Seconds until the next check, shown as a hint; the page also refreshes itself then. */
  retryAfterSeconds: number;
}

/**
 * Renders the page once per verdict. `branding.color` is already `#rrggbb` (validated), so it
 * is safe inside CSS; every text value is HTML-escaped.
 */
export function renderLockPage({ branding, message, supportContact, retryAfterSeconds }: LockPageInput): string {
  const name = escapeHtml(branding.name);
  const contact = supportContact
    ? `<p id="lock-contact">Need help? Contact <a href="${escapeHtml(supportContact.href)}">${escapeHtml(supportContact.text)}</a>.</p>\n`
    : '';
  const logo = branding.logoUrl ? `<img class="logo" src="${escapeHtml(branding.logoUrl)}" alt="" referrerpolicy="no-referrer">` : '';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<meta http-equiv="refresh" content="${Math.max(30, retryAfterSeconds)}">
<title>${name} is unavailable</title>
<style>
:root { --brand: ${branding.color}; --on-brand: ${textOn(branding.color)}; }
* { box-sizing: border-box; }
body { margin: 0; min-height: 100vh; display: grid; place-items: center; background: #f4f4f5; color: #18181b;
  font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
main { max-width: 32rem; margin: 1.5rem; background: #fff; border-radius: 12px; overflow: hidden; box-shadow: 0 10px 30px rgba(0,0,0,.08); }
header { background: var(--brand); color: var(--on-brand); padding: 1.25rem 1.5rem; display: flex; align-items: center; gap: .75rem; }
.logo { height: 2.5rem; max-width: 8rem; object-fit: contain; }
h1 { font-size: 1.25rem; margin: 0; }
section { padding: 1.5rem; }
.message { font-weight: 600; background: #fafafa; border-left: 4px solid var(--brand); padding: .75rem 1rem; margin: 1rem 0; overflow-wrap: anywhere; }
small { color: #52525b; }
a { color: inherit; }
</style>
</head>
<body>
<main>
<header>${logo}<h1>${name}</h1></header>
<section>
<p class="message" id="lock-message">${escapeHtml(message)}</p>
${contact}<p><small>This page checks back by itself and shows the panel again as soon as it is available.</small></p>
</section>
</main>
</body>
</html>
`;
}

/** A CSP that lets the lock page load nothing but its inline style and the panel's logo. */
export function lockPageCsp(branding: Branding): string {
  const logoOrigin = branding.logoUrl ? new URL(branding.logoUrl).origin : "'none'";
  return `default-src 'none'; style-src 'unsafe-inline'; img-src ${logoOrigin}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`;
}

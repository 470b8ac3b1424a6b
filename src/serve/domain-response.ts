// The answer to a request made for a host the license does not name: 421 (enforce) or, for a
// browser under `domains: 'redirect'`, 308 to the licensed host with the same path and query.
import type { Request, Response } from 'express';
import type { Branding } from './branding.js';
import { escapeHtml } from './html.js';
import { wantsJson } from './lock-response.js';
import type { ServeConfig } from './serve-config.js';

const MESSAGE = 'This panel is not served at this address.';
const JSON_BODY = Buffer.from(`${JSON.stringify({ ok: false, error: 'MISDIRECTED', message: MESSAGE })}\n`, 'utf8');
const CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/** One page per verdict: it names the panel and links to its licensed address, never the request's host. */
const pages = new WeakMap<Branding, Buffer>();

function pageFor(branding: Branding, target: string): Buffer {
  let page = pages.get(branding);
  if (page === undefined) {
    const name = escapeHtml(branding.name);
    const href = escapeHtml(`https://${target}/`);
    page = Buffer.from(
      `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><meta name="robots" content="noindex">
<title>${name}: wrong address</title>
<style>body{margin:0;min-height:100vh;display:grid;place-items:center;background:#f4f4f5;color:#18181b;font:16px/1.5 system-ui,sans-serif}main{max-width:32rem;margin:1.5rem;background:#fff;border-radius:12px;padding:1.5rem;border-top:6px solid ${branding.color}}</style>
</head>
<body><main><h1>${name}</h1><p id="misdirected">${escapeHtml(MESSAGE)}</p><p>Its address is <a href="${href}">${escapeHtml(target)}</a>.</p></main></body>
</html>
`,
      'utf8',
    );
    pages.set(branding, page);
  }
  return page;
}

export function sendDomainResponse(req: Request, res: Response, config: ServeConfig, branding: Branding, licensed: string[]): void {
  const target = licensed[0] as string;
  const json = wantsJson(req, config.apiPrefix);
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Vary', 'Accept, Host');
  // Redirect only browsers navigating (GET/HEAD): an API client or a form post would silently
  // lose its body or method semantics on another origin.
  if (config.domains.mode === 'redirect' && !json && (req.method === 'GET' || req.method === 'HEAD')) {
    // The path is the request's own; the host is the licensed one, so this cannot redirect off-site.
    const path = req.originalUrl.startsWith('/') ? req.originalUrl : `/${req.originalUrl}`;
    // `req.protocol` may come from a trusted proxy's X-Forwarded-Proto: only its two sane values.
    const scheme = req.protocol === 'http' ? 'http' : 'https';
    res.status(308).setHeader('Location', `${scheme}://${target}${path}`);
    res.end();
    return;
  }
  res.status(421);
  const body = json ? JSON_BODY : pageFor(branding, target);
  res.setHeader('Content-Type', json ? 'application/json; charset=utf-8' : 'text/html; charset=utf-8');
  if (!json) res.setHeader('Content-Security-Policy', CSP);
  res.setHeader('Content-Length', String(body.byteLength));
  res.end(req.method === 'HEAD' ? undefined : body);
}

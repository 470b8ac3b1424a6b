// What keeps the console to its operators: `authorize` on every request (nothing is said to anyone
// else), a CSRF token on every action (a double-submit cookie, SameSite=Strict, plus the browser's
// own word on where a POST came from), and headers that let a page load nothing but itself.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';

/** Who may use the console: true lets the request in; false answers 401; 403 for a signed-in user who may not. */
export type Authorize = (req: Request) => boolean | 401 | 403 | Promise<boolean | 401 | 403>;

const COOKIE = 'plg_console_csrf';
/** On https the cookie is a `__Host-` one: no other host (a sibling subdomain) can set or shadow it. */
const cookieName = (req: Request) => (req.secure ? `__Host-${COOKIE}` : COOKIE);
const TOKEN = /^[A-Za-z0-9_-]{43}$/;

/** Answers 401/403 with nothing more, unless `authorize` lets the request in. */
export function authorizing(authorize: Authorize) {
  return (req: Request, res: Response, next: NextFunction) => {
    Promise.resolve()
      .then(() => authorize(req))
      .then(
        (verdict) => {
          if (verdict === true) return next();
          res
            .status(verdict === 403 ? 403 : 401)
            .type('text/plain')
            .send(verdict === 403 ? 'Forbidden' : 'Not authorised');
        },
        // A failing authorize() lets nobody in, and says nothing of why.
        () => res.status(500).type('text/plain').send('The console could not check who you are.'),
      );
  };
}

/** The request's CSRF token, set as a cookie the first time (one per browser, for the console's path). */
export function csrfToken(req: Request, res: Response): string {
  const known = cookiesOf(req, cookieName(req)).find((value) => TOKEN.test(value));
  if (known) return known;
  const token = randomBytes(32).toString('base64url');
  // A __Host- cookie must have Path=/; on http it is scoped to the console's path.
  const scope = req.secure ? 'Path=/; Secure' : `Path=${req.baseUrl || '/'}`;
  res.append('Set-Cookie', `${cookieName(req)}=${token}; ${scope}; HttpOnly; SameSite=Strict`);
  return token;
}

/** Whether a POST carries the browser's token and comes from the console's own origin. */
export function validAction(req: Request): boolean {
  const sent = (req.body as { csrf?: unknown } | undefined)?.csrf;
  if (typeof sent !== 'string' || !TOKEN.test(sent)) return false;
  // Any cookie of the name may match: one tossed in by a sibling host (same name, longer path,
  // sent first) must not lock the operator out of every action.
  const matches = cookiesOf(req, cookieName(req)).filter((cookie) => TOKEN.test(cookie) && timingSafeEqual(Buffer.from(cookie), Buffer.from(sent)));
  if (matches.length === 0) return false;
  // Browsers say where a request came from; a page of another site is refused even with a token.
  // Sec-Fetch-Site is theirs alone to set; older browsers send Origin (never `null` for our pages).
  const site = req.get('sec-fetch-site');
  if (site !== undefined) return site === 'same-origin';
  const origin = req.get('origin');
  return origin === undefined || sameOrigin(origin, req);
}

/** `Origin: null` (a sandboxed frame, a data: page) is no origin of ours. */
function sameOrigin(origin: string, req: Request): boolean {
  try {
    return new URL(origin).host === req.get('host');
  } catch {
    return false;
  }
}

/** Every value of the cookie `name` the request carries (a browser may send several). */
function cookiesOf(req: Request, name: string): string[] {
  const values: string[] = [];
  for (const part of (req.get('cookie') ?? '').split(';')) {
    const [key, ...value] = part.trim().split('=');
    if (key === name) values.push(value.join('='));
  }
  return values;
}

/** Headers of every console page: nothing loads but the page itself (styles by nonce), nothing is cached or framed. */
export function pageHeaders(res: Response): string {
  const nonce = randomBytes(16).toString('base64');
  res.set({
    'Content-Security-Policy': `default-src 'none'; style-src 'nonce-${nonce}'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
    'Cache-Control': 'no-store',
    // Not no-referrer: under it a browser sends `Origin: null` with the console's own forms.
    'Referrer-Policy': 'same-origin',
    'X-Content-Type-Options': 'nosniff',
    'X-Frame-Options': 'DENY',
  });
  return nonce;
}

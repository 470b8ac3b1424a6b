// What keeps the console to its operators: `authorize` on every request (nothing is said to anyone
// else), a CSRF token on every action (a double-submit cookie, SameSite=Strict, plus the browser's
// own word on where a POST came from), and headers that let a page load nothing but itself.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';

/** Who may use the console: true lets the request in; false answers 401; 403 for a signed-in user who may not. */
export type Authorize = (req: Request) => boolean | 401 | 403 | Promise<boolean | 401 | 403>;

const COOKIE = 'plg_console_csrf';
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
  const known = cookieOf(req, COOKIE);
  if (known && TOKEN.test(known)) return known;
  const token = randomBytes(32).toString('base64url');
  const path = req.baseUrl || '/';
  res.append('Set-Cookie', `${COOKIE}=${token}; Path=${path}; HttpOnly; SameSite=Strict${req.secure ? '; Secure' : ''}`);
  return token;
}

/** Whether a POST carries the browser's token and comes from the console's own origin. */
export function validAction(req: Request): boolean {
  const cookie = cookieOf(req, COOKIE);
  const sent = (req.body as { csrf?: unknown } | undefined)?.csrf;
  if (!cookie || typeof sent !== 'string' || !TOKEN.test(cookie) || !TOKEN.test(sent)) return false;
  if (!timingSafeEqual(Buffer.from(cookie), Buffer.from(sent))) return false;
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

function cookieOf(req: Request, name: string): string | undefined {
  for (const part of (req.get('cookie') ?? '').split(';')) {
    const [key, ...value] = part.trim().split('=');
    if (key === name) return value.join('=');
  }
  return undefined;
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

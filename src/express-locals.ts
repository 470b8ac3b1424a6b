// Opt-in typing of Express's res.locals: `import 'panel-license-guard/express-locals'` once.
//
// Opt-in because it declares `res.locals.branding` and `res.locals.license` on every route of the
// app, including routes mounted before the guard, where they are not set. Apps that mount the
// guard first (the usual case) get typed templates and handlers for free with one import.
import type { Branding } from './serve/branding.js';
import type { LicenseLocals } from './serve/snapshot.js';

declare global {
  namespace Express {
    interface Locals {
      /** The panel's cleaned branding, set by licenseGuard() on every request it sees. */
      branding: Branding;
      /**
       * The license as templates see it, set by licenseGuard() on every request it sees: show a
       * renewal banner while `expiryWarning` is not null (from `expiryWarnings` days before `expires_at`).
       */
      license: LicenseLocals;
      /**
       * With `panels`: your id of the panel serving this request, when the resolver returned one
       * (`panel`); pass it to `outbox.enqueue(release, { panel: res.locals.panel })`.
       */
      panel?: string | undefined;
    }
  }
}

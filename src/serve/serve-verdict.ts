// What a request gets from a known verdict: the locals, then the app, a domain refusal or the
// lock response. Shared by the single-panel guard and the per-host panels of `panels` mode.
import type { NextFunction, Request, Response } from 'express';
import { sendDomainResponse } from './domain-response.js';
import { checkDomain } from './licensed-domains.js';
import { sendLockResponse } from './lock-response.js';
import type { ServeConfig } from './serve-config.js';
import type { GuardSnapshot } from './snapshot.js';

export interface ServeHooks {
  /** `domains` is on but the license names no domain to compare with (say it once). */
  onUncheckedDomain(): void;
  /** A host the license does not name was refused (multi-panel mode reports the mapping). */
  onMisdirected?(req: Request, licensed: string[]): void;
}

/** Sets `res.locals.branding` and `.license`; the caller has already dealt with a pending first verdict. */
export function serveVerdict(req: Request, res: Response, next: NextFunction, config: ServeConfig, snapshot: GuardSnapshot, hooks: ServeHooks): void {
  res.locals.branding = snapshot.branding;
  res.locals.license = snapshot.license;
  if (snapshot.lock === undefined) {
    const domain = checkDomain(req, config.domains, snapshot.branding);
    if (domain.kind === 'misdirected' && !config.isAllowed(req)) {
      hooks.onMisdirected?.(req, domain.licensed);
      sendDomainResponse(req, res, config, snapshot.branding, domain.licensed);
      return;
    }
    if (domain.kind === 'unchecked') hooks.onUncheckedDomain();
    next();
    return;
  }
  if (config.isAllowed(req)) {
    next();
    return;
  }
  sendLockResponse(req, res, next, config, snapshot);
}

/** Says that domains cannot be enforced for a license naming none (callers say it once). */
export function warnUncheckedDomain(config: ServeConfig, panel: string | undefined): void {
  const which = panel === undefined ? 'the license' : `the license of panel ${panel}`;
  config.logger.warn(
    `panel-license-guard: domains is '${config.domains.mode}', but ${which} names no domain to compare with (no custom_domain${config.domains.subdomainBase ? ' and no subdomain' : ', and no `subdomainBase` for its subdomain'}); requests are served from any host.`,
    { event: 'domains_unchecked', panel: panel ?? (config.panelKey || undefined) },
  );
}

/** Says once that domains cannot be enforced for a license naming none. */
export function uncheckedDomainWarning(config: ServeConfig, panel: string | undefined): () => void {
  let warned = false;
  return () => {
    if (warned) return;
    warned = true;
    warnUncheckedDomain(config, panel);
  };
}

// Licensed domains: the hosts the mother's record licenses this panel for, and what to do with a
// request made for any other host (`domains: 'enforce' | 'redirect'`).
import type { Request } from 'express';
import { type OptionProblems, optionError, shown } from '../options.js';
import type { Branding } from './branding.js';
import { canonicalHost, requestHost } from './request-host.js';

export type DomainsMode = 'off' | 'enforce' | 'redirect';

export interface DomainPolicy {
  mode: DomainsMode;
  /** `<subdomain>.<subdomainBase>` is licensed when the record names a subdomain. */
  subdomainBase: string | undefined;
  /** Hosts always served (development, health checks through an internal name). */
  allowHosts: ReadonlySet<string>;
}

export const DOMAINS_OFF: DomainPolicy = { mode: 'off', subdomainBase: undefined, allowHosts: new Set() };

export interface DomainOptions {
  domains?: DomainsMode;
  subdomainBase?: string;
  allowHosts?: string[];
}

export function resolveDomainPolicy(options: DomainOptions, problems: OptionProblems): DomainPolicy {
  const mode = options.domains ?? 'off';
  if (mode !== 'off' && mode !== 'enforce' && mode !== 'redirect')
    problems.add(optionError('domains', `must be 'off', 'enforce' or 'redirect', received ${shown(mode)}`, "Use 'enforce' to refuse other hosts."));
  let subdomainBase: string | undefined;
  if (options.subdomainBase !== undefined) {
    subdomainBase = canonicalHost(options.subdomainBase);
    if (subdomainBase === undefined)
      problems.add(optionError('subdomainBase', `must be a host name, received ${shown(options.subdomainBase)}`, 'Pass e.g. "mother-panels.com".'));
  }
  const allowHosts = new Set<string>();
  const given = options.allowHosts ?? [];
  if (!Array.isArray(given)) problems.add(optionError('allowHosts', 'must be an array of host names', 'Pass e.g. ["localhost", "127.0.0.1"].'));
  else
    for (const host of given) {
      const canonical = canonicalHost(host);
      if (canonical === undefined)
        problems.add(optionError('allowHosts', `holds ${shown(host)}, which is not a host name (no scheme, port or path)`, 'Pass e.g. ["localhost"].'));
      else allowHosts.add(canonical);
    }
  if (mode === 'off' && (options.subdomainBase !== undefined || options.allowHosts !== undefined))
    problems.add(optionError('domains', "is 'off', so `subdomainBase` and `allowHosts` do nothing", "Set `domains: 'enforce'` (or 'redirect'), or drop them."));
  return { mode: mode as DomainsMode, subdomainBase, allowHosts };
}

/** Per verdict (branding objects are frozen, one per verdict): computed once, not per request. */
const licensedOf = new WeakMap<Branding, string[]>();

/** The hosts a verdict licenses, the preferred first: the custom domain, then the subdomain. */
export function licensedHosts(branding: Branding, subdomainBase: string | undefined): string[] {
  let hosts = licensedOf.get(branding);
  if (hosts === undefined) {
    hosts = [];
    if (branding.customDomain) hosts.push(branding.customDomain);
    if (branding.subdomain && subdomainBase) hosts.push(`${branding.subdomain}.${subdomainBase}`);
    licensedOf.set(branding, hosts);
  }
  return hosts;
}

export type DomainVerdict =
  | { kind: 'serve' }
  /** The record names no domain this guard can check against: served, and said once. */
  | { kind: 'unchecked' }
  | { kind: 'misdirected'; licensed: string[] };

const SERVE: DomainVerdict = { kind: 'serve' };
const UNCHECKED: DomainVerdict = { kind: 'unchecked' };

/** Whether `req` was made for a host this verdict licenses. A cache read and a string compare. */
export function checkDomain(req: Request, policy: DomainPolicy, branding: Branding): DomainVerdict {
  if (policy.mode === 'off') return SERVE;
  const host = requestHost(req);
  if (host !== undefined && policy.allowHosts.has(host)) return SERVE;
  const licensed = licensedHosts(branding, policy.subdomainBase);
  if (licensed.length === 0) return UNCHECKED;
  return host !== undefined && licensed.includes(host) ? SERVE : { kind: 'misdirected', licensed };
}

// The guard's public face: the middleware with its methods and the events it emits. Apart from
// licenseGuard() so that both guards (one panel, panels by host) implement it without a circle.
import type { RequestHandler } from 'express';
import type { LicenseGuardError } from '../errors.js';
import type { LicenseState } from '../serve/license-state.js';
import type { ExpiringEvent } from './expiry-warnings.js';
import type { HealthHandlerOptions } from './health-handler.js';
import type { ChangeEvent } from './license-monitor.js';
import type { LicenseStatus } from './license-status.js';
import type { StatusHandlerOptions } from './status-handler.js';

export interface GuardEvents {
  change: (event: ChangeEvent) => void;
  lock: (event: ChangeEvent) => void;
  unlock: (event: ChangeEvent) => void;
  /** The license reached one of `expiryWarnings` (days before `expires_at`): once per threshold per panel. */
  expiring: (event: ExpiringEvent) => void;
  /** Everything the guard reports: switch on `error.code` (see LicenseGuardError). */
  error: (error: LicenseGuardError) => void;
}

export interface LicenseGuard extends RequestHandler {
  /** Restores `stateFile`, runs the first check and starts the schedule. Resolves with the state. */
  start(): Promise<LicenseState>;
  /** Checks now; concurrent calls share one request. Resolves with the state afterwards. With `panels`: the panel at `host`. */
  refresh(host?: string): Promise<LicenseState>;
  /**
   * Stops the schedule and all timers so the process can exit, at once. The promise resolves when
   * a `stateFile` write already under way has finished (await it before `process.exit()`).
   */
  close(): Promise<void>;
  readonly state: LicenseState;
  /** With `panels`: the status of the panel at `host` (undefined for a host not known yet). */
  status(host?: string): LicenseStatus;
  /**
   * A handler answering the status as JSON: 200 while the panel serves (active, grace), 503 while
   * it does not (locked, pending), for load balancers and operator pages. With `panels`: the panel
   * of the request's host (404 for an unknown host).
   */
  statusHandler(options?: StatusHandlerOptions): RequestHandler;
  /**
   * A handler for the load balancer: 200 while this instance runs, whatever any panel's license
   * says (a locked panel is the instance doing its job), 503 once closed; the body counts the
   * panels in memory by state. It reads no host: with `panels`, mount it before the guard (an IP
   * or an internal name is no panel's host).
   */
  healthHandler(options?: HealthHandlerOptions): RequestHandler;
  /**
   * With `panels`: the hosts this instance knows for a panel, by its id (as events and status
   * name it) or by your id from the resolver; at most 100. Always empty for a single panel.
   */
  hostsOf(panel: string): string[];
  on<E extends keyof GuardEvents>(event: E, listener: GuardEvents[E]): LicenseGuard;
  off<E extends keyof GuardEvents>(event: E, listener: GuardEvents[E]): LicenseGuard;
}

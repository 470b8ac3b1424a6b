// What one panel of `panels` mode tells the guard's listeners: its errors, named with its id and
// hosts, and the hosts it was asked for that its license does not name (once each, bounded).
import type { EventEmitter } from 'node:events';
import type { Request } from 'express';
import { PanelHostError } from '../../errors.js';
import { describeError } from '../../logger.js';
import { requestHost } from '../../serve/request-host.js';
import type { GuardConfig } from '../guard-options.js';
import type { LicenseMonitor } from '../license-monitor.js';

/** The hosts a panel refused as not licensed, reported once each (bounded). */
const MAX_REPORTED_HOSTS = 32;

/**
 * The guard's 'error' listeners hear of this panel's errors (with its id); without any, returns
 * false and the monitor logs them, its fields naming the panel.
 */
export function relayError(
  context: { events: EventEmitter; hostsOf: (panel: string) => string[] },
  logger: GuardConfig['logger'],
  panel: string,
  error: unknown,
): boolean {
  const { events, hostsOf } = context;
  if (events.listenerCount('error') === 0) return false;
  try {
    const tag = { panel, hosts: hostsOf(panel) };
    events.emit('error', Object.assign(error instanceof Error ? error : new Error(describeError(error)), tag));
  } catch (thrown) {
    logger.error(`panel-license-guard: an 'error' listener threw: ${describeError(thrown)}`, { event: 'listener_threw', listener: 'error', panel });
  }
  return true;
}

/** A request for the panel at a host its license does not name: refused, and reported once per host. */
export function reportMisdirected(monitor: LicenseMonitor, panel: string, reported: Set<string>, req: Request, licensed: string[]): void {
  const host = requestHost(req) ?? '(not a host name)';
  if (reported.has(host) || reported.size >= MAX_REPORTED_HOSTS) return;
  reported.add(host);
  const message = `Panel ${panel} was asked for at ${host}, which its license does not name (licensed: ${licensed.join(', ')}); refused.`;
  monitor.report(new PanelHostError('HOST_NOT_LICENSED', message, { host }), { event: 'host_not_licensed', host });
}

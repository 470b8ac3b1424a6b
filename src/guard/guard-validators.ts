// Validators of single licenseGuard() options: each throws a TypeError that names the option and the fix.
import cron from 'node-cron';
import { isolateLogger, type Logger, type StructuredLogger } from '../logger.js';
import { optionError, positiveInteger, shown } from '../options.js';
import { safeColor } from '../serve/branding.js';

export function optionalString(option: string, value: unknown, fix: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.trim() === '') throw optionError(option, `must be a non-empty string, received ${shown(value)}`, fix);
  return value;
}

export function validSchedule(schedule: unknown): string {
  if (typeof schedule !== 'string' || !cron.validate(schedule)) {
    throw optionError(
      'schedule',
      `is not a valid cron expression (received ${shown(schedule)})`,
      'Use five or six cron fields, e.g. "*/5 * * * *" for every 5 minutes.',
    );
  }
  return schedule;
}

export function validLockStatus(value: unknown): number {
  const lockStatus = positiveInteger('lockStatus', value, 503);
  if (lockStatus < 400 || lockStatus > 599)
    throw optionError('lockStatus', `must be an HTTP error status from 400 to 599, received ${lockStatus}`, 'Use 503 (the default) or 403.');
  return lockStatus;
}

export function validColor(value: unknown): string {
  const color = value ?? '#334155';
  if (typeof color !== 'string' || safeColor(color, '') !== color.toLowerCase())
    throw optionError('defaultColor', `must be #rrggbb, received ${shown(color)}`, 'Use a colour such as "#334155".');
  return color.toLowerCase();
}

export function validApiPrefix(value: unknown): string | undefined {
  const apiPrefix = optionalString('apiPrefix', value, 'Use a path such as "/api".');
  if (apiPrefix !== undefined && !apiPrefix.startsWith('/'))
    throw optionError('apiPrefix', `must start with "/" (received "${apiPrefix}")`, 'Use a path such as "/api".');
  return apiPrefix?.replace(/\/+$/, '');
}

export function validLogger(logger: unknown): StructuredLogger {
  if (logger === undefined) return isolateLogger(console);
  const candidate = logger as Partial<Logger>;
  if (typeof candidate.warn !== 'function' || typeof candidate.error !== 'function') {
    throw optionError('logger', 'must have warn() and error() methods', 'Pass console, a pino/winston logger, or { warn() {}, error() {} }.');
  }
  return isolateLogger(candidate as Logger);
}

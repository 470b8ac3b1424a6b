// Logging through the host's logger: structured fields that pino, winston and console each show
// whole, and isolation, so a logger that throws never changes a verdict or escapes a check.

/**
 * A logger the guard and the outbox accept as is: `console`, a pino or winston logger (or a
 * child of one), or any object with `warn()` and `error()`.
 */
export interface Logger {
  warn(...args: never[]): unknown;
  error(...args: never[]): unknown;
}

/** The fields every line carries; `event` names what happened in snake_case (e.g. `check_failed`). */
export interface LogFields {
  event: string;
  /** Error code (`TIMEOUT`, `UNAUTHORIZED`…), never a message from the mother. */
  code?: string | undefined;
  /** License state after the event. */
  state?: string | undefined;
  /** The panel's id (derived from its key, never the key itself). */
  panel?: string | undefined;
  /** Attempt number of a check or a delivery (1 for the first). */
  attempt?: number | undefined;
  [field: string]: string | number | boolean | undefined;
}

/** What our own code calls: a message, and the fields that say the same for machines. */
export interface StructuredLogger {
  warn(message: string, fields: LogFields): void;
  error(message: string, fields: LogFields): void;
}

type Level = 'warn' | 'error';
type Emit = (level: Level, message: string, fields: Record<string, unknown>) => unknown;

/**
 * How to hand one line to this logger. pino takes `(fields, message)`; winston takes one object
 * with `message` (a second argument is dropped when the text has a `%`); console and anything else
 * take `(message, fields)`, with `%` doubled for console so text cannot act as a format string.
 */
function emitterFor(logger: Logger): Emit {
  const target = logger as unknown as Record<Level, (...args: unknown[]) => unknown> & Record<string | symbol, unknown>;
  if (Symbol.for('pino.serializers') in target) return (level, message, fields) => target[level](fields, message);
  if (typeof target.log === 'function' && typeof target.add === 'function' && typeof target.configure === 'function')
    return (level, message, fields) => target[level]({ ...fields, message });
  if (logger === globalThis.console) return (level, message, fields) => target[level](message.replaceAll('%', '%%'), fields);
  return (level, message, fields) => target[level](message, fields);
}

/**
 * Wraps `logger` so that its methods never throw. The guard logs from inside state transitions
 * and check handlers; before this wrapper, a throwing `warn` skipped the move to `locked` after
 * grace ran out (the guard failed open) and made `start()` reject.
 */
export function isolateLogger(logger: Logger): StructuredLogger {
  const emit = emitterFor(logger);
  const call = (level: Level, message: string, fields: LogFields) => {
    try {
      // A fresh object each time: winston adds properties to the object it is given.
      const clean = Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
      const result = emit(level, message, clean);
      // An async logger's rejection would otherwise surface as an unhandled rejection.
      if (typeof (result as Promise<unknown> | undefined)?.catch === 'function') (result as Promise<unknown>).catch(() => {});
    } catch {
      // Nowhere left to report it: dropping one log line is the only safe choice.
    }
  };
  return {
    warn: (message, fields) => call('warn', message, fields),
    error: (message, fields) => call('error', message, fields),
  };
}

const PREFIX = 'panel-license-guard: ';

/** The package's name in front of a line, once. */
export function withPrefix(text: string): string {
  return text.startsWith(PREFIX) ? text : PREFIX + text;
}

/**
 * A message for anything thrown, and never a throw itself: user code may throw values whose
 * `String()` throws (`Object.create(null)`), and that must not escape the code isolating it.
 */
export function describeError(error: unknown): string {
  try {
    if (error instanceof Error) return String(error.message);
    return typeof error === 'string' ? error : String(error);
  } catch {
    return 'a thrown value that cannot be shown';
  }
}

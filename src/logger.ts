// Isolates the host's logger: a logger that throws must never change a verdict or escape a check.

/** What the guard and the outbox log through. `console`, pino and winston loggers fit. */
export interface Logger {
  warn(message: string, ...details: unknown[]): void;
  error(message: string, ...details: unknown[]): void;
}

/**
 * Wraps `logger` so that its methods never throw. The guard logs from inside state transitions
 * and check handlers; before this wrapper, a throwing `warn` skipped the move to `locked` after
 * grace ran out (the guard failed open) and made `start()` reject.
 */
export function isolateLogger(logger: Logger): Logger {
  const call = (method: 'warn' | 'error', message: string, details: unknown[]) => {
    try {
      const result: unknown = logger[method](message, ...details);
      // An async logger's rejection would otherwise surface as an unhandled rejection.
      if (typeof (result as Promise<unknown> | undefined)?.catch === 'function') (result as Promise<unknown>).catch(() => {});
    } catch {
      // Nowhere left to report it: dropping one log line is the only safe choice.
    }
  };
  return {
    warn: (message, ...details) => call('warn', message, details),
    error: (message, ...details) => call('error', message, details),
  };
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

// Injection tokens of the license module. The package's types are interfaces (a guard is a
// function with methods, not a class), so Nest cannot inject them by type: inject by these tokens.
export const LICENSE_OPTIONS = Symbol('LICENSE_OPTIONS');
export const LICENSE_GUARD = Symbol('LICENSE_GUARD');
export const RELEASE_OUTBOX = Symbol('RELEASE_OUTBOX');
export const LICENSE_CONSOLE = Symbol('LICENSE_CONSOLE');

export interface LicenseModuleOptions {
  /** The mother's partner API, e.g. https://mother.example/api/partner. */
  baseUrl: string;
  apiKey: string;
  apiSecret: string;
  /** SQLite file of the release outbox (needs better-sqlite3); ':memory:' in tests. */
  outboxFile: string;
  /** Operators send `Authorization: Bearer <opsToken>` to use the console. */
  opsToken: string;
  /** An e-mail address or URL, shown on the lock page. */
  supportContact: string;
}

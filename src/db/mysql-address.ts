// Where a mysql2 pool points, safe to show (never a password): for the outbox store's and the
// license store's messages.

/** `host:port/database` as mysql2 resolved the pool's settings (it parses the URI itself); never the password. */
export function mysqlPoolAddress(pool: unknown): string {
  const settings = (pool as { pool?: { config?: { connectionConfig?: { host?: string; port?: number; database?: string } } } } | null)?.pool?.config
    ?.connectionConfig;
  return `${settings?.host ?? 'localhost'}:${settings?.port ?? 3306}/${settings?.database ?? '(no database)'}`;
}

// A PostgreSQL connection URL read as its writer meant it, or not at all. `postgres://user:2024/
// Winter@host/db` parses as host `user`, port 2024 and a path holding the password: anything that
// shows such a URL (the CLI, an error message) would print the password. So a URL counts only
// when its host is what follows its last `@`; otherwise nothing of it is shown.

/** The URL when it is well formed (`postgres://`, host after the last `@`, no fragment); else undefined. */
export function wellFormedPostgresUrl(location: string): URL | undefined {
  const text = location.trim();
  if (!/^postgres(ql)?:\/\/[^/]/i.test(text)) return undefined;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  if (url.hostname === '' || url.hash !== '') return undefined;
  const at = text.lastIndexOf('@');
  if (at === -1) return url;
  const afterAt = text.slice(at + 1).split(/[/?#]/)[0] ?? '';
  return afterAt.toLowerCase() === url.host.toLowerCase() && url.username !== '' ? url : undefined;
}

/**
 * Looks like a URL or carries what looks like credentials (`scheme:` anywhere, `://`, or `:…@`),
 * whatever comes before it (quotes from an env file, `<…>`, invisible characters): never a file
 * path, and never to be shown unless well formed.
 */
export function looksLikeUrl(location: string): boolean {
  return /[a-z][a-z0-9+.-]+:\/\/|postgres(ql)?:|:[^@]*@/i.test(location);
}

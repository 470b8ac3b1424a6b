// Whether the real services answer: shared by the benchmarks and the tests (test/services.ts).
import { Socket } from 'node:net';

/** True when something answers a Redis PING at `url` within a second (NOAUTH counts: it is Redis). */
export function redisAnswers(url) {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('error', () => done(false));
    socket.connect(Number(port || 6379), hostname.replace(/^\[|\]$/g, ''), () => socket.write('PING\r\n'));
    socket.once('data', (data) => done(data.toString().startsWith('+PONG') || data.toString().startsWith('-NOAUTH')));
  });
}

/** True when PostgreSQL at `url` accepts a connection and a query within two seconds. */
export async function postgresAnswers(url) {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

/** True when MySQL or MariaDB at `url` accepts a connection and a query within two seconds. */
export async function mysqlAnswers(url) {
  const { default: mysql } = await import('mysql2/promise');
  let connection;
  try {
    connection = await mysql.createConnection({ uri: url, connectTimeout: 2000 });
    await connection.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await connection?.end().catch(() => {});
  }
}

// A TCP proxy to a real server that a test can cut (every connection dropped, new ones refused)
// and heal: a database outage for one test's connections, the shared server left running.
import { createConnection, createServer, type Socket } from 'node:net';

export interface CuttableProxy {
  /** `host:port` to connect to instead of the server. */
  readonly address: string;
  readonly port: number;
  cut(): void;
  heal(): void;
  close(): Promise<void>;
}

export async function cuttableProxy(host: string, port: number): Promise<CuttableProxy> {
  const sockets = new Set<Socket>();
  let open = true;
  const server = createServer((client) => {
    if (!open) return void client.destroy();
    const upstream = createConnection(port, host);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
    }
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const own = (server.address() as { port: number }).port;
  return {
    address: `127.0.0.1:${own}`,
    port: own,
    cut() {
      open = false;
      for (const socket of sockets) socket.destroy();
    },
    heal() {
      open = true;
    },
    async close() {
      open = false;
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

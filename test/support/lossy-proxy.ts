// A TCP proxy in front of PostgreSQL or MySQL that loses chosen answers: the statement reaches the
// server and commits, then the connection drops before its answer reaches the client.
import { connect, createServer, type Server, type Socket } from 'node:net';

/** Which statement's answer to lose; `sent` is what the client wrote (one or more whole messages). */
export type LoseAnswer = (sent: Buffer) => boolean;

export interface LossyProxy {
  /** The proxy's URL: the server's, with the proxy's port. */
  url: string;
  /** Answers lost so far. */
  lost(): number;
  close(): Promise<void>;
}

/**
 * The end of a statement's answer: PostgreSQL's ReadyForQuery ('Z'), which comes after the
 * commit of an implicit transaction; MySQL answers an UPDATE with one packet, after its commit.
 * Every message of the answer is read first, so the statement has surely run to its end.
 */
type AnswerEnded = (received: Buffer) => boolean;

const postgresAnswerEnded: AnswerEnded = (received) => {
  // Server messages: a type byte, then a 4-byte length that counts itself.
  for (let at = 0; at + 5 <= received.length; at += 1 + received.readUInt32BE(at + 1)) if (received[at] === 0x5a) return true;
  return false;
};
const mysqlAnswerEnded: AnswerEnded = (received) => received.length >= 4 && received.length >= 4 + received.readUIntLE(0, 3);

/**
 * Starts a proxy to `server` (a postgres:// or mysql:// URL). Once the client writes a statement
 * `lose` picks, the server's whole answer to it is held back and both connections are destroyed,
 * as when a connection breaks after the commit. Other traffic passes untouched.
 */
export async function lossyProxy(server: string, lose: LoseAnswer): Promise<LossyProxy> {
  const target = new URL(server);
  const answerEnded = target.protocol.startsWith('postgres') ? postgresAnswerEnded : mysqlAnswerEnded;
  let lost = 0;
  const sockets = new Set<Socket>();
  const proxy: Server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    let held: Buffer | undefined;
    client.on('data', (sent) => {
      if (held === undefined && lose(sent)) held = Buffer.alloc(0);
      upstream.write(sent);
    });
    upstream.on('data', (received) => {
      if (held === undefined) return void client.write(received);
      held = Buffer.concat([held, received]);
      if (!answerEnded(held)) return;
      lost++;
      client.destroy();
      upstream.destroy();
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const url = new URL(server);
  url.hostname = '127.0.0.1';
  url.port = String((proxy.address() as { port: number }).port);
  return {
    url: url.toString(),
    lost: () => lost,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        proxy.close(() => resolve());
      }),
  };
}

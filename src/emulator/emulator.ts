// An emulator of the mother platform: the partner API of the contract, on 127.0.0.1, with faults.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type Request, type Response } from 'express';
import { OptionProblems, optionError, optionNames, positiveInteger, rejectUnknownOptions, shown } from '../options.js';
import { verifySignature } from '../signing.js';
import { mountAdminRoutes } from './admin.js';
import { appliesDelay, applyFailureFault, sendJson } from './faults.js';
import { type EmulatedRelease, type EmulatedRequest, type EmulatorFaults, type EmulatorPanel, EmulatorState } from './state.js';

export type { EmulatedRelease, EmulatedRequest, EmulatorFaults, EmulatorPanel };

export interface MotherEmulatorOptions {
  /** The panels the emulator knows, each with its credentials, verdict and branding. */
  panels: EmulatorPanel[];
  /** Seconds a request timestamp may differ from the emulator's clock. @default 300 */
  windowSeconds?: number;
  /** Port to listen on. @default 0 (a free port) */
  port?: number;
  /** Address to listen on. Loopback only by design: the admin routes are unauthenticated. @default '127.0.0.1' */
  host?: '127.0.0.1' | 'localhost' | '::1';
  /** Path prefix of the partner API; the returned `url` includes it. @default '/api/partner' */
  basePath?: string;
  /** Serve `/__emulator/*` admin routes to flip licenses and faults over HTTP. @default true */
  admin?: boolean;
  /** The emulator's clock in milliseconds. @default Date.now */
  now?: () => number;
}

export interface MotherEmulator {
  /** Base URL to give the client, e.g. `http://127.0.0.1:41234/api/partner`. */
  readonly url: string;
  /** Origin of the admin routes, e.g. `http://127.0.0.1:41234/__emulator`. */
  readonly adminUrl: string;
  /** Changes a panel's verdict or branding; the next check sees it. */
  setPanel(apiKey: string, patch: Partial<Omit<EmulatorPanel, 'apiKey'>>): void;
  /** Replaces the active faults (pass `{}` to heal). */
  setFaults(faults: EmulatorFaults): void;
  /** Every release accepted, in order. */
  readonly releases: readonly EmulatedRelease[];
  /** Every request received (the most recent 10,000), in order. */
  readonly requests: readonly EmulatedRequest[];
  /** Forgets recorded releases and requests. */
  reset(): void;
  close(): Promise<void>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const KNOWN = optionNames<MotherEmulatorOptions>({ panels: true, windowSeconds: true, port: true, host: true, basePath: true, admin: true, now: true });
const LOOPBACK = ['127.0.0.1', 'localhost', '::1'];

export async function createMotherEmulator(options: MotherEmulatorOptions): Promise<MotherEmulator> {
  if (typeof options !== 'object' || options === null) throw optionError('options', 'must be an object', 'Pass { panels: [{ apiKey, apiSecret }] }.');
  const problems = new OptionProblems();
  rejectUnknownOptions('createMotherEmulator', options, KNOWN, problems);
  const checkedState = problems.check<EmulatorState | undefined>(() => new EmulatorState(options.panels), undefined);
  const windowSeconds = problems.check(() => positiveInteger('windowSeconds', options.windowSeconds, 300, 0), 300);
  const listenPort = problems.check(() => positiveInteger('port', options.port, 0, 0), 0);
  if (listenPort > 65535) problems.add(optionError('port', `must be at most 65535, received ${listenPort}`, 'Pass 0 for a free port.'));
  if (options.host !== undefined && !LOOPBACK.includes(options.host)) {
    problems.add(optionError('host', `must be a loopback address, received ${shown(options.host)}`, 'The admin routes are unauthenticated; use "127.0.0.1".'));
  }
  if (options.basePath !== undefined && (typeof options.basePath !== 'string' || !/^(\/[\w.-]+)*\/?$/.test(options.basePath))) {
    problems.add(
      optionError('basePath', `must be a path such as "/api/partner", received ${shown(options.basePath)}`, 'Use letters, digits, ".", "-" and "/" only.'),
    );
  }
  problems.throwIfAny('createMotherEmulator');
  const state = checkedState as EmulatorState;
  const basePath = (options.basePath ?? '/api/partner').replace(/\/+$/, '');
  const localNow = options.now ?? Date.now;
  const now = () => localNow() + (state.faults.clockOffsetSeconds ?? 0) * 1000;

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  let boundPort = 0;
  if (options.admin !== false) mountAdminRoutes(app, state, () => boundPort);

  // Raw bytes: the signature covers the body exactly as sent, so nothing may parse it first.
  const rawBody = express.raw({ type: () => true, limit: '1mb' });

  function handler(endpoint: 'license.php' | 'release.php') {
    return async (req: Request, res: Response) => {
      const faults = state.faults;
      const apiKey = req.get('x-api-key') ?? '';
      const receivedAt = now();
      const record = (status: number) => state.recordRequest({ endpoint, method: req.method, apiKey, status, at: now(), receivedAt });
      res.on('finish', () => record(res.statusCode));
      res.setHeader('Date', new Date(now()).toUTCString());
      const delay = appliesDelay(faults, endpoint);
      if (delay > 0) await sleep(delay);
      if (res.destroyed) return;
      if (applyFailureFault(res, faults, endpoint)) return;
      if (req.method !== 'POST') {
        res.status(405).setHeader('Allow', 'POST').json({ ok: false, error: 'Method not allowed. POST is required.' });
        return;
      }
      const body: Buffer = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      const panel = state.panel(apiKey);
      const verdict = verifySignature({
        apiKey,
        apiSecret: panel?.apiSecret ?? '',
        body,
        timestamp: req.get('x-timestamp'),
        signature: req.get('x-signature'),
        windowSeconds,
        now: Math.floor(now() / 1000),
      });
      if (!panel || !verdict.ok) {
        res.status(401).json({ ok: false, error: 'Unauthorized.' });
        return;
      }
      if (endpoint === 'license.php') {
        if (typeof faults.licenseBody === 'string') {
          res.status(200).type('html').send(faults.licenseBody);
          return;
        }
        const answer = faults.licenseBody !== undefined ? faults.licenseBody : state.licenseAnswer(panel, Math.floor(now() / 1000));
        sendJson(res, faults, endpoint, 200, answer);
        return;
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(body.toString('utf8'));
      } catch {
        res.status(422).json({ ok: false, error: 'Invalid JSON body.' });
        return;
      }
      const release = (parsed as { release?: unknown } | null)?.release;
      const title = (release as { title?: unknown } | null | undefined)?.title;
      if (typeof release !== 'object' || release === null || typeof title !== 'string' || title.trim() === '') {
        res.status(422).json({ ok: false, error: 'Missing release title.' });
        return;
      }
      const id = state.recordRelease(apiKey, release as Record<string, unknown>, now());
      if (faults.dropAnswer && (!faults.endpoint || faults.endpoint === endpoint)) {
        res.socket?.destroy();
        return;
      }
      sendJson(res, faults, endpoint, faults.successStatus ?? 200, { ok: true, release_id: id });
    };
  }

  app.all(`${basePath}/license.php`, rawBody, handler('license.php'));
  app.all(`${basePath}/release.php`, rawBody, handler('release.php'));
  app.use((_req, res) => {
    res.status(404).json({ ok: false, error: 'Not found.' });
  });

  const host = options.host ?? '127.0.0.1';
  // A plain server rather than app.listen(): Express 5 calls the listen callback on errors too,
  // which turned a busy port into "Cannot destructure property 'port' of server.address()".
  const server = createServer(app);
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EADDRINUSE') return reject(error);
      const busy = new Error(`Port ${listenPort} on ${host} is already in use (another emulator, or "npm start"?). Choose another port, or 0 for a free one.`);
      reject(Object.assign(busy, { code: 'EADDRINUSE', port: listenPort }));
    });
    server.listen(listenPort, host, resolve);
  });
  const { port } = server.address() as AddressInfo;
  boundPort = port;
  const origin = `http://${host === '::1' ? '[::1]' : host}:${port}`;

  return {
    url: `${origin}${basePath}`,
    adminUrl: `${origin}/__emulator`,
    setPanel: (apiKey, patch) => state.setPanel(apiKey, patch),
    setFaults: (faults) => {
      state.faults = { ...faults };
    },
    get releases() {
      return state.releases;
    },
    get requests() {
      return state.requests;
    },
    reset: () => state.reset(),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

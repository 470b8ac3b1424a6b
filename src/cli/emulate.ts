// `panel-license emulate`: the mother emulator as a standalone process, for demos and manual tests.
import { createMotherEmulator, type EmulatorPanel } from '../emulator/emulator.js';
import { UsageError } from '../errors.js';
import { EXIT, type Io, inCliWords, noPositionals, parseFlags, readJsonFile } from './io.js';

const USAGE = `Usage: panel-license emulate [--port N] [--panels FILE]

  --port N        port on 127.0.0.1 (default 4010; 0 picks a free one)
  --panels FILE   JSON array of panels: [{ "apiKey", "apiSecret", "active", "reason", "panel": {…} }]
                  (default: one demo panel, credentials printed at start)`;

export const DEMO_CREDENTIALS = { apiKey: 'demo_panel_key', apiSecret: 'demo_panel_secret_change_me' } as const;

async function readPanels(file: string): Promise<EmulatorPanel[]> {
  const parsed = await readJsonFile(file, 'panels', USAGE);
  if (!Array.isArray(parsed)) throw new UsageError(`${file} must hold a JSON array of panels.`, USAGE);
  return parsed as EmulatorPanel[];
}

export async function runEmulate(args: string[], io: Io): Promise<number> {
  const { values, positionals } = parseFlags(args, { port: { type: 'string' }, panels: { type: 'string' }, help: { type: 'boolean', short: 'h' } }, USAGE);
  if (values.help) {
    io.out(USAGE);
    return EXIT.ok;
  }
  noPositionals(positionals, USAGE);
  const port = Number(values.port ?? 4010);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError('--port must be an integer from 0 to 65535.', USAGE);
  const panels = typeof values.panels === 'string' ? await readPanels(values.panels) : [{ ...DEMO_CREDENTIALS, active: true }];
  let emulator: Awaited<ReturnType<typeof createMotherEmulator>>;
  try {
    emulator = await createMotherEmulator({ panels, port });
  } catch (error) {
    if (error instanceof TypeError) throw new UsageError(inCliWords(error.message), USAGE);
    if ((error as { code?: unknown }).code === 'EADDRINUSE') {
      io.err(
        `panel-license: port ${port} on 127.0.0.1 is already in use (another emulator, or "npm start"?). Choose another with --port N, or --port 0 for a free one.`,
      );
      return EXIT.unreachable;
    }
    throw error;
  }
  io.out(`Mother emulator listening at ${emulator.url}`);
  if (!values.panels) {
    io.out(`  MOTHER_BASE_URL=${emulator.url}`);
    io.out(`  PANEL_API_KEY=${DEMO_CREDENTIALS.apiKey}`);
    io.out(`  PANEL_API_SECRET=${DEMO_CREDENTIALS.apiSecret}   (demo only)`);
  }
  const key = panels[0]?.apiKey ?? DEMO_CREDENTIALS.apiKey;
  io.out(`Lock:   curl -X POST -H 'content-type: application/json' -d '{"active":false,"reason":"Suspended"}' ${emulator.adminUrl}/panels/${key}`);
  io.out(`Unlock: curl -X POST -H 'content-type: application/json' -d '{"active":true}' ${emulator.adminUrl}/panels/${key}`);
  const stop = () => {
    void emulator.close().then(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return EXIT.running;
}

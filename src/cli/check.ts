// `panel-license check`: one license check, human or JSON output, exit code by verdict.
import { MotherError } from '../errors.js';
import { cleanText, jsonLine } from '../text.js';
import { CONNECTION_FLAGS, CONNECTION_USAGE, clientFromFlags, EXIT, type Io, noPositionals, parseFlags } from './io.js';

const USAGE = `Usage: panel-license check [options]

${CONNECTION_USAGE}

Exit codes: 0 active, 1 inactive, 2 usage error, 3 unreachable or rejected.`;

export async function runCheck(args: string[], io: Io): Promise<number> {
  const { values, positionals } = parseFlags(args, CONNECTION_FLAGS, USAGE);
  if (values.help) {
    io.out(USAGE);
    return EXIT.ok;
  }
  noPositionals(positionals, USAGE);
  const client = clientFromFlags(values, io.env, USAGE);
  try {
    const answer = await client.checkLicense();
    if (values.json) io.out(jsonLine({ ok: true, active: answer.active, reason: answer.reason, panel: answer.panel, server_time: answer.server_time ?? null }));
    else {
      // Remote text on a terminal: strip control characters (no ANSI escapes from the mother).
      const name = cleanText(answer.panel.name, 80) ?? '(unnamed panel)';
      io.out(answer.active ? `ACTIVE  ${name}` : `LOCKED  ${name}: ${cleanText(answer.reason, 300) ?? 'no reason given'}`);
      const expires = cleanText(answer.panel.expires_at, 10);
      if (expires) io.out(`expires ${expires}`);
    }
    return answer.active ? EXIT.ok : EXIT.inactive;
  } catch (error) {
    if (!(error instanceof MotherError)) throw error;
    if (values.json) io.out(jsonLine({ ok: false, error: error.code, message: error.message }));
    else io.err(`ERROR   ${error.code}: ${error.message}`);
    return EXIT.unreachable;
  }
}

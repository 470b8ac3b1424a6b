// Shared plumbing of the CLI: exit codes, output sinks, usage errors, credential flags.

import { readFile } from 'node:fs/promises';
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { createMotherClient, type MotherClient } from '../client/mother-client.js';
import { UsageError } from '../errors.js';
import { closestName } from '../options.js';

export const EXIT = { ok: 0, inactive: 1, usage: 2, unreachable: 3, running: -1 } as const;

export interface Io {
  out(line: string): void;
  err(line: string): void;
  /** Raw write without a newline (progress bars on a terminal). */
  write(text: string): void;
  env: NodeJS.ProcessEnv;
  isTTY: boolean;
  /** Terminal width, when on a terminal. */
  columns?: number | undefined;
}

/** parseArgs that turns its errors into UsageError with the command's own usage text. */
export type Flags = { values: Record<string, string | boolean | undefined>; positionals: string[] };

export function parseFlags(args: string[], options: NonNullable<ParseArgsConfig['options']>, usage: string): Flags {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true }) as Flags;
  } catch (error) {
    throw new UsageError(flagProblem(error, options), usage);
  }
}

/** Commands that take no words besides flags say so instead of silently ignoring them. */
export function noPositionals(positionals: string[], usage: string): void {
  if (positionals.length > 0) throw new UsageError(`Unexpected argument "${positionals[0]}".`, usage);
}

/** parseArgs' own texts are written for programmers (and unbalanced); say it for a command line. */
function flagProblem(error: unknown, options: NonNullable<ParseArgsConfig['options']>): string {
  const { code, message } = error as { code?: string; message?: string };
  const flag = /'(-{1,2}[^'\s=]+)/.exec(message ?? '')?.[1] ?? 'that flag';
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const suggestion = closestName(flag.replace(/^-+/, ''), Object.keys(options));
    return `Unknown flag ${flag}.${suggestion ? ` Did you mean --${suggestion}?` : ''}`;
  }
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    const name = Object.entries(options).find(([long, option]) => `--${long}` === flag || (option.short && `-${option.short}` === flag));
    return name?.[1].type === 'boolean' ? `${flag} takes no value.` : `${flag} needs a value, e.g. ${flag} VALUE.`;
  }
  return message ?? String(error);
}

// What API option names and fixes mean on the command line.
const CLI_WORDS: [RegExp, string][] = [
  [/^panel-license-guard: /, ''],
  // Markdown backticks mean nothing on a terminal.
  [/`(npm install [^`]+)`/g, '"$1"'],
  [/pass `allowInsecureHttp: true`/g, 'pass --allow-insecure-http'],
  [/`baseUrl`/g, '--base-url'],
  [/`apiKey`/g, '--api-key'],
  [/`apiSecret`/g, '--api-secret'],
  [/`timeoutMs`/g, '--timeout-ms'],
  [/`([^`]*)`/g, '$1'],
];

/** Rewrites an option error of the API in the CLI's words (flags, not options; one prefix). */
export function inCliWords(message: string): string {
  return CLI_WORDS.reduce((text, [pattern, replacement]) => text.replace(pattern, replacement), message);
}

export const CONNECTION_FLAGS = {
  'base-url': { type: 'string' },
  'api-key': { type: 'string' },
  'api-secret': { type: 'string' },
  'timeout-ms': { type: 'string' },
  'allow-insecure-http': { type: 'boolean', default: false },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} as const;

export const CONNECTION_USAGE = `  --base-url URL      mother base address (env MOTHER_BASE_URL)
  --api-key KEY       panel API key (env PANEL_API_KEY)
  --api-secret SECRET panel API secret (env PANEL_API_SECRET; prefer the env var: flags show in ps)
  --timeout-ms N      request timeout (default 10000)
  --allow-insecure-http  allow a plain http:// mother that is not on loopback
  --json              machine-readable output`;

/** Reads the connection settings from flags, falling back to the environment. */
export function connectionFrom(values: Record<string, unknown>, env: NodeJS.ProcessEnv, usage: string) {
  const baseUrl = (values['base-url'] as string | undefined) ?? env.MOTHER_BASE_URL;
  const apiKey = (values['api-key'] as string | undefined) ?? env.PANEL_API_KEY;
  const apiSecret = (values['api-secret'] as string | undefined) ?? env.PANEL_API_SECRET;
  const missing = [!baseUrl && '--base-url/MOTHER_BASE_URL', !apiKey && '--api-key/PANEL_API_KEY', !apiSecret && '--api-secret/PANEL_API_SECRET'].filter(
    Boolean,
  );
  if (missing.length > 0 || !baseUrl || !apiKey || !apiSecret) throw new UsageError(`Missing ${missing.join(', ')}.`, usage);
  const timeoutText = values['timeout-ms'] as string | undefined;
  const timeoutMs = timeoutText === undefined ? undefined : Number(timeoutText);
  if (timeoutMs !== undefined && !(Number.isInteger(timeoutMs) && timeoutMs > 0)) throw new UsageError('--timeout-ms must be a positive integer.', usage);
  const allowInsecureHttp = values['allow-insecure-http'] === true;
  return { baseUrl, apiKey, apiSecret, ...(timeoutMs === undefined ? {} : { timeoutMs }), ...(allowInsecureHttp ? { allowInsecureHttp } : {}) };
}

/** Builds the mother client from flags/env; a bad setting is a usage error, not a crash. */
export function clientFromFlags(values: Record<string, unknown>, env: NodeJS.ProcessEnv, usage: string): MotherClient {
  try {
    return createMotherClient(connectionFrom(values, env, usage));
  } catch (error) {
    if (error instanceof TypeError) throw new UsageError(inCliWords(error.message), usage);
    throw error;
  }
}

/** Reads and parses a JSON file given on the command line. */
export async function readJsonFile(file: string, what: string, usage: string): Promise<unknown> {
  try {
    return JSON.parse(await readFile(file, 'utf8'));
  } catch (error) {
    throw new UsageError(`Cannot read ${what} from ${file}: ${error instanceof Error ? error.message : String(error)}`, usage);
  }
}

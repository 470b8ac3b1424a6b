// Shared test fixtures: an emulator with one demo panel, and a client bound to it.
import type { Server } from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { createMotherClient, type MotherClientOptions } from '../../src/client/mother-client.js';
import { createMotherEmulator, type EmulatorPanel, type MotherEmulator } from '../../src/emulator/emulator.js';

export const API_KEY = 'pk_test_panel';
export const API_SECRET = 'sk_test_0123456789abcdef';

export const DEMO_PANEL: EmulatorPanel = {
  apiKey: API_KEY,
  apiSecret: API_SECRET,
  active: true,
  panel: { name: 'Rhythm Hub', brand_color: '#ff5500', brand_logo_url: 'https://cdn.rhythm.example/logo.png', expires_at: '2099-01-01' },
};

export async function startEmulator(
  panels: EmulatorPanel[] = [DEMO_PANEL],
  extra: { windowSeconds?: number; now?: () => number } = {},
): Promise<MotherEmulator> {
  return createMotherEmulator({ panels, ...extra });
}

export function clientFor(emulator: MotherEmulator, options: Partial<MotherClientOptions> = {}) {
  return createMotherClient({ baseUrl: emulator.url, apiKey: API_KEY, apiSecret: API_SECRET, timeoutMs: 5000, ...options });
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `check` returns truthy, polling; fails with `what` after `timeoutMs`. */
export async function waitFor<T>(check: () => T | Promise<T>, what: string, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** Resolves with the error a promise rejects with; fails the test when it resolves instead. */
export async function failure(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection');
}

/** The longest the event loop was held (ms) while `work` ran. */
export async function longestBlock<T>(work: () => Promise<T>): Promise<{ ms: number; result: T }> {
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  let result: T;
  try {
    result = await work();
  } finally {
    delay.disable();
  }
  const ms = delay.max / 1e6;
  if (process.env.SHOW_BLOCKS) console.log(`longest block: ${ms.toFixed(1)} ms`);
  return { ms, result };
}

/** Listens with `app` on a free port of 127.0.0.1; resolves with the server and its origin. */
export async function listenLocal(app: { listen(port: number, host: string): Server }): Promise<{ server: Server; origin: string }> {
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return { server, origin: `http://127.0.0.1:${(server.address() as { port: number }).port}` };
}

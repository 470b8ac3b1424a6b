// Entry of every child process: serves one app variant on 127.0.0.1, or runs the mother emulator.
import { createMotherEmulator } from 'panel-license-guard/testing';
import { buildApp, HOSTED_COUNT, hostedPanels, PANELS } from './app.js';
import { startProfile, stopProfile } from './cpu-profile.js';

let emulator;

async function startServer(config) {
  const { app, close } = await buildApp(config);
  const server = await new Promise((resolve, reject) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });
  const stop = () =>
    new Promise((resolve) => {
      close();
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return { info: { url: `http://127.0.0.1:${server.address().port}/` }, stop };
}

/** The mother of every figure: the two panels of the app variants and `hosted` panels by host. */
async function startEmulator({ hosted = HOSTED_COUNT }) {
  emulator = await createMotherEmulator({ panels: [PANELS.active, PANELS.locked, ...hostedPanels(hosted)] });
  return { info: { url: emulator.url }, stop: () => emulator.close() };
}

/** Collects garbage until the heap stops shrinking, then reports heapUsed (needs --expose-gc). */
async function settledHeap() {
  if (typeof globalThis.gc !== 'function') throw new Error('heap measurement needs node --expose-gc');
  let previous = Number.POSITIVE_INFINITY;
  for (let i = 0; i < 10; i++) {
    globalThis.gc();
    await new Promise((resolve) => setImmediate(resolve));
    const used = process.memoryUsage().heapUsed;
    if (used >= previous * 0.999) return used;
    previous = used;
  }
  return process.memoryUsage().heapUsed;
}

const handlers = {
  heap: async () => ({ heapUsed: await settledHeap() }),
  // CPU time this process has used, in µs: a cross-check on req/s that a neighbour's load moves less.
  cpu: async () => {
    const { user, system } = process.cpuUsage();
    return { micros: user + system };
  },
  profileStart: async () => {
    await startProfile();
    return {};
  },
  profileStop: async () => stopProfile(),
  releases: async () => ({ count: emulator.releases.length }),
  faults: async ({ faults }) => {
    emulator.setFaults(faults);
    return {};
  },
  reset: async () => {
    emulator.reset();
    return {};
  },
};

let stop = async () => {};
process.on('message', async (message) => {
  try {
    if (message.type === 'start') {
      const started = message.role === 'emulator' ? await startEmulator(message) : await startServer(message);
      stop = started.stop;
      process.send({ type: 'ready', ...started.info });
    } else if (message.type === 'close') {
      await stop();
      process.exit(0);
    } else {
      const handler = handlers[message.type];
      if (!handler) throw new Error(`unknown request "${message.type}"`);
      process.send({ type: 'reply', id: message.id, ...(await handler(message)) });
    }
  } catch (error) {
    process.send({ type: 'error', id: message.id, message: error instanceof Error ? error.stack : String(error) });
  }
});
// The parent going away (Ctrl-C, crash) must not leave servers behind.
process.on('disconnect', () => process.exit(0));

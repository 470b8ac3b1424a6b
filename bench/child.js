// Child processes of the benchmark: fork with CPU pinning, a request/reply channel over IPC, clean shutdown.
import { execFileSync, fork } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';

const CHILD_MAIN = fileURLToPath(new URL('./child-main.js', import.meta.url));

/** CPU of the load generator (this process) and CPU of every child, when the machine has two or more. */
export const LOAD_CPU = 0;
export const SERVER_CPU = 1;

/**
 * Pins every thread of `pid` to one CPU with taskset (Linux). On two cores this keeps autocannon and
 * the server under test from migrating onto each other's core, which halves the round-to-round
 * noise. Best effort: returns false where taskset or a second CPU is missing, and the run goes on.
 */
export function pinToCpu(pid, cpu) {
  if (process.platform !== 'linux' || availableParallelism() < 2) return false;
  try {
    execFileSync('taskset', ['-a', '-p', '-c', String(cpu), String(pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * Forks bench/child-main.js pinned to SERVER_CPU, sends it `{ type: 'start', ...config }` and
 * resolves once it answers `ready`. The handle sends requests and awaits their replies.
 * `config.role` is 'server' (an app variant) or 'emulator' (the mother emulator).
 */
export function startChild(config, { execArgv = [] } = {}) {
  const child = fork(CHILD_MAIN, [], { execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  pinToCpu(child.pid, SERVER_CPU);
  const pending = new Map();
  const what = `${config.role} child${config.variant ? ` (${config.variant})` : ''}`;
  let nextId = 1;
  let exited = false;

  const ready = new Promise((resolve, reject) => {
    child.on('message', (message) => {
      if (message.id === undefined) {
        if (message.type === 'ready') resolve(message);
        else if (message.type === 'error') reject(new Error(`bench: ${what} failed to start: ${message.message}`));
        return;
      }
      const waiter = pending.get(message.id);
      if (!waiter) return;
      pending.delete(message.id);
      if (message.type === 'error') waiter.reject(new Error(`bench: ${what}: ${message.message}`));
      else waiter.resolve(message);
    });
    child.once('exit', (code, signal) => {
      exited = true;
      const error = new Error(`bench: ${what} exited (code ${code}, signal ${signal})`);
      reject(error);
      for (const waiter of pending.values()) waiter.reject(error);
      pending.clear();
    });
  });
  child.send({ type: 'start', ...config });

  return ready.then((info) => ({
    info,
    pid: child.pid,
    /** Sends `{ type, ...payload }` and resolves with the child's reply. */
    request(type, payload = {}) {
      if (exited) return Promise.reject(new Error(`bench: ${what} is not running`));
      const id = nextId++;
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject });
        child.send({ type, id, ...payload });
      });
    },
    /** Asks the child to close and waits for it to exit; kills this child (by its handle) after 5 s. */
    close() {
      if (exited) return Promise.resolve();
      return new Promise((resolve) => {
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        child.once('exit', () => {
          clearTimeout(timer);
          resolve();
        });
        child.send({ type: 'close' });
      });
    },
  }));
}

/** Closes every handle given (skipping missing ones), in parallel. */
export function closeAll(handles) {
  return Promise.all(handles.filter(Boolean).map((handle) => handle.close()));
}

// Mounted outside Express, the guard and the console throw one error that says what is missing and
// what to do, on the first request — never a 500 from a TypeError deep inside.
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { licenseConsole } from '../../src/console.js';
import type { MotherEmulator } from '../../src/emulator/emulator.js';
import { licenseGuard } from '../../src/index.js';
import { silentLogger } from '../support/guard-app.js';
import { API_KEY, API_SECRET, startEmulator } from '../support/helpers.js';

let emulator: MotherEmulator;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(() => emulator.close());

type Middleware = (req: unknown, res: unknown, next: (error?: unknown) => void) => void;

/** A Fastify 5 app running `middleware` as @fastify/middie and @fastify/express do: Node's bare request and response. */
async function onFastify(middleware: Middleware) {
  const app = Fastify();
  app.addHook('onRequest', (request, reply, done) => {
    try {
      middleware(request.raw, reply.raw, (error) => done(error as Error | undefined));
    } catch (error) {
      done(error as Error);
    }
  });
  app.get('/', async () => 'page');
  const answer = await app.inject({ method: 'GET', url: '/', headers: { host: 'panel.example' } });
  await app.close();
  return { status: answer.statusCode, message: String(answer.json().message) };
}

describe('outside Express', () => {
  const guards = {
    'the guard': () => licenseGuard({ baseUrl: emulator.url, apiKey: API_KEY, apiSecret: API_SECRET, logger: silentLogger }),
    'the guard with `panels`': () =>
      licenseGuard({ baseUrl: emulator.url, logger: silentLogger, panels: { resolve: async () => ({ apiKey: API_KEY, apiSecret: API_SECRET }) } }),
  };

  it.each(Object.keys(guards) as (keyof typeof guards)[])(
    '%s on Fastify: the first request fails saying it is Express middleware and what to do',
    async (which) => {
      const guard = guards[which]();
      try {
        const { status, message } = await onFastify(guard as unknown as Middleware);
        expect(status).toBe(500);
        expect(message).toMatch(/licenseGuard\(\) is Express middleware \(req, res, next\), and got Node's bare http response, without Express's `res.locals`/);
        expect(message).toMatch(/Mount it in an Express 4\.21\+\/5 app — with NestJS, on its default Express adapter/);
        expect(message).not.toMatch(/Cannot set properties|TypeError: Cannot/);
      } finally {
        await guard.close();
      }
    },
  );

  it('the guard called as Koa or Hono middleware, (ctx, next): says so', async () => {
    const guard = guards['the guard']();
    try {
      expect(() => (guard as unknown as (ctx: object, next: () => void) => void)({ request: {}, response: {} }, () => {})).toThrow(
        /licenseGuard\(\) is Express middleware \(req, res, next\), and got a context and a `next` function \(Koa, Hono/,
      );
    } finally {
      await guard.close();
    }
  });

  it('the console on Fastify: the first request fails saying it is Express middleware', async () => {
    const guard = guards['the guard']();
    try {
      const operators = licenseConsole({ guard, authorize: () => true });
      const { status, message } = await onFastify(operators as unknown as Middleware);
      expect(status).toBe(500);
      expect(message).toMatch(/licenseConsole\(\) is Express middleware \(req, res, next\), and got Node's bare http response/);
      expect(message).not.toMatch(/res\.status is not a function/);
    } finally {
      await guard.close();
    }
  });
});

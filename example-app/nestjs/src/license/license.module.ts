import { createHash, timingSafeEqual } from 'node:crypto';
import {
  type DynamicModule,
  type FactoryProvider,
  Global,
  Inject,
  Logger,
  type MiddlewareConsumer,
  Module,
  type NestModule,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
  RequestMethod,
} from '@nestjs/common';
import type { Request } from 'express';
import { createMotherClient, createReleaseOutbox, type LicenseGuard, licenseGuard, type MotherClient, type ReleaseOutbox } from 'panel-license-guard';
import { type LicenseConsole, licenseConsole } from 'panel-license-guard/console';
import { LICENSE_CONSOLE, LICENSE_GUARD, LICENSE_OPTIONS, type LicenseModuleOptions, RELEASE_OUTBOX } from './license.tokens';

const MOTHER_CLIENT = Symbol('MOTHER_CLIENT');

/** Lets in requests with `Authorization: Bearer <token>` (a real app asks its own sign-in: req.user). */
function bearer(token: string) {
  const digest = (value: string) => createHash('sha256').update(value).digest(); // equal lengths for timingSafeEqual
  const expected = digest(`Bearer ${token}`);
  return (req: Request) => timingSafeEqual(digest(req.get('authorization') ?? ''), expected);
}

@Global()
@Module({})
export class LicenseModule implements NestModule, OnApplicationBootstrap, OnApplicationShutdown {
  /** `useFactory` runs when the app is created, so tests can override LICENSE_OPTIONS first. */
  static forRoot(options: Pick<FactoryProvider<LicenseModuleOptions>, 'useFactory' | 'inject'>): DynamicModule {
    return {
      module: LicenseModule,
      providers: [
        { provide: LICENSE_OPTIONS, useFactory: options.useFactory, inject: options.inject ?? [] },
        {
          // One client for the guard and the outbox: one place holds the secret.
          provide: MOTHER_CLIENT,
          inject: [LICENSE_OPTIONS],
          useFactory: ({ baseUrl, apiKey, apiSecret }: LicenseModuleOptions) => createMotherClient({ baseUrl, apiKey, apiSecret }),
        },
        {
          provide: LICENSE_GUARD,
          inject: [LICENSE_OPTIONS, MOTHER_CLIENT],
          useFactory: (o: LicenseModuleOptions, client: MotherClient) => licenseGuard({ client, apiPrefix: '/api', supportContact: o.supportContact }),
        },
        {
          provide: RELEASE_OUTBOX,
          inject: [LICENSE_OPTIONS, MOTHER_CLIENT],
          useFactory: (o: LicenseModuleOptions, client: MotherClient) => createReleaseOutbox({ client, file: o.outboxFile }),
        },
        {
          provide: LICENSE_CONSOLE,
          inject: [LICENSE_OPTIONS, LICENSE_GUARD, RELEASE_OUTBOX],
          useFactory: (o: LicenseModuleOptions, guard: LicenseGuard, outbox: ReleaseOutbox) => licenseConsole({ guard, outbox, authorize: bearer(o.opsToken) }),
        },
      ],
      exports: [LICENSE_GUARD, RELEASE_OUTBOX],
    };
  }

  constructor(
    @Inject(LICENSE_GUARD) private readonly guard: LicenseGuard,
    @Inject(RELEASE_OUTBOX) private readonly outbox: ReleaseOutbox,
    @Inject(LICENSE_CONSOLE) private readonly opsConsole: LicenseConsole,
  ) {}

  configure(consumer: MiddlewareConsumer): void {
    // The console is an Express router: a plain string path is mounted with Express's app.use(),
    // which sets req.baseUrl (its links and cookie need it). Not 'ops/license/{*rest}' (the whole
    // path would become the base) nor { path, method } (app.all(): the router sees no sub-path).
    consumer.apply(this.opsConsole).forRoutes('ops/license');
    // The load balancer's check: 200 while this instance runs, whatever the license says.
    consumer.apply(this.guard.healthHandler({ outbox: this.outbox })).forRoutes({ path: 'healthz', method: RequestMethod.GET });
    // The guard before every route, unknown paths (404s) included; the console and the health
    // check are excluded so neither the order of these calls nor another module's can lock them.
    // 'ops/license{/*rest}' covers /ops/license itself too; 'ops/license/{*rest}' would not.
    consumer.apply(this.guard).exclude('ops/license{/*rest}', 'healthz').forRoutes('{*splat}');
  }

  onApplicationBootstrap(): void {
    // Not awaited: the first check may take up to 10 s when the mother hangs, and listen() should
    // not wait for it. Requests that arrive first wait for the first verdict (startupTimeoutMs).
    void this.guard.start();
  }

  /** app.close(), or a signal once main.ts called enableShutdownHooks(). */
  async onApplicationShutdown(): Promise<void> {
    this.opsConsole.close();
    await this.guard.close();
    await this.outbox.close(); // waits for pushes in flight to be recorded
    new Logger(LicenseModule.name).log('license guard and release outbox closed');
  }
}

// `node dist/main`: the panel on http://127.0.0.1:3000/, against the built-in mother emulator
// unless MOTHER_BASE_URL, PANEL_API_KEY and PANEL_API_SECRET name a real mother.
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { createMotherEmulator } from 'panel-license-guard/testing';
import { AppModule } from './app.module';
import { setUpApp } from './setup';

async function demoMother() {
  const emulator = await createMotherEmulator({
    port: Number(process.env.EMULATOR_PORT ?? 4010),
    panels: [{ apiKey: 'demo_key', apiSecret: 'demo_secret', active: true, panel: { name: 'Rhythm Hub (Nest)', brand_color: '#7c3aed' } }],
  });
  Object.assign(process.env, { MOTHER_BASE_URL: emulator.url, PANEL_API_KEY: 'demo_key', PANEL_API_SECRET: 'demo_secret' });
  process.env.OPS_TOKEN ??= 'demo-ops-token';
  process.env.OUTBOX_FILE ??= ':memory:';
  return emulator;
}

async function bootstrap() {
  const emulator = process.env.MOTHER_BASE_URL ? undefined : await demoMother();
  const app = setUpApp(await NestFactory.create<NestExpressApplication>(AppModule));
  // SIGTERM/SIGINT run app.close(): LicenseModule's onApplicationShutdown closes the guard and
  // the outbox (pushes in flight are recorded first).
  app.enableShutdownHooks();
  await app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1');
  const url = await app.getUrl();
  console.log(`Panel: ${url}/   console: curl -H 'Authorization: Bearer ${process.env.OPS_TOKEN}' ${url}/ops/license`);
  if (emulator) {
    const admin = `${emulator.adminUrl}/panels/demo_key`;
    console.log(
      `Lock: curl -X POST -H 'content-type: application/json' -d '{"active":false}' ${admin}  (the panel notices at its next check, or "Check now" in the console)`,
    );
  }
}

void bootstrap();

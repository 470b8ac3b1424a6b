import { join } from 'node:path';
import type { NestExpressApplication } from '@nestjs/platform-express';

/** What main.ts and the e2e test both do to the app before init(): the views of @Render. */
export function setUpApp(app: NestExpressApplication): NestExpressApplication {
  app.disable('x-powered-by');
  app.setBaseViewsDir(join(__dirname, '..', 'views'));
  app.setViewEngine('ejs');
  return app;
}

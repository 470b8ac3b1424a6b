import { Module } from '@nestjs/common';
import { LicenseModule } from './license/license.module';
import { PanelController } from './panel.controller';

function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`Set ${name} (see docs/nestjs.md).`);
  return value;
}

@Module({
  imports: [
    LicenseModule.forRoot({
      useFactory: () => ({
        baseUrl: env('MOTHER_BASE_URL'),
        apiKey: env('PANEL_API_KEY'),
        apiSecret: env('PANEL_API_SECRET'),
        opsToken: env('OPS_TOKEN'),
        outboxFile: process.env.OUTBOX_FILE ?? './data/outbox.db',
        supportContact: 'support@panel.example',
      }),
    }),
  ],
  controllers: [PanelController],
})
export class AppModule {}

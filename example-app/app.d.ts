// Types of the example app for the TypeScript test suite (the app itself is plain JavaScript).
import type { Express } from 'express';
import type { LicenseGuard, MotherClient, ReleaseOutbox } from 'panel-license-guard';

export interface PanelConfig {
  baseUrl: string;
  apiKey: string;
  apiSecret: string;
  stateFile?: string;
  /** SQLite file of the release outbox. @default ':memory:' */
  outboxFile?: string;
  demoControls?: boolean;
  logger?: { warn(message: string): void; error(message: string): void };
}

export function createPanelApp(config: PanelConfig): {
  app: Express;
  guard: LicenseGuard;
  client: MotherClient;
  outbox: ReleaseOutbox;
  start(): Promise<string>;
  close(): Promise<void>;
};

// Types of the example app for the TypeScript test suite (the app itself is plain JavaScript).
import type { Express } from 'express';
import type { LicenseGuard, MotherClient } from 'panel-license-guard';

export interface PanelConfig {
  baseUrl: string;
  apiKey: string;
  apiSecret: string;
  stateFile?: string;
  demoControls?: boolean;
  logger?: { warn(message: string): void; error(message: string): void };
}

export function createPanelApp(config: PanelConfig): {
  app: Express;
  guard: LicenseGuard;
  client: MotherClient;
  start(): Promise<string>;
  close(): void;
};

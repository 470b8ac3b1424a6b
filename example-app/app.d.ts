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
  /** SQLite file of the app's own rows (the release_id written back from the delivery feed). @default ':memory:' */
  appDbFile?: string;
  demoControls?: boolean;
  logger?: { warn(message: string): void; error(message: string): void };
}

export function createPanelApp(config: PanelConfig): {
  app: Express;
  guard: LicenseGuard;
  client: MotherClient;
  outbox: ReleaseOutbox;
  /** The delivery-feed recipe (release-ids.js): the app's own rows with the mother's release_id. */
  releaseIds: {
    tracks(): { remoteTrackId: string; releaseId: number | null; applied: number }[];
    catchUp(): Promise<void>;
    close(): Promise<void>;
  };
  start(): Promise<string>;
  close(): Promise<void>;
};

// Types of the example's multi-panel mode for the TypeScript test suite (the app is plain JavaScript).
import type { Express } from 'express';
import type { LicenseGuard, ReleaseOutbox } from 'panel-license-guard';

export interface DemoTenant {
  /** Your stable id of the tenant (its panel), as the outbox rows record it. */
  id: string;
  apiKey: string;
  apiSecret: string;
  panel: { name: string; brand_color: string };
}

export const DEMO_TENANTS: Record<string, DemoTenant>;

export function createPanelsApp(config: {
  baseUrl: string;
  outboxFile?: string;
  tenants?: Record<string, DemoTenant>;
  logger?: { warn(message: string): void; error(message: string): void };
}): { app: Express; guard: LicenseGuard; outbox: ReleaseOutbox; close(): Promise<void> };

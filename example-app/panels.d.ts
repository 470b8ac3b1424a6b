// Types of the example's multi-panel mode for the TypeScript test suite (the app is plain JavaScript).
import type { Express } from 'express';
import type { LicenseGuard } from 'panel-license-guard';

export interface DemoTenant {
  apiKey: string;
  apiSecret: string;
  panel: { name: string; brand_color: string };
}

export const DEMO_TENANTS: Record<string, DemoTenant>;

export function createPanelsApp(config: {
  baseUrl: string;
  tenants?: Record<string, { apiKey: string; apiSecret: string }>;
  logger?: { warn(message: string): void; error(message: string): void };
}): { app: Express; guard: LicenseGuard; close(): Promise<void> };

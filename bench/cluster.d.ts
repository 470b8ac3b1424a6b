// Types of bench/cluster.js, for the multi-process test that shares its helpers.
import type { ChildProcess } from 'node:child_process';
import type { LicenseState, LicenseStatus } from '../src/index.js';
import type { MotherEmulator } from '../src/testing.js';

export interface ClusterInstance {
  index: number;
  child: ChildProcess;
  /** Local ms of every license call this process made. */
  checks: number[];
  port: number;
  refresh(): Promise<LicenseState>;
  status(): Promise<LicenseStatus>;
  page(): Promise<number>;
  kill(): void;
}

export function startInstances(options: {
  count: number;
  baseUrl: string;
  apiKey: string;
  apiSecret: string;
  redisUrl: string;
  schedule: string;
  prefix?: string;
}): Promise<ClusterInstance[]>;
export function stopInstances(instances: ClusterInstance[]): void;
export function timeUntilAll(instances: ClusterInstance[], status: number, timeoutMs?: number): Promise<number>;
export function measurePropagation(options: {
  emulator: MotherEmulator;
  instances: ClusterInstance[];
  apiKey: string;
  flips: number;
}): Promise<{ p50: number; p99: number; max: number; samples: number[] }>;
export function measureChecksPerSlot(options: { instances: ClusterInstance[]; seconds: number }): Promise<{ calls: number; slots: number; perSlot: number }>;

// What the mother emulator knows: panels, faults, and a record of requests and releases.

export interface EmulatorPanel {
  apiKey: string;
  apiSecret: string;
  /** The verdict returned by license.php. @default true */
  active?: boolean;
  /** `reason` returned with the verdict. @default null when active, "License suspended." otherwise */
  reason?: string | null;
  /** The panel record (docs/partner-api.md); fields left out get demo values. */
  panel?: Partial<Record<PanelField, string | null>>;
}

type PanelField = 'name' | 'billing_type' | 'status' | 'expires_at' | 'subdomain' | 'custom_domain' | 'brand_logo_url' | 'brand_color';

export interface EmulatorFaults {
  /** Limit the faults below to one endpoint. @default both endpoints */
  endpoint?: 'license.php' | 'release.php' | undefined;
  /** Answer 503 with an HTML page, as a proxy in front of a dead mother would. @default false */
  down?: boolean;
  /** Answer 500 with an HTML error page. @default false */
  htmlError?: boolean;
  /** Answer this status with a JSON error body (e.g. 429, 408, 502). @default undefined */
  status?: number | undefined;
  /** `Retry-After` seconds sent with `down`, `htmlError` and `status`. @default undefined */
  retryAfterSeconds?: number | undefined;
  /** Wait this long before answering. @default 0 */
  delayMs?: number;
  /** Cut successful JSON answers in half. @default false */
  truncateJson?: boolean;
  /** Store the release, then close the connection without answering: a lost answer. @default false */
  dropAnswer?: boolean;
  /** Redirect every request to this URL with a 302. @default undefined */
  redirectTo?: string | undefined;
  /** Replace the license answer with this JSON value, or send a string as a 200 HTML body (malformed-answer tests). @default undefined */
  licenseBody?: unknown;
  /** Status of a successful release push. @default 200 */
  successStatus?: number;
  /** Shift the emulator's clock (server_time, Date, signature window) by this many seconds. @default 0 */
  clockOffsetSeconds?: number;
}

export interface EmulatedRequest {
  endpoint: 'license.php' | 'release.php';
  method: string;
  apiKey: string;
  status: number;
  /** When the answer was sent (epoch ms of the emulator's clock). */
  at: number;
  /** When the request arrived, before any `delayMs` (epoch ms of the emulator's clock): what a mother's rate limit counts. */
  receivedAt: number;
}

export interface EmulatedRelease {
  releaseId: number;
  apiKey: string;
  release: Record<string, unknown>;
  receivedAt: number;
}

const MAX_REQUESTS = 10_000;

// expires_at is computed per answer (a realistic 30 days ahead, as a monthly plan would show).
const DEFAULT_PANEL: Record<Exclude<PanelField, 'expires_at'>, string> = {
  name: 'Demo Panel',
  billing_type: 'monthly',
  status: 'active',
  subdomain: 'demo',
  custom_domain: 'panel.example',
  brand_logo_url: 'https://panel.example/logo.png',
  brand_color: '#2563eb',
};

export class EmulatorState {
  faults: EmulatorFaults = {};
  readonly releases: EmulatedRelease[] = [];
  readonly requests: EmulatedRequest[] = [];
  private readonly panels = new Map<string, EmulatorPanel>();
  private nextReleaseId = 1000;

  constructor(panels: EmulatorPanel[]) {
    if (!Array.isArray(panels) || panels.length === 0) {
      throw new TypeError('panel-license-guard: createMotherEmulator() needs `panels`: an array of { apiKey, apiSecret, active?, panel? }.');
    }
    for (const panel of panels) {
      if (!panel.apiKey || !panel.apiSecret) throw new TypeError('panel-license-guard: every emulator panel needs a non-empty `apiKey` and `apiSecret`.');
      this.panels.set(panel.apiKey, { ...panel, panel: { ...panel.panel } });
    }
  }

  panel(apiKey: string): EmulatorPanel | undefined {
    return this.panels.get(apiKey);
  }

  apiKeys(): string[] {
    return [...this.panels.keys()];
  }

  setPanel(apiKey: string, patch: Partial<Omit<EmulatorPanel, 'apiKey'>>): void {
    const current = this.panels.get(apiKey);
    if (!current) throw new Error(`The emulator knows no panel with API key "${apiKey}".`);
    // Re-activating without a reason clears the old one: an unlocked panel does not keep
    // showing "Invoice overdue".
    const next: EmulatorPanel = { ...current, ...patch, apiKey, panel: { ...current.panel, ...patch.panel } };
    if (patch.active === true && !('reason' in patch)) delete next.reason;
    this.panels.set(apiKey, next);
  }

  licenseAnswer(panel: EmulatorPanel, serverTime: number): unknown {
    const active = panel.active ?? true;
    const reason = panel.reason !== undefined ? panel.reason : active ? null : 'License suspended.';
    const expiresAt = new Date((serverTime + 30 * 86_400) * 1000).toISOString().slice(0, 10);
    return { ok: true, active, reason, panel: { ...DEFAULT_PANEL, expires_at: expiresAt, ...panel.panel }, server_time: serverTime };
  }

  recordRequest(request: EmulatedRequest): void {
    this.requests.push(request);
    if (this.requests.length > MAX_REQUESTS) this.requests.splice(0, this.requests.length - MAX_REQUESTS);
  }

  recordRelease(apiKey: string, release: Record<string, unknown>, at: number): number {
    const releaseId = this.nextReleaseId++;
    this.releases.push({ releaseId, apiKey, release, receivedAt: at });
    return releaseId;
  }

  reset(): void {
    this.requests.length = 0;
    this.releases.length = 0;
  }
}

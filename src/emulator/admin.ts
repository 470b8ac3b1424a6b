// Admin routes of the emulator: flip a license or a fault over HTTP (used by `npm start` demos).
import express, { type Express } from 'express';
import type { EmulatorFaults, EmulatorState } from './state.js';

const LOOPBACK_NAMES = ['127.0.0.1', 'localhost', '[::1]'];

/**
 * Mounts `/__emulator/*`. The emulator only listens on loopback, so these routes are
 * unauthenticated by design; they exist for demos and manual testing. Two guards keep a web page
 * in the developer's browser out: the `Host` must be a loopback name with the emulator's port
 * (a DNS-rebinding page sends its own host name), and writes must be JSON (a plain cross-site
 * form cannot send that without a CORS preflight, which the emulator never grants).
 */
export function mountAdminRoutes(app: Express, state: EmulatorState, port: () => number): void {
  const json = express.json({ limit: '64kb' });

  app.use('/__emulator', (req, res, next) => {
    const host = (req.headers.host ?? '').toLowerCase();
    if (!LOOPBACK_NAMES.some((name) => host === `${name}:${port()}`)) {
      res.status(403).json({ ok: false, error: 'Admin routes answer only requests addressed to 127.0.0.1, localhost or [::1] with the emulator port.' });
      return;
    }
    if (req.method !== 'GET' && !req.is('application/json')) {
      res.status(415).json({ ok: false, error: 'Admin writes must be sent as application/json.' });
      return;
    }
    next();
  });

  app.get('/__emulator/state', (_req, res) => {
    const panels = state.apiKeys().map((apiKey) => {
      const { apiSecret: _secret, ...visible } = state.panel(apiKey) ?? { apiSecret: '' };
      return visible;
    });
    res.json({ panels, faults: state.faults, releases: state.releases.length, requests: state.requests.length });
  });

  app.get('/__emulator/releases', (_req, res) => {
    res.json({ releases: state.releases.slice(-500) });
  });

  app.post('/__emulator/panels/:apiKey', json, (req, res) => {
    const apiKey = String(req.params.apiKey);
    if (!state.panel(apiKey)) {
      res.status(404).json({ ok: false, error: `No panel with API key "${apiKey}".` });
      return;
    }
    const { active, reason, panel } = (req.body ?? {}) as { active?: unknown; reason?: unknown; panel?: unknown };
    if (active !== undefined && typeof active !== 'boolean') {
      res.status(422).json({ ok: false, error: '`active` must be true or false.' });
      return;
    }
    state.setPanel(apiKey, {
      ...(active === undefined ? {} : { active }),
      ...(reason === undefined ? {} : { reason: typeof reason === 'string' ? reason : null }),
      ...(typeof panel === 'object' && panel !== null ? { panel: panel as Record<string, string> } : {}),
    });
    res.json({ ok: true });
  });

  app.post('/__emulator/faults', json, (req, res) => {
    state.faults = { ...((req.body ?? {}) as EmulatorFaults) };
    res.json({ ok: true, faults: state.faults });
  });
}

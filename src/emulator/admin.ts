// Admin routes of the emulator: flip a license or a fault over HTTP (used by `npm start` demos).
import express, { type Express } from 'express';
import type { EmulatorFaults, EmulatorState } from './state.js';

/**
 * Mounts `/__emulator/*`. The emulator only listens on loopback, so these routes are
 * unauthenticated by design; they exist for demos and manual testing.
 */
export function mountAdminRoutes(app: Express, state: EmulatorState): void {
  const json = express.json({ limit: '64kb' });

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

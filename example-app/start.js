// `npm start`: the example panel against the built-in mother emulator (or a real mother via env).

import cluster from 'node:cluster';
import { createServer } from 'node:http';
import { createMotherEmulator } from 'panel-license-guard/testing';
import { createPanelApp } from './app.js';
import { clusterRequested, runClusterWorker, startClusterPrimary } from './cluster.js';
import { createPanelsApp, DEMO_TENANTS } from './panels.js';

const port = Number(process.env.PORT ?? 3000);
const emulatorPort = Number(process.env.EMULATOR_PORT ?? 4010);

/** Says which port is taken and which variable moves it, instead of a stack trace. */
function portInUse(error, which, variable, value) {
  if (error?.code !== 'EADDRINUSE') return error;
  return new Error(
    `The ${which} port ${value} is already in use (is "npm start" or "panel-license emulate" running?). Set ${variable}=<another port> and run again.`,
  );
}
const demo = { apiKey: 'demo_panel_key', apiSecret: 'demo_panel_secret_change_me' };

async function main() {
  if (process.argv.includes('--panels') || process.env.PANELS === '1') return runPanels();
  let emulator;
  let config;
  if (process.env.MOTHER_BASE_URL) {
    const { MOTHER_BASE_URL, PANEL_API_KEY, PANEL_API_SECRET } = process.env;
    if (!PANEL_API_KEY || !PANEL_API_SECRET) throw new Error('Set PANEL_API_KEY and PANEL_API_SECRET along with MOTHER_BASE_URL.');
    config = { baseUrl: MOTHER_BASE_URL, apiKey: PANEL_API_KEY, apiSecret: PANEL_API_SECRET };
  } else {
    emulator = await createMotherEmulator({
      port: emulatorPort,
      panels: [
        {
          ...demo,
          active: true,
          panel: {
            name: 'Rhythm Hub Distribution',
            brand_color: '#7c3aed',
            brand_logo_url: `http://127.0.0.1:${port}/static/logo.svg`,
            subdomain: 'rhythmhub',
            custom_domain: 'panel.rhythmhub.example',
            // expires_at: left to the emulator, which answers a realistic 30 days ahead.
          },
        },
      ],
    }).catch((error) => {
      throw portInUse(error, 'mother emulator', 'EMULATOR_PORT', emulatorPort);
    });
    config = { baseUrl: emulator.url, ...demo };
  }

  const outboxFile = process.env.OUTBOX_FILE ?? './data/outbox.db';
  if (clusterRequested()) {
    await runCluster({ config: { ...config, demoControls: Boolean(emulator) }, emulator, outboxFile });
    return;
  }
  const panel = createPanelApp({
    ...config,
    stateFile: process.env.LICENSE_STATE_FILE ?? './data/license-state.json',
    outboxFile,
    appDbFile: process.env.APP_DB_FILE ?? './data/app.db',
    demoControls: Boolean(emulator),
  });
  panel.guard.on('lock', ({ reason }) => console.log(`[license] locked: ${reason}`));
  panel.guard.on('unlock', () => console.log('[license] unlocked'));
  panel.guard.on('error', (error) => {
    // A rejected state file or a clock set back is not a failed check: say what it is.
    const what = error.code === 'STATE_FILE_REJECTED' || error.code === 'CLOCK_ROLLBACK' ? 'note' : 'check failed';
    console.log(`[license] ${what}: ${error.message}`);
  });
  panel.outbox.on('delivered', (e) => console.log(`[outbox] #${e.id} delivered as release ${e.releaseId}`));
  panel.outbox.on('retrying', (e) => console.log(`[outbox] #${e.id} failed (${e.error.message}); retry in ${Math.round(e.delayMs / 1000)} s`));
  panel.outbox.on('dead', (e) => console.log(`[outbox] #${e.id} refused: ${e.message}`));
  const server = createServer(panel.app);
  await new Promise((resolve, reject) => {
    server.once('error', (error) => reject(portInUse(error, 'panel', 'PORT', port)));
    server.listen(port, '127.0.0.1', resolve);
  }).catch(async (error) => {
    await emulator?.close();
    throw error;
  });
  // Handlers first: a signal that arrives while the start-up lines are printed must stop us
  // cleanly, not kill the process with the default action.
  const stop = async () => {
    server.close();
    await panel.close();
    await emulator?.close();
    process.exit(0);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  exitWithParent(stop);
  const state = await panel.start();

  console.log(`\nExample panel:   http://127.0.0.1:${port}/   (license: ${state})`);
  printDemoLines(emulator);
}

/**
 * `npm start` runs this through a shell, which may exit on SIGTERM without passing it on: stop
 * with our parent instead of holding the ports as an orphan.
 */
function exitWithParent(stop) {
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) void stop();
  }, 1000).unref();
}

function printDemoLines(emulator) {
  if (emulator) {
    console.log(`Mother emulator: ${emulator.url}`);
    const admin = `${emulator.adminUrl}/panels/${demo.apiKey}`;
    console.log('\nFlip the license (the panel notices at its next check; or run it now):');
    console.log(`  lock:    curl -s -X POST -H 'content-type: application/json' -d '{"active":false,"reason":"Invoice overdue"}' ${admin}`);
    console.log(`  unlock:  curl -s -X POST -H 'content-type: application/json' -d '{"active":true}' ${admin}`);
    console.log(`  check now: curl -s -X POST http://127.0.0.1:${port}/healthz/refresh`);
    console.log(`\nFor operators: curl -s http://127.0.0.1:${port}/status   and   curl -s http://127.0.0.1:${port}/metrics`);
  }
  console.log('\nCtrl-C to stop.');
}

/** Cluster mode: the emulator stays here; the workers share the port and one verdict on Redis. */
async function runCluster({ config, emulator, outboxFile }) {
  const primary = await startClusterPrimary({ config, port, outboxFile }).catch(async (error) => {
    await emulator?.close();
    throw error;
  });
  const stop = async () => {
    await primary.stop();
    await emulator?.close();
    process.exit(0);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  exitWithParent(stop);
  console.log(`\nExample panel:   http://127.0.0.1:${port}/   (${primary.count} workers sharing one verdict on ${primary.redisUrl})`);
  console.log(`  licenses: ${primary.states.join(', ')}`);
  console.log(`  which worker answered, and what it knows: curl -s http://127.0.0.1:${port}/healthz`);
  printDemoLines(emulator);
}

/** Many panels by host: three demo panels on the emulator, one deployment on `port`. */
async function runPanels() {
  const emulator = await createMotherEmulator({
    port: emulatorPort,
    panels: Object.entries(DEMO_TENANTS).map(([host, { id, apiKey, apiSecret, panel }]) => ({
      apiKey,
      apiSecret,
      active: true,
      // The example serves each panel's logo itself, so the first page looks whole.
      panel: { ...panel, custom_domain: host, brand_logo_url: `http://${host}:${port}/logo/${id}.svg` },
    })),
  }).catch((error) => {
    throw portInUse(error, 'mother emulator', 'EMULATOR_PORT', emulatorPort);
  });
  const panels = createPanelsApp({ baseUrl: emulator.url, outboxFile: process.env.OUTBOX_FILE ?? './data/panels-outbox.db' });
  panels.outbox.on('delivered', (e) => console.log(`[outbox] panel ${e.panel}: #${e.id} delivered as release ${e.releaseId}`));
  panels.guard.on('lock', ({ panel, reason }) => console.log(`[license] panel ${panel} locked: ${reason}`));
  panels.guard.on('unlock', ({ panel }) => console.log(`[license] panel ${panel} unlocked`));
  const server = createServer(panels.app);
  await new Promise((resolve, reject) => {
    server.once('error', (error) => reject(portInUse(error, 'panel', 'PORT', port)));
    server.listen(port, '127.0.0.1', resolve);
  }).catch(async (error) => {
    await emulator.close();
    throw error;
  });
  const stop = async () => {
    server.close();
    await panels.close();
    await emulator.close();
    process.exit(0);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  exitWithParent(stop);
  console.log('\nOne deployment, three panels (browsers resolve *.localhost to this machine):');
  for (const host of Object.keys(DEMO_TENANTS)) console.log(`  http://${host}:${port}/`);
  console.log(`  or: curl -s -H 'Host: beats.localhost' http://127.0.0.1:${port}/api/status`);
  console.log(`  upload as one panel: curl -s -H 'Host: acme.localhost' -d title=Demo http://127.0.0.1:${port}/upload`);
  const admin = `${emulator.adminUrl}/panels/${DEMO_TENANTS['labelx.localhost'].apiKey}`;
  console.log(`\nLock one of them (the others keep serving; it notices at its next check):`);
  console.log(`  curl -s -X POST -H 'content-type: application/json' -d '{"active":false,"reason":"Invoice overdue"}' ${admin}`);
  console.log(`  check now: curl -s -X POST -H 'Host: labelx.localhost' http://127.0.0.1:${port}/healthz/refresh`);
  console.log('\nCtrl-C to stop.');
}

const run = cluster.isWorker ? runClusterWorker : main;
run().catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});

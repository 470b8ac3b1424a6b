import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { MotherEmulator } from '../../src/emulator/emulator.js';
import { type LicenseGuard, licenseGuard } from '../../src/index.js';
import { registerMetrics } from '../../src/metrics.js';
import { createReleaseOutbox, type ReleaseOutbox } from '../../src/outbox/outbox.js';
import { silentLogger } from '../support/guard-app.js';
import { API_KEY, API_SECRET, clientFor, startEmulator, waitFor } from '../support/helpers.js';

// Metrics read from a real prom-client registry after scripted scenarios against the emulator.
let emulator: MotherEmulator;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(() => emulator.close());
const closing: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  await Promise.all(closing.splice(0).map((item) => item.close()));
  emulator.setFaults({});
  emulator.setPanel(API_KEY, { active: true, reason: null });
  emulator.reset();
});

/** Every sample of a scrape, as `name{labels}` → value, parsed from the exposition text. */
async function scrape(registry: Registry): Promise<Map<string, number>> {
  const samples = new Map<string, number>();
  for (const line of (await registry.metrics()).split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    samples.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return samples;
}

function guardFor(): LicenseGuard {
  const guard = licenseGuard({
    client: clientFor(emulator, { timeoutMs: 1000 }),
    gracePeriodMs: 3600_000,
    retryBaseMs: 3600_000,
    retryMaxMs: 3600_000,
    logger: silentLogger,
  });
  closing.push(guard);
  return guard;
}

describe('registerMetrics()', () => {
  describe('with a guard', () => {
    it('follows a check, an outage (grace), a lock and an unlock', async () => {
      const registry = new Registry();
      const guard = guardFor();
      registerMetrics({ registry, guard });
      await guard.start();
      let m = await scrape(registry);
      expect(m.get('panel_license_state{state="active"}')).toBe(1);
      expect(m.get('panel_license_state{state="grace"}')).toBe(0);
      expect(m.get('panel_license_checks_total{result="ok"}')).toBe(1);
      expect(m.get('panel_license_check_duration_seconds_count{result="ok"}')).toBe(1);
      expect(m.get('panel_license_last_success_age_seconds')).toBeLessThan(5);
      expect(m.get('panel_license_grace_remaining_seconds')).toBeGreaterThan(3590);
      expect(m.get('panel_license_consecutive_failures')).toBe(0);
      expect(m.has('panel_license_store_up')).toBe(false);

      emulator.setFaults({ down: true });
      expect(await guard.refresh()).toBe('grace');
      m = await scrape(registry);
      expect(m.get('panel_license_state{state="grace"}')).toBe(1);
      expect(m.get('panel_license_checks_total{result="HTTP_STATUS"}')).toBe(1);
      expect(m.get('panel_license_consecutive_failures')).toBe(1);
      expect(m.get('panel_license_transitions_total{from="active",to="grace"}')).toBe(1);
      expect(m.get('panel_license_grace_remaining_seconds')).toBeLessThanOrEqual(3600);

      emulator.setFaults({});
      emulator.setPanel(API_KEY, { active: false, reason: 'Unpaid' });
      expect(await guard.refresh()).toBe('locked');
      emulator.setPanel(API_KEY, { active: true, reason: null });
      expect(await guard.refresh()).toBe('active');
      m = await scrape(registry);
      expect(m.get('panel_license_checks_total{result="inactive"}')).toBe(1);
      expect(m.get('panel_license_checks_total{result="ok"}')).toBe(2);
      expect(m.get('panel_license_transitions_total{from="grace",to="locked"}')).toBe(1);
      expect(m.get('panel_license_transitions_total{from="locked",to="active"}')).toBe(1);
      expect(m.get('panel_license_state{state="locked"}')).toBe(0);
      expect(m.get('panel_license_check_duration_seconds_count{result="ok"}')).toBe(2);
    });

    it('names, types, help and units follow Prometheus conventions', async () => {
      const registry = new Registry();
      const guard = guardFor();
      const outbox = createReleaseOutbox({ client: clientFor(emulator), file: ':memory:', logger: silentLogger, autoStart: false });
      closing.push(outbox);
      registerMetrics({ registry, guard, outbox });
      await guard.start();
      const text = await registry.metrics();
      const types = new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map(([, name, type]) => [name as string, type as string]));
      for (const [name, type] of types) {
        expect(name).toMatch(/^panel_license_[a-z_]+$/);
        if (type === 'counter') expect(name).toMatch(/_total$/);
        if (type === 'histogram') expect(name).toMatch(/_seconds$/);
        expect(text).toMatch(new RegExp(`^# HELP ${name} \\S`, 'm'));
      }
      expect(Object.fromEntries(types)).toMatchObject({
        panel_license_state: 'gauge',
        panel_license_checks_total: 'counter',
        panel_license_check_duration_seconds: 'histogram',
        panel_license_grace_remaining_seconds: 'gauge',
        panel_license_clock_offset_seconds: 'gauge',
        panel_license_transitions_total: 'counter',
        panel_license_outbox_releases: 'gauge',
        panel_license_outbox_oldest_pending_age_seconds: 'gauge',
        panel_license_outbox_deliveries_total: 'counter',
        panel_license_outbox_delivery_duration_seconds: 'histogram',
        panel_license_outbox_paused: 'gauge',
      });
    });

    it('does not silence the log of an unheard error', async () => {
      const warnings: unknown[][] = [];
      const guard = licenseGuard({
        client: clientFor(emulator, { timeoutMs: 1000 }),
        logger: { warn: (...a: unknown[]) => warnings.push(a), error: () => {} },
      });
      closing.push(guard);
      registerMetrics({ registry: new Registry(), guard });
      emulator.setFaults({ down: true });
      await guard.start();
      expect(warnings.some(([, fields]) => (fields as { event?: string }).event === 'check_failed')).toBe(true);
    });

    it('refuses what is not a registry, a guard or an outbox, and a second registration', () => {
      const guard = guardFor();
      expect(() => registerMetrics({ registry: {} as Registry, guard })).toThrow(/`registry` is not a prom-client registry/);
      expect(() => registerMetrics({ registry: new Registry(), guard: {} })).toThrow(/`guard` is not a guard from licenseGuard\(\)/);
      expect(() => registerMetrics({ registry: new Registry() })).toThrow(/are both missing/);
      const registry = new Registry();
      const first = registerMetrics({ registry, guard });
      expect(() => registerMetrics({ registry, guard })).toThrow(/already has panel-license-guard metrics/);
      first.unregister();
      expect(registry.getMetricsAsArray()).toHaveLength(0);
      registerMetrics({ registry, guard });
    });
  });

  describe('with an outbox', () => {
    function outboxFor(): ReleaseOutbox {
      const outbox = createReleaseOutbox({
        client: clientFor(emulator, { timeoutMs: 1000 }),
        file: ':memory:',
        logger: silentLogger,
        baseDelayMs: 20,
        maxDelayMs: 50,
        pollIntervalMs: 20,
        random: () => 0.5,
      });
      closing.push(outbox);
      return outbox;
    }

    it('counts rows by state, retries by error code, dead releases and deliveries', async () => {
      const registry = new Registry();
      const outbox = outboxFor();
      registerMetrics({ registry, outbox });
      emulator.setFaults({ endpoint: 'release.php', status: 502 });
      await outbox.enqueue({ title: 'Retried', remote_track_id: 'trk-r' });
      await waitFor(async () => (await scrape(registry)).get('panel_license_outbox_deliveries_total{outcome="retry",code="HTTP_STATUS"}'), 'a retry');
      let m = await scrape(registry);
      expect(m.get('panel_license_outbox_releases{state="pending"}')).toBe(1);
      expect(m.get('panel_license_outbox_oldest_pending_age_seconds')).toBeGreaterThanOrEqual(0);
      emulator.setFaults({ endpoint: 'release.php', status: 405 });
      await waitFor(async () => (await scrape(registry)).get('panel_license_outbox_releases{state="dead"}') === 1, 'a dead release');
      emulator.setFaults({});
      await outbox.enqueue({ title: 'Delivered', remote_track_id: 'trk-d' });
      await outbox.drain({ signal: AbortSignal.timeout(10_000) });
      m = await scrape(registry);
      expect(m.get('panel_license_outbox_deliveries_total{outcome="dead",code="METHOD_NOT_ALLOWED"}')).toBe(1);
      expect(m.get('panel_license_outbox_deliveries_total{outcome="delivered"}')).toBe(1);
      expect(m.get('panel_license_outbox_releases{state="delivered"}')).toBe(1);
      expect(m.get('panel_license_outbox_releases{state="pending"}')).toBe(0);
      expect(m.get('panel_license_outbox_oldest_pending_age_seconds')).toBe(0);
      expect(m.get('panel_license_outbox_delivery_duration_seconds_count{outcome="delivered"}')).toBe(1);
      expect(m.get('panel_license_outbox_paused')).toBe(0);
      expect(m.get('panel_license_outbox_in_flight')).toBe(0);
      expect(m.get('panel_license_outbox_delivery_paused')).toBe(0);
      await outbox.pause();
      const { id } = await outbox.enqueue({ title: 'Cancelled', remote_track_id: 'trk-c' });
      await outbox.cancel(id);
      // The memory store answers at once: let the last scrape's shared stats() expire, as between two scrapes.
      await new Promise((resolve) => setImmediate(resolve));
      m = await scrape(registry);
      expect(m.get('panel_license_outbox_delivery_paused')).toBe(1);
      expect(m.get('panel_license_outbox_cancelled_total')).toBe(1);
      expect(m.get('panel_license_outbox_releases{state="cancelled"}')).toBe(1);
    });

    it('keeps a scrape working when the outbox is closed', async () => {
      const registry = new Registry();
      const outbox = outboxFor();
      registerMetrics({ registry, outbox });
      await outbox.close();
      const m = await scrape(registry);
      expect(m.has('panel_license_outbox_releases{state="pending"}')).toBe(false);
      expect(m.has('panel_license_outbox_deliveries_total{outcome="delivered"}')).toBe(false);
    });
  });

  describe('with a guard for many panels', () => {
    it('gives per-panel series to panelSeries panels at most, the locked first, and totals for every panel', async () => {
      const many = await startEmulator(
        Array.from({ length: 120 }, (_, i) => ({ apiKey: `pk_m${i}`, apiSecret: `sk_m${i}_0123456789`, active: true, panel: { name: `M${i}` } })),
      );
      try {
        const guard = licenseGuard({
          baseUrl: many.url,
          logger: silentLogger,
          panels: {
            resolve: (host) => (/^m\d+\.example$/.test(host) ? { apiKey: `pk_${host.split('.')[0]}`, apiSecret: `sk_${host.split('.')[0]}_0123456789` } : null),
          },
        });
        closing.push(guard);
        for (let i = 0; i < 120; i++) expect(await guard.refresh(`m${i}.example`)).toBe('active');
        for (const i of [7, 70, 107]) {
          many.setPanel(`pk_m${i}`, { active: false, reason: 'Unpaid' });
          expect(await guard.refresh(`m${i}.example`)).toBe('locked');
        }
        const registry = new Registry();
        registerMetrics({ registry, guard, panelSeries: 10 });
        const samples = await scrape(registry);
        const labelled = [...samples.keys()].filter((key) => key.startsWith('panel_license_state{'));
        expect(new Set(labelled.map((key) => /panel="([^"]+)"/.exec(key)?.[1])).size).toBe(10);
        for (const i of [7, 70, 107]) expect(samples.get(`panel_license_state{panel="${guard.status(`m${i}.example`)?.panel}",state="locked"}`)).toBe(1);
        expect(samples.get('panel_license_panels{state="active"}')).toBe(117);
        expect(samples.get('panel_license_panels{state="locked"}')).toBe(3);
        expect(samples.get('panel_license_panels_failing')).toBe(0);
      } finally {
        await many.close();
      }
    });
  });

  describe('with an outbox for many panels', () => {
    it('gives per-panel series only to panels with a backlog, dead releases or failures, bounded by panelSeries', async () => {
      const registry = new Registry();
      const outbox = createReleaseOutbox({
        file: ':memory:',
        baseUrl: emulator.url,
        logger: silentLogger,
        autoStart: false,
        panels: { resolve: (panel) => (panel === 'tenant-unknown' ? null : { apiKey: API_KEY, apiSecret: API_SECRET }) },
      });
      closing.push(outbox);
      registerMetrics({ registry, outbox, panelSeries: 3 });
      // Five panels with a backlog of 1 to 5.
      for (let p = 1; p <= 5; p++)
        for (let n = 0; n < p; n++) await outbox.enqueue({ title: `T${p}-${n}`, remote_track_id: `t${p}-${n}` }, { panel: `tenant-${p}` });
      const m = await scrape(registry);
      const series = [...m.keys()].filter((key) => key.startsWith('panel_license_outbox_panel_releases{'));
      // The 3 with most pending, no more.
      expect(series.sort()).toEqual([
        'panel_license_outbox_panel_releases{panel="tenant-3",state="pending"}',
        'panel_license_outbox_panel_releases{panel="tenant-4",state="pending"}',
        'panel_license_outbox_panel_releases{panel="tenant-5",state="pending"}',
      ]);
      expect(m.get('panel_license_outbox_panel_releases{panel="tenant-5",state="pending"}')).toBe(5);
      expect(m.get('panel_license_outbox_panel_oldest_pending_age_seconds{panel="tenant-5"}')).toBeGreaterThanOrEqual(0);
      expect(m.get('panel_license_outbox_releases{state="pending"}')).toBe(15);
      // A panel the resolver does not know is held back: a failing series for it, none for the others.
      await outbox.enqueue({ title: 'Lost', remote_track_id: 'lost' }, { panel: 'tenant-unknown' });
      outbox.start();
      await waitFor(async () => (await scrape(registry)).get('panel_license_outbox_panel_failing{panel="tenant-unknown"}') === 1, 'the failing panel');
      await waitFor(async () => (await scrape(registry)).get('panel_license_outbox_releases{state="delivered"}') === 15, 'the deliveries');
      const after = await scrape(registry);
      expect([...after.keys()].filter((key) => key.startsWith('panel_license_outbox_panel_failing{'))).toEqual([
        'panel_license_outbox_panel_failing{panel="tenant-unknown"}',
      ]);
      expect([...after.keys()].filter((key) => key.startsWith('panel_license_outbox_panel_releases{'))).toEqual([
        'panel_license_outbox_panel_releases{panel="tenant-unknown",state="pending"}',
      ]);
      expect(() => registerMetrics({ registry: new Registry(), outbox, panelSeries: -1 })).toThrow(/`panelSeries` must be an integer from 0 to 10000/);
    });
  });
});

// `panels` mode's request path for hosts seen lately: the Host header as sent → what its requests
// get while the panel's verdict stands. At 1,000 panels what costs on this path is memory touched
// and clock reads, so a route is one object holding everything a request needs, its lifetime is
// counted in ticks of one shared timer (no clock read per request), and the panel is read for
// one field (its version) and written one (the tick it was last served in).
import type { Request } from 'express';
import { checkDomain } from './licensed-domains.js';
import type { ServeConfig } from './serve-config.js';
import type { GuardSnapshot } from './snapshot.js';

/** How often the routes' clock ticks; a route lives a whole number of ticks, never past its end. */
export const ROUTE_TICK_MS = 1000;

/** What a route reads of its panel (the guard's runtime of one panel provides it). */
export interface RoutedPanel {
  /** Bumped whenever what the panel serves changes: routes made before then stop serving. */
  readonly servingVersion: number;
  /** The tick the panel was last served in (written here; read for idleness). */
  servedTick: number;
  readonly config: ServeConfig;
  readonly monitor: { readonly entry: { readonly snapshot: GuardSnapshot } };
}

export interface Route<P extends RoutedPanel = RoutedPanel> {
  panel: P;
  /** The panel's `servingVersion` when this route was made: a newer one means the full path. */
  version: number;
  /** The tick from which the route no longer serves (Smi: no heap number read per request). */
  untilTick: number;
  /** Your id of the panel (`res.locals.panel`). */
  tenant: string | undefined;
  /**
   * The verdict lets this host's requests through as they are (not locked, the host licensed or
   * domains off): the request path sets the locals and calls `next()`, nothing else.
   */
  pass: boolean;
  /** The snapshot's locals, copied here so that a passing request reads this object alone. */
  branding: GuardSnapshot['branding'];
  license: GuardSnapshot['license'];
  snapshot: GuardSnapshot;
  /** The guard's shared config while the verdict does not lock; the panel's own when it does. */
  config: ServeConfig;
}

const PORT = /^:\d{1,5}$/;

/** A key routes only the host itself, as its canonical spelling, with or without a port. */
const isRouteKey = (key: string, host: string) => key === host || (key.startsWith(host) && PORT.test(key.slice(host.length)));

export class HostRoutes<P extends RoutedPanel = RoutedPanel> {
  /** Ticks of `ROUTE_TICK_MS` since the guard began (a Smi for 34 years). */
  tick = 0;
  readonly #routes = new Map<string, Route<P>>();
  readonly #timer: NodeJS.Timeout;

  constructor(
    /** The most routes kept; the oldest goes first (hosts in use are re-set, so they go last). */
    private readonly max: number,
  ) {
    // Counted from a monotonic clock, not by firings: a loop blocked for 9 s must not add 9 s to
    // every route's life (setInterval does not catch up on missed ticks).
    const began = performance.now();
    this.#timer = setInterval(() => {
      this.tick = Math.floor((performance.now() - began) / ROUTE_TICK_MS);
    }, ROUTE_TICK_MS);
    this.#timer.unref();
  }

  /** The route of `key` while it may serve, marking its panel served in this tick; else undefined. */
  serving(key: string | undefined): Route<P> | undefined {
    const route = key === undefined ? undefined : this.#routes.get(key);
    if (route === undefined || this.tick >= route.untilTick) return undefined;
    const { panel } = route;
    if (route.version !== panel.servingVersion) return undefined;
    panel.servedTick = this.tick;
    return route;
  }

  /**
   * Routes `key` to the panel's current verdict for `lifeMs` at most. Only the host's own spelling,
   * with a port at most: `Host: a.example:000…0` (15 KB of port) or `A.Example` take the full path
   * each time instead of a route each.
   */
  set(req: Request, key: string | undefined, host: string, panel: P, shared: ServeConfig, tenant: string | undefined, lifeMs: number): void {
    if (key === undefined || !isRouteKey(key, host)) return;
    // Re-set at the end of the map's order: the routes of hosts in use go last when it is full.
    this.#routes.delete(key);
    // Whole ticks that fit in what is left, so that a route ends early rather than late; up to a
    // quarter earlier at random, so that routes made together (a restart) are not remade together.
    const ticks = Math.floor((lifeMs * (1 - Math.random() / 4)) / ROUTE_TICK_MS);
    if (ticks <= 0) return;
    const { snapshot } = panel.monitor.entry;
    const unlocked = snapshot.lock === undefined;
    const route: Route<P> = {
      panel,
      version: panel.servingVersion,
      untilTick: this.tick + ticks,
      tenant,
      // A host refused as not licensed goes by serveVerdict (it reports it and may allow the path).
      pass: unlocked && checkDomain(req, panel.config.domains, snapshot.branding).kind !== 'misdirected',
      branding: snapshot.branding,
      license: snapshot.license,
      snapshot,
      // Serving an unlocked verdict reads only what every panel shares (domains, allow-list).
      config: unlocked ? shared : panel.config,
    };
    if (this.#routes.size >= this.max) this.#routes.delete(this.#routes.keys().next().value as string);
    this.#routes.set(key, route);
  }

  /** Whether a panel last served by a route in `servedTick` has had none for `idleMs` since. */
  unservedFor(servedTick: number, idleMs: number): boolean {
    // Served in tick t means at most one tick before tick t + 1 began: count from there.
    return (this.tick - servedTick - 1) * ROUTE_TICK_MS >= idleMs;
  }

  clear(): void {
    this.#routes.clear();
  }

  close(): void {
    clearInterval(this.#timer);
    this.#routes.clear();
  }
}

// The hosts the resolver remembers, by panel: what `guard.hostsOf(panel)` answers (the console's
// rows, events naming a panel's hosts) without reading every host remembered for each one.

/** Kept in step with the resolver's cache of answers: `add` when an answer is kept, `remove` when it goes. */
export class HostsByPanel {
  private readonly hosts = new Map<string, Set<string>>();

  /** `host` now answers for the panel of `runtimeKey` (`<panel id>:<secret print>`), and for `panel` (your id), if given. */
  add(host: string, runtimeKey: string, panel: string | undefined): void {
    for (const id of HostsByPanel.idsOf(runtimeKey, panel)) {
      const known = this.hosts.get(id);
      if (known) known.add(host);
      else this.hosts.set(id, new Set([host]));
    }
  }

  /** `host`'s answer (for `runtimeKey` and `panel`) was dropped or replaced. */
  remove(host: string, runtimeKey: string, panel: string | undefined): void {
    for (const id of HostsByPanel.idsOf(runtimeKey, panel)) {
      const known = this.hosts.get(id);
      known?.delete(host);
      if (known?.size === 0) this.hosts.delete(id);
    }
  }

  /** Up to `limit` hosts of `panel`, sorted. */
  of(panel: string, limit: number): string[] {
    const hosts: string[] = [];
    for (const host of this.hosts.get(panel) ?? []) {
      if (hosts.length === limit) break;
      hosts.push(host);
    }
    return hosts.sort();
  }

  /** The panel id a runtime key starts with (its secret print is 16 hex digits after the last `:`), and your id. */
  private static idsOf(runtimeKey: string, panel: string | undefined): string[] {
    const id = runtimeKey.slice(0, runtimeKey.lastIndexOf(':'));
    return panel === undefined || panel === id ? [id] : [id, panel];
  }
}

// Figure 8b: under HTTP load, the share of the server's CPU samples spent in this package's code
// and its dependencies: the single-panel guard vs `panels` mode with 1,000 panels by host
// (requests rotating over every host).

import { HOSTED_COUNT, hostOf } from './app.js';
import { closeAll, startChild } from './child.js';
import { load } from './load.js';
import { fmt, median, round } from './stats.js';

const pct = (share) => `${fmt(share * 100, 2)} %`;

async function profiledRun(server, { seconds, connections, hosts }) {
  await server.request('profileStart');
  await load(server.info.url, { duration: seconds, connections, hosts });
  return server.request('profileStop');
}

export async function measurePanelsProfile({ baseUrl, rounds, seconds, connections, log }) {
  const hosts = Array.from({ length: HOSTED_COUNT }, (_, i) => hostOf(i));
  const servers = {};
  try {
    servers.single = await startChild({ role: 'server', variant: 'guard', baseUrl });
    servers.panels = await startChild({ role: 'server', variant: 'panels', baseUrl });
    const setups = { single: { hosts: undefined }, panels: { hosts } };
    for (const name of ['single', 'panels']) await load(servers[name].info.url, { duration: 2, connections, hosts: setups[name].hosts });
    log(`  CPU profile: ${rounds} rounds x ${seconds} s each, ${connections} connections, ${HOSTED_COUNT} hosts in rotation`);
    const shares = { single: [], panels: [] };
    let top;
    for (let r = 0; r < rounds; r++) {
      for (const name of r % 2 === 0 ? ['single', 'panels'] : ['panels', 'single']) {
        const profile = await profiledRun(servers[name], { seconds, connections, hosts: setups[name].hosts });
        shares[name].push(profile.share);
        if (name === 'panels') top = profile.top;
      }
      log(`    round ${r + 1}/${rounds}: single panel ${pct(shares.single.at(-1))}, ${HOSTED_COUNT} panels ${pct(shares.panels.at(-1))} of samples`);
    }
    log(`    top of the package in panels mode: ${top.map(([name, count]) => `${name} (${count})`).join('; ')}`);
    const panels = median(shares.panels);
    const single = median(shares.single);
    return [
      {
        id: 'panels-cpu-share',
        figure: `8. Many panels: share of the server's CPU in the package under load, ${fmt(HOSTED_COUNT)} panels by host vs one`,
        measured: pct(panels),
        baseline: `${pct(single)} single panel`,
        ratio: round(panels / single, 3),
        target: '≤ 1 % of samples',
        met: panels <= 0.01,
        raw: { shares, top },
      },
    ];
  } finally {
    await closeAll(Object.values(servers));
  }
}

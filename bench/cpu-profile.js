// A V8 CPU profile of a server child, reduced to one figure: the share of its samples spent in
// this package's code and its dependencies (self time; idle excluded).
import { Session } from 'node:inspector/promises';

let session;

/** Starts sampling every `intervalUs` microseconds. */
export async function startProfile(intervalUs = 100) {
  session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: intervalUs });
  await session.post('Profiler.start');
}

/** Files of this package (its build, as the bench imports it) and of its runtime dependencies. */
const BUILD = new URL('../dist/', import.meta.url).href;
const DEPENDENCIES = /\/node_modules\/(lru-cache|zod|node-cron)\//;

const isPackage = (url) => url.startsWith(BUILD) || DEPENDENCIES.test(url);

/**
 * Stops sampling and reduces the profile: `{ samples, package, share, top }` where `top` names the
 * package functions with the most self samples (what to look at next).
 */
export async function stopProfile() {
  const { profile } = await session.post('Profiler.stop');
  await session.post('Profiler.disable');
  session.disconnect();
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  let counted = 0;
  let ours = 0;
  const byFunction = new Map();
  for (const id of profile.samples) {
    const frame = nodes.get(id).callFrame;
    if (frame.functionName === '(idle)') continue;
    counted++;
    if (!isPackage(frame.url)) continue;
    ours++;
    const name = `${frame.functionName || '(anonymous)'} ${frame.url.split('/').slice(-2).join('/')}:${frame.lineNumber + 1}`;
    byFunction.set(name, (byFunction.get(name) ?? 0) + 1);
  }
  if (process.env.PROFILE_LINES) {
    const lines = new Map();
    for (const node of profile.nodes)
      if (isPackage(node.callFrame.url))
        for (const tick of node.positionTicks ?? []) {
          const at = `${node.callFrame.url.split('/').slice(-1)[0]}:${tick.line}`;
          lines.set(at, (lines.get(at) ?? 0) + tick.ticks);
        }
    console.error([...lines].sort((a, b) => b[1] - a[1]).slice(0, 20));
  }
  const top = [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, 30);
  return { samples: counted, package: ours, share: counted === 0 ? 0 : ours / counted, top };
}

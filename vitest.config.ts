import { defineConfig } from 'vitest/config';

// Integration tests start real HTTP servers on 127.0.0.1:0; keep timeouts generous for a
// shared 2-core machine, and never assert absolute timings (see bench/ for those).
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // The build (dist/, which the example app and packaging tests import) is CommonJS under ESM
    // wrappers: Node loads it as it would for a user, not Vite's transform.
    server: { deps: { external: [/\/dist\//] } },
    // The JSON report lets .ci/run print a plain "N passed, N failed" closing line.
    reporters: ['default', 'json'],
    outputFile: { json: 'test-results.json' },
  },
});

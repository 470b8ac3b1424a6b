// Packs the package and uses it from throwaway ESM, CommonJS, Jest and TypeScript projects, as a
// user would, and lints the tarball with @arethetypeswrong/cli and publint.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '..');
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
let project: string;
let tarball: string;
const ENTRIES = ['', '/testing', '/sqlite', '/redis', '/postgres', '/mysql', '/metrics', '/express-locals', '/console'];

function run(cmd: string, args: string[], cwd = project): string {
  try {
    return execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    throw new Error(`${cmd} ${args.join(' ')} failed:\n${stdout ?? ''}${stderr ?? ''}`);
  }
}

// The golden vector of test/signing.test.ts (empty body), computed with openssl.
const EXPECTED = 'b838027ff0d3bd5fd302a222818f367a5ae0a045001f5fa5cdf4491e9d1eeb57';
const CALL = `signRequest({ apiKey: 'pk_live_demo', apiSecret: 'sk_test_secret', timestamp: 1700000000 })['X-Signature']`;

beforeAll(() => {
  if (!readdirSync(root).includes('dist')) throw new Error('dist/ is missing: run `npm run build` first (npm test does).');
  project = mkdtempSync(join(tmpdir(), 'plg-pack-'));
  // --ignore-scripts: `prepack` rebuilds dist/, which the other test files use meanwhile (npm test built it).
  tarball = join(project, run('npm', ['pack', '--silent', '--ignore-scripts', '--pack-destination', project], root).trim().split('\n').pop() ?? '');
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true }));
  // A TypeScript Express app has Node's and Express's types installed; so does this one (and
  // prom-client, for the metrics entry point).
  run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', tarball, '@types/node@20', '@types/express@5', 'prom-client@15']);
}, 180_000);
afterAll(() => {
  if (project) rmSync(project, { recursive: true, force: true });
});

describe('the packed tarball', () => {
  it('ships only dist and package metadata', () => {
    const files = readdirSync(join(project, 'node_modules', 'panel-license-guard')).sort();
    expect(files).toEqual(['CHANGELOG.md', 'LICENSE', 'README.md', 'dist', 'docs', 'package.json']);
    expect(readdirSync(join(project, 'node_modules', 'panel-license-guard', 'docs'))).toContain('partner-api.md');
  });

  it('imports from ESM', () => {
    writeFileSync(
      join(project, 'esm.mjs'),
      `import { signRequest } from 'panel-license-guard';\nimport { createMotherEmulator } from 'panel-license-guard/testing';\nimport { redisLicenseStore } from 'panel-license-guard/redis';\nimport { postgresOutboxStore } from 'panel-license-guard/postgres';\nimport { sqliteOutboxStore } from 'panel-license-guard/sqlite';\nconsole.log(typeof createMotherEmulator, typeof redisLicenseStore, typeof postgresOutboxStore, typeof sqliteOutboxStore, ${CALL});`,
    );
    // The redis, postgres and sqlite subpaths load without the optional drivers: they use the client or pool you pass, or load better-sqlite3 when a file is opened.
    expect(run('node', ['esm.mjs']).trim()).toBe(`function function function function ${EXPECTED}`);
  });

  it('requires from CommonJS', () => {
    writeFileSync(join(project, 'cjs.cjs'), `const { signRequest } = require('panel-license-guard');\nconsole.log(${CALL});`);
    expect(run('node', ['cjs.cjs']).trim()).toBe(EXPECTED);
  });

  it('gives `import` and `require` the same module: one copy of its state', () => {
    const checks = ENTRIES.map(
      (entry) =>
        `{ const esm = await import('panel-license-guard${entry}'); const cjs = require('panel-license-guard${entry}');\n` +
        `  const names = Object.keys(cjs).filter((k) => k !== '__esModule');\n` +
        `  if (names.some((k) => esm[k] !== cjs[k]) || Object.keys(esm).length !== names.length) throw new Error('${entry || '.'} differs');\n` +
        `  count += names.length; }`,
    );
    writeFileSync(
      join(project, 'same.mjs'),
      `import { createRequire } from 'node:module';\nconst require = createRequire(import.meta.url);\nlet count = 0;\n${checks.join('\n')}\nconsole.log(count);`,
    );
    expect(Number(run('node', ['same.mjs']).trim())).toBeGreaterThan(30);
  });

  it('passes @arethetypeswrong/cli in every resolution mode, and publint', () => {
    const attw = JSON.parse(run('node', [join(root, 'node_modules', '@arethetypeswrong', 'cli', 'dist', 'index.js'), tarball, '--format', 'json']));
    expect(Object.keys(attw.analysis.entrypoints).sort()).toEqual(
      ENTRIES.map((entry) => `.${entry}`)
        .concat('./package.json')
        .sort(),
    );
    for (const entry of Object.values(attw.analysis.entrypoints) as { resolutions: object }[])
      expect(Object.keys(entry.resolutions).sort()).toEqual(['bundler', 'node10', 'node16-cjs', 'node16-esm']);
    expect(attw.analysis.problems).toEqual([]);
    expect(attw.problems).toEqual({});
    expect(run('node', [join(root, 'node_modules', 'publint', 'src', 'cli.js'), tarball, '--strict'])).toMatch(/All good!/);
  }, 120_000);

  it('ships no source maps: stack traces name the files that ship', () => {
    const listing = run('tar', ['-tzf', tarball]);
    expect(listing).toMatch(/package\/dist\/index\.js\n/);
    expect(listing).not.toMatch(/\.map\n/);
  });

  it("runs under Jest's default configuration (CommonJS): every entry, the emulator, the guard and the outbox", () => {
    copyFileSync(join(root, 'test', 'fixtures', 'jest-consumer', 'everything.test.js'), join(project, 'everything.test.js'));
    const jest = join(root, 'node_modules', 'jest', 'bin', 'jest.js');
    run('node', [jest, '--ci', '--rootDir', project, '--testMatch', '**/everything.test.js', '--json', '--outputFile', join(project, 'jest.json')]);
    const report = JSON.parse(readFileSync(join(project, 'jest.json'), 'utf8'));
    expect({ passed: report.numPassedTests, failed: report.numFailedTests }).toEqual({ passed: 2, failed: 0 });
  }, 120_000);

  it('type-checks from CommonJS TypeScript with node10 resolution', () => {
    writeFileSync(
      join(project, 'commonjs.ts'),
      `${ENTRIES.filter((entry) => entry !== '/express-locals')
        .map((entry, i) => `import * as entry${i} from 'panel-license-guard${entry}';`)
        .join(
          '\n',
        )}\nimport 'panel-license-guard/express-locals';\nimport { licenseGuard } from 'panel-license-guard';\nimport { createMotherEmulator } from 'panel-license-guard/testing';\nconst made: typeof licenseGuard = entry0.licenseGuard;\nconsole.log(typeof made, typeof createMotherEmulator, typeof entry2.sqliteOutboxStore);\n`,
    );
    run('node', [
      tsc,
      '--noEmit',
      '--module',
      'commonjs',
      '--moduleResolution',
      'node10',
      '--strict',
      '--esModuleInterop',
      '--skipLibCheck',
      '--types',
      'node',
      'commonjs.ts',
    ]);
    run('node', [
      tsc,
      '--outDir',
      'out-cjs',
      '--module',
      'commonjs',
      '--moduleResolution',
      'node10',
      '--strict',
      '--esModuleInterop',
      '--skipLibCheck',
      '--types',
      'node',
      'commonjs.ts',
    ]);
    expect(run('node', ['out-cjs/commonjs.js']).trim()).toBe('function function function');
  }, 120_000);

  it('type-checks and runs from TypeScript', () => {
    writeFileSync(
      join(project, 'main.ts'),
      `import express from 'express';\nimport { licenseGuard, signRequest, type SignedHeaders } from 'panel-license-guard';\nimport 'panel-license-guard/express-locals';\nimport type { MotherEmulator } from 'panel-license-guard/testing';\nconst headers: SignedHeaders = signRequest({ apiKey: 'pk_live_demo', apiSecret: 'sk_test_secret', timestamp: 1700000000 });\nconst unused: MotherEmulator | undefined = undefined;\nconst guard = licenseGuard({ baseUrl: 'https://mother.example/api', apiKey: 'k', apiSecret: 's' });\nconst app = express().use(guard);\n// The README's listeners: a typed error union, and panel events that name their panel.\nguard.on('error', (error) => {\n  const code: string = error.code;\n  if (error.code === 'RESOLVE_FAILED') console.error(error.host, error.panel);\n  else if (error.code === 'HTTP_STATUS') console.error(error.status, code);\n});\nguard.on('lock', ({ panel, hosts, reason }) => console.error(panel, hosts, reason));\napp.get('/', (_req, res) => {\n  const name: string = res.locals.branding.name;\n  const days: number | null = res.locals.license.daysLeft;\n  res.send(name + String(days));\n});\nvoid guard.close();\nconsole.log(headers['X-Signature'], unused);\n`,
    );
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', strict: true, outDir: 'out', types: ['node'] },
        files: ['main.ts'],
      }),
    );
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
    run('node', [tsc, '-p', 'tsconfig.json']);
    expect(run('node', ['out/main.js']).trim()).toBe(`${EXPECTED} undefined`);
    // With the opt-in import, res.locals is typed: a wrong use fails to compile.
    writeFileSync(
      join(project, 'wrong.ts'),
      `import express from 'express';\nimport 'panel-license-guard/express-locals';\nexpress().get('/', (_req, res) => {\n  const wrong: number = res.locals.branding.name;\n  res.send(String(wrong));\n});\n`,
    );
    expect(() => run('node', [tsc, '--noEmit', '--module', 'NodeNext', '--moduleResolution', 'NodeNext', '--strict', '--types', 'node', 'wrong.ts'])).toThrow(
      /wrong\.ts.*Type 'string' is not assignable to type 'number'/s,
    );
    // Two runs of tsc over the package's types: a minute and more on a loaded 2-core machine.
  }, 120_000);

  it('installs the panel-license command', () => {
    expect(run(join(project, 'node_modules', '.bin', 'panel-license'), ['--help'])).toMatch(/Usage: panel-license <command>/);
  });
});

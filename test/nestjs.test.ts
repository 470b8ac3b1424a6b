// The NestJS example (example-app/nestjs, the app of docs/nestjs.md) run as its users run it: its
// Jest e2e suite under ts-jest, tsc over its own tsconfig, its main.ts stopped by SIGTERM. It
// imports the package by name, which resolves through node_modules and the exports map to dist/,
// as after `npm install` (its package.json depends on "file:../..": npm would make the same link).
import { execFile, spawn } from 'node:child_process';
import { lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '..');
const nest = join(root, 'example-app', 'nestjs');
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
const jest = join(root, 'node_modules', 'jest', 'bin', 'jest.js');
let scratch: string;

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs node with `args`; never throws, so a test can say what went wrong. A hang is killed. */
function node(args: string[], timeout = 120_000): Promise<Ran> {
  return new Promise((done) => {
    execFile(process.execPath, args, { cwd: root, encoding: 'utf8', timeout, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      done({ code: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout, stderr });
    });
  });
}

/** example-app/nestjs/node_modules/panel-license-guard → the repository (what `npm install` links for "file:../.."). */
function linkPackage(): void {
  const link = join(nest, 'node_modules', 'panel-license-guard');
  mkdirSync(join(nest, 'node_modules'), { recursive: true });
  try {
    if (lstatSync(link).isSymbolicLink() && resolve(join(nest, 'node_modules'), readlinkSync(link)) === root) return;
    throw new Error(`${link} exists and is not a link to ${root}: remove it.`);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  try {
    symlinkSync('../../..', link, 'dir');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error; // another run made it meanwhile
  }
}

beforeAll(() => {
  if (!lstatSync(join(root, 'dist', 'index.js'), { throwIfNoEntry: false })) throw new Error('dist/ is missing: run `npm run build` first (npm test does).');
  linkPackage();
  scratch = mkdtempSync(join(tmpdir(), 'plg-nest-'));
});
afterAll(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe('the NestJS example', () => {
  it('is what docs/nestjs.md shows: every TypeScript and JSON block there is an excerpt of the file it names', () => {
    const guide = readFileSync(join(root, 'docs', 'nestjs.md'), 'utf8');
    const blocks = [...guide.matchAll(/```(?:ts|typescript|jsonc)\n([\s\S]*?)```/g)].map((match) => match[1] as string);
    expect(blocks.length).toBeGreaterThanOrEqual(8);
    for (const block of blocks) {
      const [first = '', ...lines] = block.trimEnd().split('\n');
      const file = /^\/\/ (example-app\/nestjs\/\S+)$/.exec(first)?.[1];
      expect(file, `a block of docs/nestjs.md must start with the file it comes from: ${first}`).toBeDefined();
      const text = readFileSync(join(root, String(file)), 'utf8');
      // `// …` lines stand for what the excerpt leaves out; the rest appears in order, verbatim.
      let from = 0;
      for (const chunk of lines.join('\n').split(/^\s*\/\/ …\n/m)) {
        const at = text.indexOf(chunk.trimEnd(), from);
        expect(at, `${file} does not contain, at this point:\n${chunk}`).toBeGreaterThanOrEqual(0);
        from = at + chunk.trimEnd().length;
      }
    }
  });

  it('passes its Jest e2e suite, and Jest exits with no open handle', async () => {
    const report = join(scratch, 'jest.json');
    // No --forceExit: a server or socket left open (the app's, the emulator's) keeps Jest alive
    // until the timeout kills it, and --detectOpenHandles names it on stderr.
    const ran = await node([jest, '--config', join(nest, 'test', 'jest-e2e.json'), '--ci', '--detectOpenHandles', '--json', '--outputFile', report]);
    expect(ran.stderr).not.toMatch(/open handle|did not exit|failed to exit/i);
    const results = JSON.parse(readFileSync(report, 'utf8'));
    const failures = results.testResults.flatMap((file: { assertionResults: { status: string; fullName: string; failureMessages: string[] }[] }) =>
      file.assertionResults.filter((test) => test.status !== 'passed').map((test) => `${test.fullName}: ${test.failureMessages.join('\n')}`),
    );
    expect(failures).toEqual([]);
    expect({ passed: results.numPassedTests, failed: results.numFailedTests, suites: results.numTotalTestSuites }).toEqual({
      passed: 11,
      failed: 0,
      suites: 1,
    });
    expect(ran.code).toBe(0);
  }, 150_000);

  it('type-checks with the tsconfig `nest new` writes (module nodenext, CommonJS output)', async () => {
    const ran = await node([tsc, '-p', join(nest, 'tsconfig.json'), '--noEmit']);
    expect(ran.stdout + ran.stderr).toBe('');
  }, 150_000);

  it('type-checks with module commonjs and node10 resolution too (projects from older Nest CLIs)', async () => {
    const flags = ['--module', 'commonjs', '--moduleResolution', 'node10', '--resolvePackageJsonExports', 'false', '--incremental', 'false'];
    const ran = await node([tsc, '-p', join(nest, 'tsconfig.json'), '--noEmit', ...flags]);
    expect(ran.stdout + ran.stderr).toBe('');
  }, 150_000);

  it('builds, starts against the emulator, serves the branded page, and closes the guard and outbox on SIGTERM', async () => {
    // `npm run build && npm start` in the example's folder: dist/ there is git-ignored, as here.
    const built = await node([tsc, '-p', join(nest, 'tsconfig.build.json'), '--incremental', 'false']);
    expect(built.stdout + built.stderr).toBe('');
    const child = spawn(process.execPath, [join(nest, 'dist', 'main.js')], {
      cwd: nest,
      env: { ...process.env, PORT: '0', EMULATOR_PORT: '0', MOTHER_BASE_URL: '', NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    const exited = new Promise<{ code: number | null; signal: string | null }>((done) => child.on('exit', (code, signal) => done({ code, signal })));
    const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    try {
      const url = await new Promise<string>((done, fail) => {
        child.stdout.on('data', () => {
          const found = /Panel: (http:\/\/\S+?)\//.exec(output)?.[1];
          if (found) done(found);
        });
        void exited.then(() => fail(new Error(`main.js exited before listening:\n${output}`)));
      });
      const page = await fetch(`${url}/`, { headers: { accept: 'text/html' } });
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('Rhythm Hub (Nest)');
      child.kill('SIGTERM');
      const { code, signal } = await exited;
      // Nest runs the shutdown hooks, then re-raises the signal (or the process ends by itself).
      expect(code === 0 || signal === 'SIGTERM').toBe(true);
      expect(output).toMatch(/license guard and release outbox closed/);
    } finally {
      clearTimeout(killer);
      child.kill('SIGKILL');
    }
  }, 150_000);
});

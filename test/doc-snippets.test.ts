// Every JavaScript and TypeScript block of the README and docs/ is type-checked against the built
// package (strict, as a user's editor would), so a snippet cannot drift from the API. Snippets are
// fragments of an app: the names they take from around them (`app`, `baseUrl`, `guard`…) are
// declared once below with their real types, so what they do with them is checked too.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
// Inside the package, so that `import … from 'panel-license-guard'` resolves to its build.
const work = join(root, `.doc-snippets-${process.pid}`);
afterAll(() => rmSync(work, { recursive: true, force: true }));

const PRELUDE = `import type { Express } from 'express';
declare global {
  const app: Express;
  const baseUrl: string;
  const apiKey: string;
  const apiSecret: string;
  const licenseGuard: typeof import('panel-license-guard').licenseGuard;
  const createReleaseOutbox: typeof import('panel-license-guard').createReleaseOutbox;
  const redisLicenseStore: typeof import('panel-license-guard/redis').redisLicenseStore;
  const guard: import('panel-license-guard').LicenseGuard;
  const outbox: import('panel-license-guard').ReleaseOutbox;
  const client: import('panel-license-guard').MotherClient;
  const release: import('panel-license-guard').Release;
  const store: import('panel-license-guard').OutboxStore;
  // The query builders' own objects, as an app holds them.
  const knex: import('knex').Knex;
  const kysely: import('kysely').Kysely<any>;
  const drizzleDb: import('drizzle-orm/node-postgres').NodePgDatabase;
  const tracks: any;
  // The ORMs' own objects (Prisma's client is generated per app: its transaction, as it types it).
  const prisma: {
    $transaction<T>(work: (tx: { track: any; $queryRawUnsafe(sql: string, ...values: unknown[]): Promise<unknown> }) => Promise<T>, options?: object): Promise<T>;
  };
  const dataSource: import('typeorm').DataSource;
  const sequelize: import('sequelize').Sequelize;
  const sql: import('postgres').Sql;
  const em: import('@mikro-orm/postgresql').EntityManager;
  const Track: any;
  // Your own code around a snippet: anything.
  const tenants: any;
  const db: any;
  const myDb: any;
  const pool: any;
  const redis: any;
  const resolve: any;
  const log: { warn(...args: unknown[]): void; info(...args: unknown[]): void };
  const alertOps: (message: string) => void;
}
// An app whose sign-in (passport, a session…) puts the user on the request.
declare global {
  namespace Express {
    interface Request {
      user?: { isAdmin?: boolean };
    }
  }
}
export {};
`;

interface Snippet {
  file: string;
  line: number;
  code: string;
}

function snippets(): Snippet[] {
  const files = [
    'README.md',
    ...readdirSync(join(root, 'docs'))
      .filter((name) => name.endsWith('.md'))
      .sort()
      .map((name) => `docs/${name}`),
  ];
  const found: Snippet[] = [];
  for (const file of files) {
    const text = readFileSync(join(root, file), 'utf8');
    for (const match of text.matchAll(/```(js|ts|javascript|typescript)[^\n]*\n([\s\S]*?)```/g)) {
      // A block that names a file of example-app/nestjs is an excerpt of it (decorators, relative
      // imports): test/nestjs.test.ts checks it is that file's text, which tsc checks whole.
      if (match[2]?.startsWith('// example-app/nestjs/')) continue;
      found.push({ file, line: text.slice(0, match.index).split('\n').length + 1, code: match[2] as string });
    }
  }
  return found;
}

describe('code in the README and docs/', () => {
  it('type-checks against the built package, every block', () => {
    const all = snippets();
    expect(all.length).toBeGreaterThan(15);
    mkdirSync(work, { recursive: true });
    writeFileSync(join(work, 'prelude.d.ts'), PRELUDE);
    const names = all.map((snippet, i) => {
      const name = `snippet-${i}.ts`;
      writeFileSync(join(work, name), snippet.code);
      return name;
    });
    writeFileSync(
      join(work, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          target: 'ES2022',
          strict: true,
          // Callback parameters a snippet leaves untyped are inferred; only free-standing ones would be `any`.
          noImplicitAny: false,
          noEmit: true,
          skipLibCheck: true,
          types: ['node'],
          moduleDetection: 'force',
        },
        files: ['prelude.d.ts', ...names],
      }),
    );
    const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
    let output = '';
    try {
      execFileSync(process.execPath, [tsc, '-p', join(work, 'tsconfig.json')], { encoding: 'utf8', stdio: 'pipe' });
    } catch (error) {
      output = String((error as { stdout?: string }).stdout ?? error);
    }
    // Name the document and line of each failing block, not the temporary file.
    const located = output.replace(/snippet-(\d+)\.ts\((\d+),(\d+)\)/g, (_, i: string, line: string) => {
      const snippet = all[Number(i)] as Snippet;
      return `${snippet.file}:${snippet.line + Number(line) - 1}`;
    });
    expect(located).toBe('');
  });
});

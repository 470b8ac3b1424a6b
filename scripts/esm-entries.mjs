// Writes the ESM face of the CommonJS build: for every entry point of package.json's `exports`,
// dist/<entry>.mjs re-exports what the CommonJS module exports, and dist/<entry>.d.mts its types.
// `import` and `require` thus load the same module, so the package holds one copy of its state
// (no dual-package hazard: one guard registry, one outbox per store, one `instanceof` for errors).

import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const root = new URL('../', import.meta.url);
const dist = new URL('dist/', root);
const require = createRequire(dist);
const manifest = JSON.parse(readFileSync(new URL('package.json', root), 'utf8'));

// dist/ is CommonJS whatever the package's own `type` (its sources and tests are ESM).
writeFileSync(new URL('package.json', dist), `${JSON.stringify({ type: 'commonjs' }, null, 2)}\n`);

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;
for (const [subpath, target] of Object.entries(manifest.exports)) {
  const cjs = target?.require?.default;
  const esm = target?.import?.default;
  if (!cjs || !esm) continue; // ./package.json
  const name = cjs.replace(/^\.\/dist\//, './');
  const names = Object.keys(require(name)).filter((key) => key !== '__esModule' && key !== 'default');
  const invalid = names.filter((key) => !IDENTIFIER.test(key));
  if (invalid.length > 0) throw new Error(`${subpath}: exports ${invalid.join(', ')} cannot be named in ESM`);
  const lines = [
    `// The ESM entry of ${subpath === '.' ? 'panel-license-guard' : `panel-license-guard/${subpath.slice(2)}`}: the CommonJS module itself (one copy of its state).`,
  ];
  if (names.length === 0) lines.push(`import '${name}';`);
  else lines.push(`import cjs from '${name}';`, `export const { ${names.join(', ')} } = cjs;`);
  writeFileSync(new URL(esm.replace(/^\.\//, ''), root), `${lines.join('\n')}\n`);
  const types = target.import.types;
  writeFileSync(new URL(types.replace(/^\.\//, ''), root), `export * from '${name}';\n`);
}

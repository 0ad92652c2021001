// `npm run lint:layers` (.dependency-cruiser.cjs) refuses each layer violation: one tree per rule,
// with one file breaking it, cruised with the project's own configuration.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

const root = process.cwd();

/** depcruise's verdict on a tree of files: each rule broken, with the file breaking it */
function violations(files: Record<string, string>): string[] {
  const dir = mkdtempSync(join(tmpdir(), 'layers-'));
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', strict: true } }));
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  const bin = join(root, 'node_modules', '.bin', 'depcruise');
  let out: string;
  try {
    out = execFileSync(bin, ['src', '--config', join(root, '.dependency-cruiser.cjs'), '--output-type', 'json'], { cwd: dir, encoding: 'utf8' });
  } catch (err) {
    out = (err as { stdout: string }).stdout;
  }
  const result = JSON.parse(out) as { summary: { violations: { from: string; rule: { name: string } }[] } };
  return [...new Set(result.summary.violations.map((v) => `${v.rule.name} ${v.from}`))].sort();
}

const adapter = { 'src/adapters/sqlite/store.ts': 'export const store = 1;\n' };

t.test('when the layers are kept, then nothing is reported', async (t) => {
  t.same(
    violations({
      ...adapter,
      'src/domain/rule.ts': 'export const rule = 1;\n',
      // the spec's generated types, named with `import type` (domain/webhook-payloads.ts)
      'generated/api.d.ts': 'export interface components { x: number }\n',
      'src/domain/typed.ts': "import type { components } from '../../generated/api.js';\nexport const typed = (c: components) => c.x;\n",
      'src/ports/port.ts': "import type { } from '../domain/rule.js';\nexport interface Port { x: number }\n",
      'src/services/use.ts': "import { rule } from '../domain/rule.js';\nimport type { Port } from '../ports/port.js';\nexport const use = (p: Port) => p.x + rule;\n",
      'src/main.ts': "import { store } from './adapters/sqlite/store.js';\nexport const main = store;\n",
    }),
    [],
  );
});

// each case: the rule, and a file breaking it (with what it imports); all in one tree, one run
const cases: [string, string, Record<string, string>][] = [
  ['domain-is-pure', 'src/domain/rule.ts', { 'src/ports/p1.ts': 'export const p = 1;\n', 'src/domain/rule.ts': "import { p } from '../ports/p1.js';\nexport const rule = p;\n" }],
  ['domain-takes-only-types-from-generated', 'src/domain/untyped.ts', { 'generated/gen.d.ts': 'export declare const gen: number;\n', 'src/domain/untyped.ts': "import { gen } from '../../generated/gen.js';\nexport const untyped = gen;\n" }],
  ['ports-are-interfaces', 'src/ports/p2.ts', { 'src/services/s1.ts': 'export const s = 1;\n', 'src/ports/p2.ts': "import { s } from '../services/s1.js';\nexport const p = s;\n" }],
  ['services-see-domain-and-ports', 'src/services/s2.ts', { 'src/http/x.ts': 'export const x = 1;\n', 'src/services/s2.ts': "import { x } from '../http/x.js';\nexport const s = x;\n" }],
  ['adapters-only-from-main', 'src/http/handler.ts', { ...adapter, 'src/http/handler.ts': "import { store } from '../adapters/sqlite/store.js';\nexport const h = store;\n" }],
  ['adapters-keep-to-themselves', 'src/adapters/memory/bus.ts', { ...adapter, 'src/adapters/memory/bus.ts': "import { store } from '../sqlite/store.js';\nexport const bus = store;\n" }],
  ['adapters-implement-ports', 'src/adapters/sqlite/a.ts', { 'src/services/s3.ts': 'export const s = 1;\n', 'src/adapters/sqlite/a.ts': "import { s } from '../../services/s3.js';\nexport const a = s;\n" }],
  ['adapters-take-settings-as-arguments', 'src/adapters/postgres/db.ts', { 'src/config.ts': 'export type Level = 1;\n', 'src/adapters/postgres/db.ts': "import type { Level } from '../../config.js';\nexport const level: Level = 1;\n" }],
  ['push-over-ports', 'src/push/hub.ts', { 'src/services/s4.ts': 'export const s = 1;\n', 'src/push/hub.ts': "import { s } from '../services/s4.js';\nexport const hub = s;\n" }],
];

t.test('when a file breaks a layer rule, then lint:layers names the rule and the file', async (t) => {
  const found = violations(Object.assign({}, ...cases.map(([, , files]) => files)));
  t.same(found, cases.map(([rule, file]) => `${rule} ${file}`).sort());
});

// Compiles src/store/wal-coalesce.c, the SQLite extension that writes a transaction's WAL frames
// together at its commit, into dist/native/wal-coalesce.so. Run by `npm install`/`npm ci`
// (postinstall) and `npm run build`. It compiles against the SQLite headers better-sqlite3 ships,
// the same SQLite the service runs. Without a C compiler it says so and stops without failing:
// the service then writes the WAL as SQLite does by default, and logs that at start.
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const headers = join(dirname(createRequire(import.meta.url).resolve('better-sqlite3')), '..', 'deps', 'sqlite3');
const out = join(root, 'dist', 'native', 'wal-coalesce.so');
mkdirSync(dirname(out), { recursive: true });
const cc = process.env.CC || 'cc';
const args = ['-O2', '-fPIC', '-shared', '-Wall', '-Wextra', '-Werror', `-I${headers}`, '-o', out, join(root, 'src', 'store', 'wal-coalesce.c')];
try {
  execFileSync(cc, args, { stdio: 'inherit' });
} catch (err) {
  console.warn(`wal-coalesce: not built (${cc}: ${err.message.split('\n')[0]}); the service will write the WAL without it`);
  process.exit(0);
}

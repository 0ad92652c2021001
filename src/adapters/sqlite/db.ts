// Opens the SQLite database with the durability the service promises (WAL, synchronous=FULL
// by default, foreign keys on) and applies pending migrations before anything else runs.
import Database from 'better-sqlite3';
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { drizzle, type BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import { migrate } from 'drizzle-orm/better-sqlite3/migrator';
import { migrationsPath } from '../../paths.js';
import type { Synchronous } from '../../ports/storage.js';
import * as schema from './schema.js';

export type { Synchronous };

export type Db = BetterSQLite3Database<typeof schema> & { $client: Database.Database };

export interface OpenOptions {
  path: string; // ':memory:' for tests
  synchronous?: Synchronous;
}

/**
 * The database holds password hashes, token hashes and webhook signing secrets: its file, and
 * its -wal and -shm (SQLite gives them the database file's mode), are readable by the service's
 * own user only (0600), whatever the umask; a file an older version created 0644 is narrowed.
 * A new data folder is 0700.
 */
export function privateFile(path: string): void {
  closeSync(openSync(path, 'a', 0o600));
  for (const f of [path, `${path}-wal`, `${path}-shm`]) {
    if (existsSync(f) && (statSync(f).mode & 0o077) !== 0) chmodSync(f, 0o600);
  }
}

export function openDatabase({ path, synchronous = 'FULL' }: OpenOptions): Db {
  if (path !== ':memory:') {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    privateFile(path);
  }
  const sqlite = new Database(path);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma(`synchronous = ${synchronous}`);
  sqlite.pragma('busy_timeout = 5000');
  // SQLite's default page cache (2 MB): the 8 MiB one set here until 2026-11-29 earned nothing
  // steady over it (BENCHMARKS.md, Verdicts: `cache8m`, measured with and without in two runs);
  // a larger one is slower (at each COMMIT SQLite walks the cache for pages past the end of the
  // file: about 300 µs per group commit at 64 MiB, BENCHMARKS.md as of 966ad38).
  sqlite.pragma('temp_store = MEMORY');
  const db = drizzle(sqlite, { schema }) as Db;
  // drizzle runs every pending migration in one transaction, where `PRAGMA foreign_keys=OFF`
  // (emitted for table rebuilds) has no effect; so switch them off around it and check after.
  sqlite.pragma('foreign_keys = OFF');
  migrate(db, { migrationsFolder: migrationsPath });
  const broken = sqlite.pragma('foreign_key_check') as unknown[];
  if (broken.length > 0) throw new Error(`migration left ${broken.length} foreign key violations`);
  sqlite.pragma('foreign_keys = ON');
  return db;
}


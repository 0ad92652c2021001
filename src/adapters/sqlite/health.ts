// Readiness: the database answers a query; and, while writes fail for a storage error, the probe
// that tells when one would commit again (group-commit.ts).
import { statfsSync } from 'node:fs';
import { dirname } from 'node:path';
import type Database from 'better-sqlite3';
import type { Db } from './db.js';
import type { StorageProbe } from './engine/storage-errors.js';

/** free space on the database's file system below which the probe does not try a write */
export const PROBE_MIN_FREE_BYTES = 1024 * 1024;

export function databaseAnswers(db: Db): boolean {
  try {
    return db.$client.prepare('SELECT 1 AS ok').get() !== undefined;
  } catch {
    return false;
  }
}

/**
 * The probe for a database file (null in memory): ready once its file system has
 * PROBE_MIN_FREE_BYTES free (a full disk is the usual cause, and this asks the file system, not
 * the WAL, which may have room for a page or two while an incident's write does not fit); its
 * write sets the database header's user_version to what it is, one page through the WAL like
 * any commit (nothing reads user_version).
 */
export function storageProbe(sqlite: Database.Database): StorageProbe | null {
  const main = (sqlite.pragma('database_list') as { name: string; file: string }[]).find((d) => d.name === 'main');
  if (!main?.file) return null;
  const dir = dirname(main.file);
  return {
    ready: () => {
      const fs = statfsSync(dir);
      return fs.bavail * fs.bsize >= PROBE_MIN_FREE_BYTES;
    },
    write: () => sqlite.pragma(`user_version = ${Number(sqlite.pragma('user_version', { simple: true }))}`),
  };
}

// Coalesced WAL writes (wal-coalesce.c): a SQLite extension that holds a transaction's WAL
// frames and writes them together once its commit frame is complete (one system call per
// ~30 frames), instead of two per frame. Loading it makes it SQLite's default VFS for every
// connection this process opens from then on (the checkpoint thread's too); the database file
// is wrapped only to see its barriers and locks, and every other file is SQLite's own.
// Built by `npm install` and `npm run build` (scripts/build-wal-coalesce.mjs); without it the
// service writes the WAL as SQLite does by default, and says so at start.
import Database from 'better-sqlite3';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../paths.js';

export const walCoalescePath = join(projectRoot, 'dist', 'native', 'wal-coalesce.so');

export type WalWrites = { coalesced: true } | { coalesced: false; reason: string };

let loaded = false;

/** whether this process has loaded it: from then on every connection it opens uses it */
export function walCoalesceLoaded(): boolean {
  return loaded;
}

/**
 * Loads the extension once per process, so that connections opened after it coalesce their WAL
 * writes; those opened before keep the VFS they have.
 */
export function coalesceWalWrites(path = walCoalescePath): WalWrites {
  if (loaded) return { coalesced: true };
  if (!existsSync(path)) return { coalesced: false, reason: `${path} is not built (npm run build compiles it)` };
  const db = new Database(':memory:');
  try {
    // SQLite takes the entry point from the file name: sqlite3_walcoalesce_init
    db.loadExtension(path);
    loaded = true;
    return { coalesced: true };
  } catch (err) {
    return { coalesced: false, reason: (err as Error).message };
  } finally {
    db.close();
  }
}

/**
 * Frames the extension has held and the writes that wrote them, over the whole process; null
 * on a connection without it
 */
export function walCoalesceStats(db: Database.Database): { frames: number; writes: number } | null {
  let text: string;
  try {
    text = db.prepare('SELECT wal_coalesce_stats()').pluck().get() as string;
  } catch {
    return null;
  }
  const [frames, writes] = text.split(' ').map(Number);
  return { frames: frames!, writes: writes! };
}

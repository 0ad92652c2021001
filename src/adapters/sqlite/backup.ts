// An online backup of the SQLite database (`npm run backup`, scripts/backup.ts; restore in
// docs/deploy.md), safe while the service writes.
//
// `VACUUM INTO`, not the online backup API (better-sqlite3's `db.backup()`). It runs as one
// statement inside one read transaction, so it copies one WAL snapshot: every transaction
// committed before it began and none after. In WAL mode a reader never blocks the writer, and
// the checkpoint thread (engine/checkpointer.ts) never waits for a reader (its passes are
// PASSIVE, busy_timeout 0): while the backup reads, passes copy only the frames up to its
// snapshot, and the WAL cannot start over, so it grows by what is written meanwhile; it is
// started over by a later pass (the thread asks again once it has grown by another 32 MB).
// The backup API instead copies 100 pages per step, each step a read transaction of its own,
// and starts again from the first page whenever another process commits between two steps:
// on a 75 MB database with another process committing every 2 ms it had not finished after
// 15 s and 7 139 restarts (one step of every page finished in 0.12 s; VACUUM INTO in 0.16 s,
// measured 2026-11-25). VACUUM INTO also writes a compact file with no WAL of its own
// (rollback-journal mode; the service switches it back to WAL when it opens it).
//
// The only statement run on the database is VACUUM INTO: no migration, no write. Its
// connection is not read-only all the same (VACUUM INTO is refused on one that is
// `query_only`): a read-only connection to a stopped service's database creates its -wal and
// -shm and cannot remove them on close, owned then by whoever ran the backup; this one,
// being the last connection, removes them as the service's own close does (copying into
// the database file first what a crash may have left in the WAL, as the service's start
// would).
//
// The copy goes to a temporary name in FILE's directory, is checked (`PRAGMA integrity_check`
// and `foreign_key_check`), synced, and only then given FILE's name (its directory synced
// after), so a crash never leaves a partial file under FILE. Without `force`, a FILE that
// exists is refused, and one that appears meanwhile is not replaced (a hard link, which fails
// on an existing name, not a rename).
import Database from 'better-sqlite3';
import { closeSync, existsSync, fsyncSync, linkSync, openSync, realpathSync, renameSync, rmSync, statSync, unlinkSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { privateFile } from './db.js';

/** a backup that was refused or failed; its message is for the operator */
export class BackupError extends Error {}

/**
 * How far a backup moves every device's push sequence on (devices.push_seq, the last pushId
 * given out). A backup is restored after the pushes given out since it was taken are lost with
 * the rest, but the devices handled them: a device drops a push whose pushId it has handled
 * (asyncapi.yaml), and a reconnecting device asks for what follows the last pushId it had. Were
 * the restored sequence to go on from the backup's, the next pushes would reuse pushIds the
 * device has seen, and be dropped: lost alerts. So the copy's sequences go on a million past
 * the backup's (a device would need a million pushes between a backup and its restore to meet
 * them); the gap only means those pushIds were never given out. Pushes pending in the backup keep
 * their pushIds.
 */
export const RESTORE_PUSH_GAP = 1_000_000;

export interface BackupResult {
  file: string;
  bytes: number;
  /** rows of the incidents table in the copy */
  incidents: number;
  ms: number;
}

export interface BackupOptions {
  /** replace FILE if it exists */
  force?: boolean;
}

export interface FileCheck {
  /** what `PRAGMA integrity_check` and `foreign_key_check` found; empty if nothing */
  problems: string[];
  incidents: number;
}

/**
 * `PRAGMA integrity_check` and `foreign_key_check` of a database file, opened read-only; a
 * file SQLite cannot read at all (SQLITE_CORRUPT, SQLITE_NOTADB) is a problem too
 */
export function checkDatabaseFile(path: string): FileCheck {
  let db: Database.Database | undefined;
  try {
    db = new Database(path, { readonly: true, fileMustExist: true });
    const integrity = (db.pragma('integrity_check') as { integrity_check: string }[]).map((r) => r.integrity_check);
    const problems = integrity.length === 1 && integrity[0] === 'ok' ? [] : integrity;
    const keys = db.pragma('foreign_key_check') as { table: string; rowid: number; parent: string }[];
    for (const k of keys.slice(0, 10)) problems.push(`row ${k.rowid} of ${k.table} refers to a missing row of ${k.parent}`);
    if (keys.length > 10) problems.push(`and ${keys.length - 10} more foreign key violations`);
    if (problems.length > 0) return { problems, incidents: 0 };
    return { problems, incidents: Number(db.prepare('SELECT count(*) FROM incidents').pluck().get()) };
  } catch (err) {
    return { problems: [(err as Error).message], incidents: 0 };
  } finally {
    db?.close();
  }
}

function fsyncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** the real path of `path`; of its directory if it does not exist */
function real(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    try {
      return join(realpathSync(dirname(path)), basename(path));
    } catch {
      return resolve(path);
    }
  }
}

/**
 * Copies the database at `source` into `file` (see the top of this file). Throws BackupError
 * if it refuses or the copy fails its checks; leaves nothing behind but FILE, and FILE only if
 * it succeeded.
 */
export function backupDatabase(source: string, file: string, opts: BackupOptions = {}): BackupResult {
  const started = performance.now();
  if (!existsSync(source)) throw new BackupError(`no database at ${source}`);
  const live = real(source);
  if ([live, `${live}-wal`, `${live}-shm`, `${live}-journal`].includes(real(file))) {
    throw new BackupError(`${file} is the database itself; back up to another file`);
  }
  if (!opts.force && existsSync(file)) throw new BackupError(`${file} exists; pass --force to replace it`);
  if (!existsSync(dirname(file))) throw new BackupError(`no directory ${dirname(file)} for ${file}`);
  const tmp = join(dirname(file), `.${basename(file)}.${process.pid}.tmp`);
  rmSync(tmp, { force: true });
  // the copy holds what the database holds (password and token hashes, webhook secrets): it is
  // created empty and private (0600) before VACUUM INTO fills it, which takes an empty file
  privateFile(tmp);
  try {
    let db: Database.Database;
    try {
      db = new Database(source, { fileMustExist: true });
    } catch (err) {
      throw new BackupError(`cannot open the database at ${source}: ${(err as Error).message}`);
    }
    try {
      // a writer that holds the WAL's index lock (a checkpoint restarting the log) makes a new
      // reader wait a moment, not fail
      db.pragma('busy_timeout = 5000');
      db.prepare('VACUUM INTO ?').run(tmp);
    } catch (err) {
      throw new BackupError(`copying ${source} failed: ${(err as Error).message}`);
    } finally {
      db.close();
    }
    // the copy, not the database: its push sequences past anything a device may see meanwhile
    const copy = new Database(tmp, { fileMustExist: true });
    try {
      copy.prepare('UPDATE devices SET push_seq = push_seq + ?').run(RESTORE_PUSH_GAP);
    } finally {
      copy.close();
    }
    const check = checkDatabaseFile(tmp);
    if (check.problems.length > 0) {
      throw new BackupError(`the copy failed its integrity check, nothing was written to ${file}:\n  ${check.problems.join('\n  ')}`);
    }
    // VACUUM INTO does not promise a synced file: sync it before it gets FILE's name
    fsyncPath(tmp);
    if (opts.force) renameSync(tmp, file);
    else {
      try {
        linkSync(tmp, file);
        unlinkSync(tmp);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'EEXIST') throw new BackupError(`${file} appeared during the backup; pass --force to replace it`);
        // a file system without hard links: check again and rename
        if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'ENOSYS' && code !== 'EOPNOTSUPP') throw err;
        if (existsSync(file)) throw new BackupError(`${file} appeared during the backup; pass --force to replace it`);
        renameSync(tmp, file);
      }
    }
    fsyncPath(dirname(file));
    return { file, bytes: statSync(file).size, incidents: check.incidents, ms: performance.now() - started };
  } finally {
    rmSync(tmp, { force: true });
    rmSync(`${tmp}-journal`, { force: true });
  }
}

// The fsync of a group commit, taken off the event loop. With synchronous=FULL SQLite fsyncs
// the WAL inside every COMMIT, and the event loop waits for the disk; with every fsync made
// 2 ms slower, that wait cost a quarter of the creates per second (+29 % without it;
// BENCHMARKS.md as of 966ad38); on this machine's fast disk, +3 %.
//
// A group's transaction runs at synchronous=NORMAL instead: its COMMIT writes the WAL frames
// (the OS has them, so they survive a crash of this process) but does not wait for the disk.
// Then one fdatasync of the WAL file, on libuv's thread pool, makes every commit written
// before it durable, and only then is any caller of the group answered (group-commit.ts).
// NORMAL keeps the database consistent on its own (SQLite syncs the WAL header when the log
// restarts, and the WAL before each checkpoint); the fdatasync adds FULL's promise back: an
// answered write is on disk. Every other transaction on the connection stays at the
// configured level.
//
// What changes: a commit is visible to readers of this process before it is durable, for at
// most two fdatasyncs (as in InnoDB). Readers that act outside the process must not see it:
// the device hub and the event list read only up to the group commit's horizon.
import { closeSync, fdatasync, openSync } from 'node:fs';
import type Database from 'better-sqlite3';
import type { Synchronous } from '../db.js';

export interface DeferredSync {
  /** `fn` in an IMMEDIATE transaction whose COMMIT writes the WAL but does not wait for the disk */
  transaction<T>(fn: () => T): T;
  /** once `done` runs without an error, every commit made before this call is on disk */
  sync(done: (err: Error | null) => void): void;
  close(): void;
}

export class WalSync implements DeferredSync {
  private fd: number | null;
  /** set if the connection could not be put back to the configured level: no sync succeeds after */
  private broken: Error | null = null;
  private readonly restore: string;

  constructor(
    private readonly sqlite: Database.Database,
    /** the WAL file synced: next to the database file SQLite opened (a symlink resolved) */
    readonly file: string,
    private readonly level: 'FULL' | 'EXTRA',
  ) {
    this.restore = `PRAGMA synchronous = ${level}`;
    // any descriptor of the file will do: fdatasync flushes the file, not the descriptor
    this.fd = openSync(file, 'r');
  }

  transaction<T>(fn: () => T): T {
    // not prepared once: SQLite applies `PRAGMA synchronous = …` when the statement is
    // prepared, so running a prepared one again changes nothing. exec, not pragma(): no
    // result rows to read back, about 0.5 µs against 2–3 (BENCHMARKS.md as of 966ad38)
    this.sqlite.exec('PRAGMA synchronous = NORMAL');
    try {
      return this.sqlite.transaction(fn).immediate();
    } finally {
      // a failure here must not turn a COMMIT that happened into an error (the group would
      // be run again): it fails the next sync instead, which refuses every later write
      try {
        this.sqlite.exec(this.restore);
      } catch (err) {
        this.broken ??= new Error(`synchronous could not be set back to ${this.level}: ${(err as Error).message}`);
      }
    }
  }

  sync(done: (err: Error | null) => void): void {
    if (this.broken) return done(this.broken);
    if (this.fd === null) return done(new Error('the WAL file is closed'));
    fdatasync(this.fd, done);
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}

/**
 * The deferred fsync for a database opened with `synchronous` (db.ts); null where there is
 * nothing to defer: an in-memory database, or a level that does not sync at each commit.
 */
export function walSync(sqlite: Database.Database, synchronous: Synchronous): WalSync | null {
  if (synchronous !== 'FULL' && synchronous !== 'EXTRA') return null;
  // SQLite keeps the WAL next to the file it resolved, not next to a symlink to it
  const main = (sqlite.pragma('database_list') as { name: string; file: string }[]).find((d) => d.name === 'main');
  if (!main?.file) return null; // in memory
  if (sqlite.pragma('journal_mode', { simple: true }) !== 'wal') throw new Error('the database is not in WAL mode');
  return new WalSync(sqlite, `${main.file}-wal`, synchronous);
}

// The fsync of a group commit, taken off the event loop. With synchronous=FULL SQLite fsyncs
// the WAL inside every COMMIT, and the event loop waits for the disk: measured on the bench,
// that wait is about a tenth of a create (creates/s +11 %, updates +16 % with it gone).
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
// What changes: a commit is visible to readers of this process before it is durable, for the
// length of one fdatasync (as in InnoDB). Readers that act outside the process must not see
// it: the device hub reads only pushes up to the group commit's horizon (pushes.ts). A
// failed fdatasync leaves it unknown what is on disk; the group commit then refuses writes
// until the service is restarted (SQLite recovers the database from what the disk has).
import { closeSync, fdatasync, openSync } from 'node:fs';
import type Database from 'better-sqlite3';
import type { Synchronous } from './db.js';

export interface DeferredSync {
  /** `fn` in an IMMEDIATE transaction whose COMMIT writes the WAL but does not wait for the disk */
  transaction<T>(fn: () => T): T;
  /** once `done` runs without an error, every commit made before this call is on disk */
  sync(done: (err: Error | null) => void): void;
  close(): void;
}

class WalSync implements DeferredSync {
  private fd: number | null;

  constructor(
    private readonly sqlite: Database.Database,
    walPath: string,
    private readonly level: 'FULL' | 'EXTRA',
  ) {
    // any descriptor of the file will do: fdatasync flushes the file, not the descriptor
    this.fd = openSync(walPath, 'r');
  }

  transaction<T>(fn: () => T): T {
    // not prepared once: SQLite applies `PRAGMA synchronous = …` when the statement is
    // prepared, so running a prepared one again changes nothing
    this.sqlite.pragma('synchronous = NORMAL');
    try {
      return this.sqlite.transaction(fn).immediate();
    } finally {
      this.sqlite.pragma(`synchronous = ${this.level}`);
    }
  }

  sync(done: (err: Error | null) => void): void {
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
export function walSync(sqlite: Database.Database, path: string, synchronous: Synchronous): DeferredSync | null {
  if (path === ':memory:' || (synchronous !== 'FULL' && synchronous !== 'EXTRA')) return null;
  return new WalSync(sqlite, `${path}-wal`, synchronous);
}

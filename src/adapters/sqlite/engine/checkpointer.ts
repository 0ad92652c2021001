// WAL checkpoints on a thread of their own. SQLite's automatic checkpoint runs inside the
// COMMIT that crosses `wal_autocheckpoint` pages: it copies every page changed since the last
// one into the database file and fsyncs it, on the event loop, and every request waiting for
// that group (and the next) waits with it. Measured on the bench database (groups of 25
// creates): commit p90 5 ms and p99 11 ms with automatic checkpoints every 1 000 pages, against
// 1.5–1.8 ms and 2.5 ms with this thread doing them.
//
// The thread opens its own connection and runs PASSIVE checkpoints every `intervalMs`: they
// never block the writer, and the writer restarts the WAL from its beginning once a
// checkpoint has caught up. That needs a pass to finish between two write transactions, which
// under steady writes seldom happens by itself (four times in 10 s of creates at 1 000/s,
// BENCHMARKS.md as of 966ad38). The event loop's own automatic checkpoint, kept as a backstop at
// `backstopPages`, copies the little the thread has not and syncs (20–30 ms on a large
// database). 40 000 pages (160 MB of WAL) makes that rare: p99 of creates at 1 000/s on a
// large database 11–12 ms with it, 30–33 ms with a 10 000-page backstop (two alternating runs
// each). It also covers a thread that has died.
//
// So the WAL is started over on purpose. Without that, it grew toward the backstop (from 53 to
// 92 MB in 10 s of creates at 1 000/s, BENCHMARKS.md as of 966ad38), every commit appending to a growing file.
// Once the WAL holds `restartFrames` frames (8 192: 32 MB at 4 KiB pages), the thread says so
// (`whenWalLarge`), then again only after as many more; the service then holds its next write
// group (group-commit.ts, `holdUntil`) while the thread makes one more pass. No incident write
// is appended meanwhile, so that pass, which copies only what was written since the last one,
// normally ends with every frame copied, and the held group's COMMIT writes from the WAL's
// beginning again, over a file that no longer grows. (A write of the device hub or a login
// during the pass can spoil it; the thread then asks again later.) Measured at 1 000 creates/s (BENCHMARKS.md,
// BENCHMARKS.md as of 966ad38): one such pass about every 0.5 s, holding one group for 1–2 ms.
//
// Every 10 ms, not 50: each pass then copies and syncs fewer pages, and a commit waiting on
// the disk behind it waits less. On a database of ~230 000 incidents (40 s of creates at 50
// connections), p99 of creates paced at 1 000/s from when each was due, two runs of two
// windows each: 50 ms 6.4–7.8 ms, 20 ms 4.9–5.8, 10 ms 4.9–6.3, 5 ms 4.8–5.3; creates/s at
// 50 connections meanwhile 5 700–5 900 at 10 and 50 ms (5 400–5 600 at 5 and 20 ms).
//
// (It used to pass every 100 ms while the service was saturated, CheckpointCadence; measured
// with and without it in one run, 2026-11-25, it earned nothing on any bench figure, and it went:
// BENCHMARKS.md, Verdicts.) A pass after a burst can copy too much to end within the restart's
// hold (6–21 ms), so before saying the WAL is large the thread catches up with passes of its own
// until one takes under 2 ms (at most three).
//
// A pass that fails does not end the thread: on a full disk a checkpoint cannot grow the
// database file (SQLITE_FULL), copies what it can and leaves the WAL as it is, every frame still
// there to copy again (SQLite marks frames copied only once the database file is synced). The
// thread says so once (`onPassFailed`), tries again every `retryMs` (1 s, not every 10 ms: a
// pass that fails may have copied many pages in vain), and says so again once a pass succeeds
// (`onPassesResumed`). The exception is a failed fsync (SQLITE_IOERR_FSYNC: of the WAL, which
// every pass syncs first, or of the database file): what the disk has is unknown then, as after
// the WAL's own fdatasync fails (group-commit.ts), so the thread makes no pass after it and
// tells `whenSyncFails`, which refuses every write until the service restarts.
import { Worker } from 'node:worker_threads';
import { createRequire } from 'node:module';
import type Database from 'better-sqlite3';
import type { Synchronous } from '../db.js';

/** SQLite's own `wal_autocheckpoint`, restored when the thread stops or fails */
const SQLITE_DEFAULT_AUTOCHECKPOINT = 1000;
/** 32 MB of WAL at 4 KiB pages */
const DEFAULT_RESTART_FRAMES = 8192;
/** the pass interval (DB_CHECKPOINT_INTERVAL_MS's default) */
export const CHECKPOINT_INTERVAL_MS = 10;

export interface CheckpointResult {
  busy: number;
  /** frames in the WAL */
  log: number;
  /** frames copied into the database file */
  checkpointed: number;
}

export interface CheckpointerOptions {
  path: string;
  synchronous: Synchronous;
  intervalMs?: number;
  backstopPages?: number;
  /** frames in the WAL at which the thread says so (0: never); see whenWalLarge() */
  restartFrames?: number;
  /** after a pass fails, the next one waits this long (default 1 000 ms) */
  retryMs?: number;
  /** the thread has died (the event loop checkpoints again) */
  onError?: (err: Error) => void;
  /** a pass failed after the last one that succeeded; the thread tries again every retryMs */
  onPassFailed?: (err: Error) => void;
  /** a pass succeeded after onPassFailed */
  onPassesResumed?: () => void;
}

// Plain CommonJS run by the worker (eval), so it needs no build step or loader of its own.
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path, { fileMustExist: true });
db.pragma('busy_timeout = 0');
db.pragma('synchronous = ' + workerData.synchronous);
const checkpoint = () => {
  const r = db.pragma('wal_checkpoint(PASSIVE)')[0];
  return { busy: r.busy, log: r.log, checkpointed: r.checkpointed };
};
// Says the WAL is large once it holds restartFrames frames; about the same WAL again only
// after restartFrames more (a restart that did not happen is asked for again later, not after
// every pass). A WAL that started over is told apart by its checkpoint sequence number (bytes
// 12-15 of its header), which SQLite raises each time; it is read before the pass, so that a
// WAL that starts over during the pass is not taken for a new one holding the old one's frames.
const fs = require('node:fs');
const restartFrames = workerData.restartFrames;
const walPath = db.pragma('database_list').find((d) => d.name === 'main').file + '-wal';
const header = Buffer.alloc(4);
const walGeneration = () => {
  let fd;
  try {
    fd = fs.openSync(walPath, 'r');
    return fs.readSync(fd, header, 0, 4, 12) === 4 ? header.readUInt32BE(0) : null;
  } catch {
    return null;
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
};
let saidOf = null;
let sayAt = restartFrames;
const pass = () => {
  const generation = restartFrames > 0 ? walGeneration() : null;
  const r = checkpoint();
  if (restartFrames > 0 && r.log >= restartFrames) {
    if (generation !== saidOf) sayAt = restartFrames;
    if (r.log >= sayAt) {
      saidOf = generation;
      sayAt = r.log + restartFrames;
      // so that the held pass copies only the last few ms of writes (see the top of checkpointer.ts)
      for (let i = 0; i < 3; i++) {
        const started = performance.now();
        checkpoint();
        if (performance.now() - started < 2) break;
      }
      parentPort.postMessage({ large: r.log });
    }
  }
  return r;
};
// A failed pass (top of checkpointer.ts): said once, tried again after retryMs; a failed fsync
// ends the passes for good.
const errorOf = (err) => ({ message: String(err && err.message), code: err && err.code });
let failing = false;
let retryAt = 0;
let syncFailed = false;
const tryPass = () => {
  if (syncFailed) throw Object.assign(new Error('no checkpoint after a failed fsync'), { code: 'SQLITE_IOERR_FSYNC' });
  try {
    const r = pass();
    if (failing) {
      failing = false;
      parentPort.postMessage({ resumed: true });
    }
    return r;
  } catch (err) {
    if (err && (err.code === 'SQLITE_IOERR_FSYNC' || err.code === 'SQLITE_IOERR_DIR_FSYNC')) {
      syncFailed = true;
      clearInterval(timer);
      parentPort.postMessage({ syncFailed: errorOf(err) });
    } else {
      retryAt = performance.now() + workerData.retryMs;
      if (!failing) parentPort.postMessage({ failed: errorOf(err) });
      failing = true;
    }
    throw err;
  }
};
const tick = () => {
  if (failing && performance.now() < retryAt) return;
  try {
    tryPass();
  } catch {
    // told above
  }
};
let timer = setInterval(tick, workerData.intervalMs);
const answer = (id, fn) => {
  try {
    parentPort.postMessage({ id, result: fn() });
  } catch (err) {
    parentPort.postMessage({ id, error: errorOf(err) });
  }
};
parentPort.on('message', (m) => {
  if (m.type === 'interval' && !syncFailed) {
    clearInterval(timer);
    timer = setInterval(tick, m.ms);
  }
  if (m.type === 'checkpoint') answer(m.id, tryPass);
  if (m.type === 'synchronous') answer(m.id, () => db.pragma('synchronous', { simple: true }));
  if (m.type === 'stop') {
    clearInterval(timer);
    db.close();
    parentPort.close();
  }
});
`;

/** an error of the thread, as it was posted */
function threadError(e: { message: string; code?: string }): Error & { code?: string } {
  return Object.assign(new Error(e.message), e.code === undefined ? {} : { code: e.code });
}

export class Checkpointer {
  private readonly worker: Worker;
  private readonly waiting = new Map<number, { resolve: (r: never) => void; reject: (e: Error) => void }>();
  private next = 0;
  private stopped = false;
  /** halted after a failed fsync: nothing may turn a checkpoint back on */
  private halted = false;
  private onWalLarge: ((frames: number) => void) | null = null;
  private onSyncFailed: ((err: Error) => void) | null = null;
  /** a failed fsync the thread reported before anyone listened */
  private syncFailure: Error | null = null;

  constructor(
    private readonly sqlite: Database.Database,
    opts: CheckpointerOptions,
  ) {
    const driver = createRequire(import.meta.url).resolve('better-sqlite3');
    this.worker = new Worker(WORKER, {
      eval: true,
      workerData: {
        driver,
        path: opts.path,
        synchronous: opts.synchronous,
        intervalMs: opts.intervalMs ?? CHECKPOINT_INTERVAL_MS,
        restartFrames: opts.restartFrames ?? DEFAULT_RESTART_FRAMES,
        retryMs: opts.retryMs ?? 1000,
      },
    });
    this.worker.unref();
    type Message =
      | { id: number; result: never }
      | { id: number; error: { message: string; code?: string } }
      | { large: number }
      | { failed: { message: string; code?: string } }
      | { resumed: true }
      | { syncFailed: { message: string; code?: string } };
    this.worker.on('message', (m: Message) => {
      if ('large' in m) {
        this.onWalLarge?.(m.large);
        return;
      }
      if ('failed' in m) {
        if (!this.halted) opts.onPassFailed?.(threadError(m.failed));
        return;
      }
      if ('resumed' in m) {
        if (!this.halted) opts.onPassesResumed?.();
        return;
      }
      if ('syncFailed' in m) {
        this.syncFailure = threadError(m.syncFailed);
        this.onSyncFailed?.(this.syncFailure);
        return;
      }
      const waiter = this.waiting.get(m.id);
      if ('error' in m) waiter?.reject(threadError(m.error));
      else waiter?.resolve(m.result);
      this.waiting.delete(m.id);
      if (this.waiting.size === 0 && !this.stopped) this.worker.unref();
    });
    this.worker.on('error', (err) => {
      // An error the thread raised before halt() may still be delivered after it. The
      // halted service must then keep every checkpoint off, and this is no fallback to report.
      if (this.halted) return;
      // the event loop checkpoints on its own again, as SQLite does by default
      if (this.sqlite.open) this.sqlite.pragma(`wal_autocheckpoint = ${SQLITE_DEFAULT_AUTOCHECKPOINT}`);
      this.stopped = true;
      opts.onError?.(err);
    });
    this.worker.on('exit', () => {
      for (const w of this.waiting.values()) w.reject(new Error('the checkpoint thread has stopped'));
      this.waiting.clear();
    });
    this.sqlite.pragma(`wal_autocheckpoint = ${opts.backstopPages ?? 40_000}`);
  }

  /**
   * `then` is called with the frames in the WAL whenever it has grown by `restartFrames` frames
   * since it last started over or was reported
   */
  whenWalLarge(then: (frames: number) => void): void {
    this.onWalLarge = then;
  }

  /**
   * `then` is called if an fsync of a pass fails (the thread makes no pass after it): the same
   * as a failed sync of the WAL (GroupCommitter.syncFailed)
   */
  whenSyncFails(then: (err: Error) => void): void {
    this.onSyncFailed = then;
    if (this.syncFailure) then(this.syncFailure);
  }

  /** passes every `ms` from now on */
  every(ms: number): void {
    if (!this.stopped) this.worker.postMessage({ type: 'interval', ms });
  }

  /** one PASSIVE checkpoint now, on the thread */
  checkpoint(): Promise<CheckpointResult> {
    return this.ask('checkpoint');
  }

  /** the thread connection's `synchronous` (0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA) */
  synchronous(): Promise<number> {
    return this.ask('synchronous');
  }

  private ask<T>(type: string): Promise<T> {
    if (this.stopped) return Promise.reject(new Error('the checkpoint thread has stopped'));
    const id = this.next++;
    return new Promise<T>((resolve, reject) => {
      this.worker.ref(); // an answer is awaited: keep the process alive for it
      this.waiting.set(id, { resolve: resolve as (r: never) => void, reject });
      this.worker.postMessage({ type, id });
    });
  }

  /**
   * Stops the thread for good and leaves the backstop as it is; a thread error delivered later
   * changes nothing. From the call on, the thread starts no pass; one already under way
   * finishes. After a failed fsync nothing may copy the WAL into the database file: the kernel
   * may have dropped pages it could not write, and reading them back would copy whatever it
   * now returns (app.ts turns the backstop off too; main.ts exits and recovery reads the disk).
   */
  halt(): void {
    this.halted = true;
    if (this.stopped) return;
    this.stopped = true;
    void this.worker.terminate();
  }

  /** stops the thread and closes its connection; the event loop checkpoints on its own again */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    const exited = new Promise<void>((resolve) => this.worker.once('exit', () => resolve()));
    this.worker.ref(); // until the thread has closed its connection
    this.worker.postMessage({ type: 'stop' });
    await exited;
    if (this.sqlite.open) this.sqlite.pragma(`wal_autocheckpoint = ${SQLITE_DEFAULT_AUTOCHECKPOINT}`);
  }
}

// Group commit: with synchronous=FULL every COMMIT waits for an fsync, which caps a
// one-transaction-per-request design at the disk's fsync rate. Write operations that arrive
// in the same event-loop turn run in ONE transaction instead, one after another (so each
// sees the writes of those before it), and every caller is answered only after that COMMIT
// is durable.
//
// Isolation of a failing operation: a savepoint per operation would give it, but costs
// about a quarter of an operation's time (SQLite copies every page it touches into the
// savepoint journal). Operations are synchronous functions of the stored state, so the
// group instead runs optimistically without savepoints; if one throws, the whole group is
// rolled back and every operation is run again in a transaction of its own. The failing
// one fails alone, the others commit with the results they would have had.
//
// Durability off the event loop (wal-sync.ts): given a DeferredSync, a group's COMMIT does
// not wait for the disk. Its callers wait for an fdatasync of the WAL instead, which runs on
// libuv's thread pool while the event loop goes on parsing, validating, reading and pushing.
// The next group commits meanwhile, in its own turn, so its SQL runs while the disk works; the
// groups committed meanwhile share the next fdatasync, started as soon as this one ends. (The
// next group used to wait up to 1 ms into a running fdatasync to grow; measured with and
// without it in one run it earned nothing, and it went: BENCHMARKS.md, Verdicts.)
// `horizon()` tells readers how far the disk has everything.
//
// A hold (`holdUntil`) keeps every group back until a promise settles, or for at most a given
// time: the checkpoint thread's last pass before the WAL starts over (checkpointer.ts) needs no
// write transaction to begin while it copies.
//
// Storage errors (storage-errors.ts says which kind is which): a failed sync refuses every write
// from then on; an error while a group runs or commits fails that group only, and the next one
// tries again (a probe write tries while none comes).
//
// Measured (BENCHMARKS.md as of 966ad38), creates/s at 50 connections against a COMMIT that
// waits for its own fsync: with every fsync made 2 ms slower, +29 %; on this machine's disk
// (fdatasync about 0.25 ms) +3 %. Committing the next group at once instead was −6 % here
// (groups half as large); holding it for the whole fdatasync lost the slow disk's gain.
import type Database from 'better-sqlite3';
import { isStorageError } from '../errors.js';
import type { DeferredSync } from './wal-sync.js';
import { isSyncFailure, StorageFailure, type StorageProbe } from './storage-errors.js';

interface Pending {
  op: () => unknown;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

/** committed, answered once the disk has it */
interface Committed {
  done: { p: Pending; result: unknown }[];
  /** `mark()` just before the group ran */
  mark: number;
}

export interface GroupCommitOptions {
  maxGroup?: number;
  /** null or absent: each COMMIT is durable when it returns (SQLite's own fsync, or none) */
  durability?: DeferredSync | null;
  /** a position that only grows with writes (the last event id): see horizon() */
  mark?: () => number;
  /**
   * The highest position an operation's result shows it wrote (0 for none). Given, `mark()` is
   * read once and then kept up from the committed results, instead of once per group.
   */
  markOf?: (result: unknown) => number;
  /** told of each group whose COMMIT succeeded (before its sync), with its number of operations; not of an operation retried alone */
  onGroup?: (size: number) => void;
  /** told once, when a sync fails */
  onFailure?: (failure: StorageFailure) => void;
  /** a sync pending for longer than this makes healthy() false (a disk that hangs) */
  stallMs?: number;
  /** told when a group fails for a storage error after the last one committed (the error), and when one commits again (null) */
  onStorage?: (unavailable: Error | null) => void;
  /** while writes fail for a storage error, tried every `everyMs` (default 1000) to see if one would commit again */
  probe?: StorageProbe | null;
}

export class GroupCommitter {
  private queue: Pending[] = [];
  private scheduled = false;
  /** committed groups waiting for the next sync, and those the sync under way covers */
  private waiting: Committed[] = [];
  private syncing: Committed[] | null = null;
  /** set by a failed sync: what is on disk is unknown from then on */
  failure: StorageFailure | null = null;
  /** the storage error of the last group that failed for one, until a group commits again */
  unavailable: Error | null = null;
  private readonly onStorage: (unavailable: Error | null) => void;
  private readonly probe: StorageProbe | null;
  private probeTimer: NodeJS.Timeout | null = null;
  /** after a failed sync, the horizon stays where the disk last had everything */
  private frozenHorizon = Infinity;
  /** sizes of the groups committed so far, and the fsyncs that made them durable */
  readonly stats = { groups: 0, operations: 0, largest: 0, retried: 0, syncs: 0, holds: 0 };
  private readonly maxGroup: number;
  private readonly durability: DeferredSync | null;
  private readonly mark: () => number;
  private readonly markOf: ((result: unknown) => number) | null;
  /** the mark after the last group committed, while it is known without asking */
  private lastMark: number | null = null;
  private readonly onFailure: (failure: StorageFailure) => void;
  private readonly onGroup: (size: number) => void;
  private readonly stallMs: number;
  /** set while holdUntil() keeps groups back */
  private hold: Promise<void> | null = null;
  private syncStartedAt = 0;
  /** close() waiting for the last sync */
  private idleWaiters: (() => void)[] = [];
  private closed = false;

  constructor(
    private readonly sqlite: Database.Database,
    opts: GroupCommitOptions = {},
  ) {
    this.maxGroup = opts.maxGroup ?? 256;
    this.durability = opts.durability ?? null;
    this.mark = opts.mark ?? (() => 0);
    this.markOf = opts.markOf ?? null;
    this.onFailure = opts.onFailure ?? (() => {});
    this.onGroup = opts.onGroup ?? (() => {});
    this.stallMs = opts.stallMs ?? 10_000;
    this.onStorage = opts.onStorage ?? (() => {});
    this.probe = opts.probe ?? null;
  }

  /** Runs `op` (synchronous, may start its own nested transaction) in the next group. */
  run<T>(op: () => T): Promise<T> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ op, resolve: resolve as (v: unknown) => void, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /**
   * Every write up to the returned mark is on disk; Infinity when every committed write is.
   * A write is visible on this connection from its COMMIT; anything that acts on a write
   * outside this process (a push to a device) reads only up to here.
   */
  horizon(): number {
    return this.syncing?.[0]?.mark ?? this.waiting[0]?.mark ?? this.frozenHorizon;
  }

  /** false once a sync has failed, while one has been pending for longer than `stallMs`, and while writes fail for a storage error */
  healthy(): boolean {
    return !this.failure && !this.unavailable && !(this.syncing && performance.now() - this.syncStartedAt > this.stallMs);
  }

  /** after the last operation queued so far is answered; then the durability's file is closed */
  async close(): Promise<void> {
    this.closed = true;
    if (this.probeTimer) clearTimeout(this.probeTimer);
    this.probeTimer = null;
    if (this.queue.length > 0 || this.waiting.length > 0 || this.syncing) await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
    this.durability?.close();
  }

  /**
   * Another sync of this database failed (the checkpoint thread's fsync): the same as a failed
   * sync of the WAL (storage-errors.ts). Every write not yet answered is refused, and every
   * later one.
   */
  syncFailed(err: Error): void {
    this.fail(err, []);
  }

  /**
   * Calls `start` and commits no group until the promise it returns settles (fulfilled or
   * rejected alike) or `maxMs` have passed, whichever is first; operations queue meanwhile and
   * are committed together after. Does nothing, `start` included, while a hold is on or once a
   * sync has failed (everything is refused at once then).
   */
  holdUntil(start: () => Promise<unknown>, maxMs: number): void {
    if (this.hold || this.failure) return;
    this.stats.holds += 1;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, maxMs)));
    let until: Promise<unknown>;
    try {
      until = start();
    } catch (err) {
      until = Promise.reject(err);
    }
    this.hold = Promise.race([until, timeout])
      .catch(() => {})
      .then(() => {
        clearTimeout(timer);
        this.hold = null;
        this.releaseHeld();
      });
  }

  private settleIdle(): void {
    if (this.queue.length > 0 || this.waiting.length > 0 || this.syncing) return;
    for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  private flush(): void {
    this.scheduled = false;
    if (this.hold && !this.failure) return; // committed when the hold ends
    // Another transaction is open on the connection (an identity unit of work is meant to end in
    // its own turn: adapters/sqlite/gate.ts): better-sqlite3 would nest the group in it as a
    // savepoint, and that transaction's rollback would take the group's answered writes with it.
    // The group waits for it to end, a turn at a time.
    if (this.sqlite.inTransaction && !this.failure) {
      this.scheduled = true;
      setImmediate(() => this.flush());
      return;
    }
    while (this.queue.length > 0) {
      const group = this.queue.splice(0, this.maxGroup);
      if (this.failure) for (const p of group) p.reject(this.failure);
      else this.commit(group);
    }
    this.startSync();
    this.settleIdle();
  }

  private transaction<T>(fn: () => T): T {
    return this.durability ? this.durability.transaction(fn) : this.sqlite.transaction(fn).immediate();
  }

  private commit(group: Pending[]): void {
    let mark = 0;
    try {
      if (this.durability) mark = this.lastMark ??= this.mark();
    } catch (err) {
      for (const p of group) p.reject(err);
      return;
    }
    const done: Committed['done'] = [];
    let whole = false;
    try {
      const results = this.transaction(() => group.map((p) => p.op()));
      this.stats.groups += 1;
      this.stats.operations += group.length;
      this.stats.largest = Math.max(this.stats.largest, group.length);
      group.forEach((p, i) => done.push({ p, result: results[i] }));
      whole = true;
    } catch (err) {
      if (isSyncFailure(err) || isStorageError(err)) {
        // the storage failed, not an operation (storage-errors.ts): nothing of the group is stored
        const reason = this.storageError(err as Error);
        for (const p of group) p.reject(reason);
        return;
      }
      // an operation (or the COMMIT) failed: nothing of the group is stored; run each alone
      this.stats.retried += group.length;
      for (const p of group) {
        if (this.failure) {
          p.reject(this.failure);
          continue;
        }
        try {
          done.push({ p, result: this.transaction(p.op) });
        } catch (err) {
          // nothing of it was stored: no need to wait for the disk
          p.reject(isSyncFailure(err) || isStorageError(err) ? this.storageError(err as Error) : err);
        }
      }
    }
    if (done.length > 0 && this.unavailable) {
      this.unavailable = null;
      try {
        this.onStorage(null);
      } catch {
        // only the listener's own business
      }
    }
    if (whole) {
      // after the try above: a listener that throws must not make a committed group run again
      try {
        this.onGroup(group.length);
      } catch {
        // only the listener's own business
      }
    }
    if (!this.durability) {
      for (const d of done) d.p.resolve(d.result);
      return;
    }
    if (done.length > 0) this.waiting.push({ done, mark });
    // only what committed counts: a rolled-back attempt's ids are given out again
    if (this.markOf) for (const d of done) this.lastMark = Math.max(this.lastMark ?? 0, this.markOf(d.result));
    else this.lastMark = null;
  }

  /** the group held (by holdUntil): committed in the next turn, after the answers */
  private releaseHeld(): void {
    if (this.queue.length > 0 && !this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  /** a sync failed: `batch` (the groups it covered) and every group committed since are refused, and every later write */
  private fail(err: Error, batch: Committed[]): void {
    const first = !this.failure;
    const failure = (this.failure ??= err instanceof StorageFailure ? err : new StorageFailure(err));
    const unsynced = [...batch, ...(this.syncing ?? []), ...this.waiting];
    this.frozenHorizon = Math.min(this.frozenHorizon, unsynced[0]?.mark ?? this.frozenHorizon);
    // what was committed while this sync ran cannot be trusted to reach the disk either
    for (const c of [...batch, ...this.waiting]) for (const d of c.done) d.p.reject(failure);
    this.waiting = [];
    // a sync still under way is refused when it ends (startSync)
    this.releaseHeld(); // to be refused
    this.settleIdle();
    if (first) {
      try {
        this.onFailure(failure);
      } catch {
        // the callers have their answer; a failing listener must not take that away
      }
    }
  }

  /** a transaction failed for a storage error; returns what its callers are refused with */
  private storageError(err: Error): Error {
    if (isSyncFailure(err)) {
      this.fail(err, []);
      return this.failure!;
    }
    const first = !this.unavailable;
    this.unavailable = err;
    if (first) {
      try {
        this.onStorage(err);
      } catch {
        // only the listener's own business
      }
    }
    this.scheduleProbe();
    return err;
  }

  /** while writes fail for a storage error, a probe write once every `everyMs`, if none commits meanwhile */
  private scheduleProbe(): void {
    const probe = this.probe;
    if (!probe || this.probeTimer || this.closed) return;
    this.probeTimer = setTimeout(() => {
      this.probeTimer = null;
      if (!this.unavailable || this.failure || this.closed) return;
      let ready = false;
      try {
        ready = probe.ready();
      } catch {
        // not ready
      }
      if (!ready) return this.scheduleProbe();
      this.run(() => probe.write()).then(
        () => {},
        () => this.scheduleProbe(), // an error other than the storage's: tried again all the same
      );
    }, probe.everyMs ?? 1000);
    this.probeTimer.unref();
  }

  private startSync(): void {
    if (!this.durability || this.syncing || this.waiting.length === 0) return;
    const batch = (this.syncing = this.waiting);
    this.waiting = [];
    this.syncStartedAt = performance.now();
    this.durability.sync((err) => {
      this.syncing = null;
      // a sync that failed meanwhile (syncFailed) leaves this one's success in doubt as well
      if (err || this.failure) {
        this.fail(err ?? this.failure!, batch);
        return;
      }
      this.stats.syncs += 1;
      for (const c of batch) for (const d of c.done) d.p.resolve(d.result);
      this.releaseHeld();
      this.startSync(); // the groups committed meanwhile
      this.settleIdle();
    });
  }
}

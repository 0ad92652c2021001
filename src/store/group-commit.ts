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
import type Database from 'better-sqlite3';

interface Pending {
  op: () => unknown;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

export class GroupCommitter {
  private queue: Pending[] = [];
  private scheduled = false;
  /** sizes of the groups committed so far (for the benchmark and tests) */
  readonly stats = { groups: 0, operations: 0, largest: 0, retried: 0 };

  constructor(
    private readonly sqlite: Database.Database,
    private readonly maxGroup = 256,
  ) {}

  /** Runs `op` (synchronous, may start its own nested transaction) in the next group. */
  run<T>(op: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ op, resolve: resolve as (v: unknown) => void, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    while (this.queue.length > 0) {
      const group = this.queue.splice(0, this.maxGroup);
      this.commit(group);
    }
  }

  private commit(group: Pending[]): void {
    let results: unknown[];
    try {
      results = this.sqlite.transaction(() => group.map((p) => p.op())).immediate();
    } catch {
      // an operation (or the COMMIT) failed: nothing of the group is stored; run each alone
      this.stats.retried += group.length;
      for (const p of group) {
        try {
          p.resolve(this.sqlite.transaction(p.op).immediate());
        } catch (err) {
          p.reject(err);
        }
      }
      return;
    }
    this.stats.groups += 1;
    this.stats.operations += group.length;
    this.stats.largest = Math.max(this.stats.largest, group.length);
    group.forEach((p, i) => p.resolve(results[i]));
  }
}

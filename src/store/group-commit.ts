// Group commit: with synchronous=FULL every COMMIT waits for an fsync, which caps a
// one-transaction-per-request design at the disk's fsync rate. Write operations that arrive
// in the same event-loop turn are run in ONE transaction instead, each inside its own
// savepoint (better-sqlite3 nests transactions as savepoints), and every caller is answered
// only after that COMMIT is durable. A failing operation rolls back only its savepoint.
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
  readonly stats = { groups: 0, operations: 0, largest: 0 };

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
    const results: { ok: boolean; value: unknown }[] = [];
    try {
      this.sqlite.transaction(() => {
        for (const p of group) {
          try {
            // a nested transaction: a savepoint, rolled back alone if the op throws
            results.push({ ok: true, value: this.sqlite.transaction(p.op)() });
          } catch (err) {
            results.push({ ok: false, value: err });
          }
        }
      }).immediate();
    } catch (err) {
      for (const p of group) p.reject(err);
      return;
    }
    this.stats.groups += 1;
    this.stats.operations += group.length;
    this.stats.largest = Math.max(this.stats.largest, group.length);
    group.forEach((p, i) => {
      const r = results[i]!;
      if (r.ok) p.resolve(r.value);
      else p.reject(r.value);
    });
  }
}

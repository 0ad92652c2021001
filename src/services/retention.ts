// The retention sweeper (DESIGN section 13, issue 29): in the background, every `intervalMs`, a
// pass runs each sweep of the storage's list (ports/retention.ts) batch after batch until it has
// nothing left past its cutoff, so the database does not grow without bound.
//
// A batch is small (`batchSize` rows looked at, one short transaction; on SQLite one operation of
// the group commit, so it holds the writer for a millisecond or two), and the pass gives the
// service room between batches: after a batch that held the writer d ms (as the adapter measured
// it; else its round trip) it waits d × (1/duty − 1) ms (at least a turn of the event loop), so
// that with a backlog it takes about `duty` of the writer and requests the rest
// (`npm run bench -- --only sweeper` measures creates with and without it). A pass counts what it removed per table and logs it at info; a failure is logged at warn
// and the pass ends, to start again at the next interval: never a crash. With several nodes
// (PostgreSQL) each sweeps; the adapter makes that safe.
import type { Clock } from '../ports/clock.js';
import type { RetentionCutoffs, RetentionPort } from '../ports/retention.js';

export interface RetentionOptions {
  /** rows older than this many days go; 0: events and tokens are kept forever (sessions still expire) */
  retentionDays: number;
  /** between the end of a pass and the start of the next */
  intervalMs: number;
  /** the first pass, this long after start (default: the interval, at most a minute) */
  firstAfterMs?: number;
  /** rows a batch looks at, at most */
  batchSize: number;
  /** the share of the time a pass with a backlog takes (0 < duty <= 1) */
  duty: number;
  /** a session last seen this long ago has expired (services/authenticator.ts SESSION_IDLE_MS) */
  sessionIdleMs: number;
}

export const DEFAULT_RETENTION: Omit<RetentionOptions, 'retentionDays' | 'intervalMs' | 'sessionIdleMs'> = {
  batchSize: 250,
  duty: 0.01,
};

export interface RetentionLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

const DAY_MS = 86_400_000;

export class RetentionSweeper {
  private timer: NodeJS.Timeout | null = null;
  private pass: Promise<Record<string, number>> | null = null;
  private stopped = false;
  /** ends the pause between two batches early */
  private wake: (() => void) | null = null;
  /** what every pass so far removed, per table */
  readonly total: Record<string, number> = {};

  constructor(
    private readonly port: RetentionPort,
    private readonly clock: Clock,
    private readonly log: RetentionLog,
    private readonly opts: RetentionOptions,
  ) {}

  /** the first pass after `firstAfterMs`, then one every `intervalMs` after each ends */
  start(): void {
    if (this.stopped || this.timer) return;
    this.schedule(this.opts.firstAfterMs ?? Math.min(this.opts.intervalMs, 60_000));
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.sweep().then(() => this.schedule(this.opts.intervalMs));
    }, ms);
    this.timer.unref();
  }

  /** the cutoffs as of now */
  cutoffs(): RetentionCutoffs {
    const now = this.clock.now().getTime();
    return {
      retainedSince: this.opts.retentionDays > 0 ? new Date(now - this.opts.retentionDays * DAY_MS).toISOString() : null,
      sessionsIdleSince: new Date(now - this.opts.sessionIdleMs).toISOString(),
      now: new Date(now).toISOString(),
    };
  }

  /**
   * One pass (the one running, if any): every sweep until it has nothing left past its cutoff.
   * Resolves with what it removed per table; never rejects (a failure is logged and ends it).
   */
  sweep(): Promise<Record<string, number>> {
    if (!this.pass) {
      this.pass = this.run().finally(() => {
        this.pass = null;
      });
    }
    return this.pass;
  }

  private async run(): Promise<Record<string, number>> {
    const cutoffs = this.cutoffs();
    const removed: Record<string, number> = {};
    const started = performance.now();
    let batches = 0;
    for (const name of this.port.sweeps) {
      let from: number | null = 0;
      while (from !== null && !this.stopped) {
        const t0 = performance.now();
        let held: number | undefined;
        try {
          const batch = await this.port.sweep(name, cutoffs, this.opts.batchSize, from);
          from = batch.next;
          held = batch.heldMs;
          for (const [table, n] of Object.entries(batch.removed)) if (n > 0) removed[table] = (removed[table] ?? 0) + n;
        } catch (err) {
          this.log.warn({ err, sweep: name, removed }, 'retention sweep failed; it runs again at its next interval');
          return this.counted(removed);
        }
        batches += 1;
        if (from !== null) await this.pause(held ?? performance.now() - t0);
      }
    }
    if (Object.keys(removed).length > 0) {
      this.log.info({ removed, batches, ms: Math.round(performance.now() - started), retainedSince: cutoffs.retainedSince }, 'retention sweep removed old rows');
    }
    return this.counted(removed);
  }

  private counted(removed: Record<string, number>): Record<string, number> {
    for (const [table, n] of Object.entries(removed)) this.total[table] = (this.total[table] ?? 0) + n;
    return removed;
  }

  /** after a batch that took `ms`: room for the service (at least a turn of the event loop) */
  private pause(ms: number): Promise<void> {
    const wait = ms * (1 / this.opts.duty - 1);
    if (wait < 1) return new Promise((resolve) => setImmediate(resolve));
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.wake = null;
        resolve();
      }, wait);
      // stop() ends the wait at once
      this.wake = () => {
        clearTimeout(timer);
        this.wake = null;
        resolve();
      };
    });
  }

  /** no pass starts any more; resolves when the one running (if any) has ended its batch */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.wake?.();
    await this.pass;
  }
}

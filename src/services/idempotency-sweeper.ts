// The Idempotency-Key sweep in the background: every IDEMPOTENCY_SWEEP_MS, keys past
// IDEMPOTENCY_TTL_H are removed in batches (IncidentService.sweepIdempotencyKeys); a key past its
// retention is taken as new before then anyway. One sweep at a time; a failure is logged and the
// next interval tries again. Started and stopped with the other background jobs (services/jobs.ts).
import type { Job } from './jobs.js';

/** how often Idempotency-Keys past their retention are swept */
export const IDEMPOTENCY_SWEEP_MS = 10_000;

export interface KeySweepLog {
  info(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

export class IdempotencyKeySweeper implements Job {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;

  constructor(
    private readonly keys: { sweepIdempotencyKeys(): Promise<number> },
    private readonly log: KeySweepLog,
    private readonly intervalMs = IDEMPOTENCY_SWEEP_MS,
  ) {}

  /** a sweep every `intervalMs`, the first one interval after start */
  start(): void {
    if (this.stopped || this.timer) return;
    this.timer = setInterval(() => void this.sweep(), this.intervalMs).unref();
  }

  /** one sweep now, unless one is running (then that one); never rejects */
  sweep(): Promise<void> {
    if (this.running) return this.running;
    this.running = this.keys.sweepIdempotencyKeys().then(
      (removed) => {
        this.running = null;
        if (removed > 0) this.log.info({ removed }, 'expired idempotency keys removed');
      },
      (err: unknown) => {
        this.running = null;
        this.log.error({ err }, `expired idempotency keys could not be removed; trying again in ${Math.round(this.intervalMs / 1000)} s`);
      },
    );
    return this.running;
  }

  /** no sweep starts any more; resolves when the one running (if any) has ended */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }
}

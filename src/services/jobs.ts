// The service's background jobs (DESIGN section 1, "One set of rules"): the Idempotency-Key
// sweep, the retention sweeper and the webhook sender. app.ts builds them and main.ts starts
// them once the server listens and stops them first when it shuts down; the app's close stops
// them too (they use the storage it closes), so a test that closes its app leaves none running.
export interface Job {
  start(): void;
  /** no new work starts; resolves when the work under way has ended */
  stop(): Promise<void>;
}

export class BackgroundJobs<Named extends Record<string, Job | null>> {
  private state: 'built' | 'started' | 'stopped' = 'built';

  /** each job by name (null: not run by this app) */
  constructor(readonly each: Named) {}

  /** starts every job, once; a no-op after stop() (a stopped app's jobs stay stopped) */
  start(): void {
    if (this.state !== 'built') return;
    this.state = 'started';
    for (const job of Object.values(this.each)) job?.start();
  }

  /** stops every job, one after the other, in the order they were named; safe to call again */
  async stop(): Promise<void> {
    this.state = 'stopped';
    for (const job of Object.values(this.each)) await job?.stop();
  }
}

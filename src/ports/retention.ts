// The retention port (DESIGN section 13, issue 29): the storage removes, a small batch at a time,
// rows no one needs any more: events (each a push) older than the retention and no longer
// PENDING, with the incident versions only they pointed at; tokens revoked or expired before the
// retention; sessions idle past their expiry. The adapter holds the list of sweeps (one entry per
// table); the retention service (services/retention.ts) runs them in turn, batch after batch,
// and paces them.

export interface RetentionCutoffs {
  /** rows kept for the retention are those from this instant on; null: kept forever (RETENTION_DAYS=0) */
  retainedSince: string | null;
  /** a session last seen before this instant has expired */
  sessionsIdleSince: string;
  /** now: a token live at this instant is never removed (nor one a live token was minted under) */
  now: string;
}

export interface SweepBatch {
  /** rows removed by this batch, per table (a sweep may remove from more than one: events and their versions) */
  removed: Record<string, number>;
  /** where the sweep's next batch starts (pass it back as `from`); null: nothing more to remove for these cutoffs */
  next: number | null;
  /** how long the batch held the writer (ms), where the adapter knows it (SQLite: the batch's statements in its group's transaction) */
  heldMs?: number;
}

export interface RetentionPort {
  /** the sweeps, by name, in the order a pass runs them */
  readonly sweeps: readonly string[];
  /**
   * One batch of a sweep: at most `limit` rows looked at, in one short transaction. `from` is 0
   * for a sweep's first batch of a pass, then the `next` of the batch before.
   */
  sweep(name: string, cutoffs: RetentionCutoffs, limit: number, from: number): Promise<SweepBatch>;
}

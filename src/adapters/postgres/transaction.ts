// One transaction on one pooled client, the way every PostgreSQL unit of work here runs: BEGIN,
// the work, COMMIT; on an error ROLLBACK and, when `again` says the error is worth it (a
// serialization failure, a deadlock, a unique race the work resolves by reading again), the
// whole work again, up to `retries` more times. A client whose ROLLBACK failed is not given back
// to the pool half-way through a transaction: it is dropped (release(err)).
import type pg from 'pg';

export interface TransactionOptions {
  /** how many times the work may run again after the first */
  retries: number;
  /** whether an error is worth running the work again for */
  again: (err: unknown) => boolean;
  /** told each time the work runs again (the adapters count them) */
  onRetry?: () => void;
  /** waited for before each run again (ms), given the run about to start (1, 2, …) */
  backoffMs?: (run: number) => number;
}

export async function inTransaction<T>(pool: pg.Pool, work: (c: pg.PoolClient) => Promise<T>, o: TransactionOptions): Promise<T> {
  for (let attempt = 0; ; attempt += 1) {
    const client = await pool.connect();
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      try {
        const result = await work(client);
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch((e: unknown) => {
          broken = e instanceof Error ? e : new Error(String(e));
        });
        throw err;
      }
    } catch (err) {
      if (attempt >= o.retries || broken || !o.again(err)) throw err;
      o.onRetry?.();
    } finally {
      client.release(broken);
    }
    const wait = o.backoffMs?.(attempt + 1) ?? 0;
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }
}

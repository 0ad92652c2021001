// How the identity port's calls reach PostgreSQL (PgIdentity, identity.ts, is this class with
// its queries): a read on any pooled connection, a write in a SERIALIZABLE transaction (one of
// its own when made outside `transaction()`), run again from the start when PostgreSQL reports a
// serialization failure or a deadlock (40001, 40P01), and a nested transaction as a savepoint.
//
// Why SERIALIZABLE: on SQLite an identity transaction holds the only write lock, so the
// decisions the services take inside one (a creator's device limit, the last working
// administrator, a parent token still live when a child is minted under it) cannot be undone by
// a concurrent write. Under READ COMMITTED they could: two creates would both count N devices, a
// revocation's recursive query would miss a child committed meanwhile. SERIALIZABLE gives the
// SQLite answer without the services naming the rows to lock; its guarantee holds among
// serializable transactions only, hence every identity write is one (touchSession excepted: no
// decision reads lastSeenAt). A transaction's function may therefore run more than once: it must
// act through the port it is handed and nothing else.
//
// `generation` moves in this process once a change that could withdraw access has committed (a
// change inside a transaction: at its COMMIT), never before: a cache refilled between the write
// and the move would hold the old answer under the new generation.
import type pg from 'pg';
import { drizzle } from 'drizzle-orm/node-postgres';
import type { PgDb } from './db.js';
import { isRetryable } from './errors.js';
import type { IdentityPort } from '../../ports/identity.js';

/** how many times a transaction runs before a serialization failure or deadlock is thrown */
export const IDENTITY_TX_ATTEMPTS = 10;

/** the drizzle query builders, over the pool or over one transaction's client */
export type Queries = Pick<PgDb, 'select' | 'insert' | 'update' | 'delete'>;
/** where raw SQL runs: the pool, or one transaction's client */
export type Raw = Pick<pg.Pool, 'query'>;

/** what the port and the ports of its transactions share */
export interface Shared {
  generation: number;
  onCredentialsChanged: ((generation: number) => void) | undefined;
}

/** one open transaction: its client, and whether it changed credentials (moved at COMMIT) */
export interface Scope {
  client: pg.PoolClient;
  q: Queries;
  depth: number;
  changed: boolean;
  ended: boolean;
}

export abstract class PgIdentityTransactions {
  constructor(
    protected readonly db: PgDb,
    protected readonly shared: Shared,
    protected readonly scope: Scope | null,
  ) {}

  /** the port handed to a transaction's function: the same queries, in that transaction */
  protected abstract within(scope: Scope): IdentityPort;

  get generation(): number {
    return this.shared.generation;
  }

  /** a change made on another node could withdraw access: caches here are stale (no callback) */
  credentialsChanged(): void {
    this.shared.generation++;
  }

  private moved(): void {
    this.shared.generation++;
    this.shared.onCredentialsChanged?.(this.shared.generation);
  }

  /** the query builders: the transaction's, or the pool's */
  protected get q(): Queries {
    if (!this.scope) return this.db;
    if (this.scope.ended) throw new Error('an identity transaction was used after it ended');
    return this.scope.q;
  }

  protected get raw(): Raw {
    if (!this.scope) return this.db.$client;
    if (this.scope.ended) throw new Error('an identity transaction was used after it ended');
    return this.scope.client;
  }

  /**
   * A write: inside a transaction, part of it; outside, a serializable transaction of its own.
   * `fn` calls `withdrew()` when what it wrote could withdraw access: generation moves at COMMIT.
   */
  protected write<T>(fn: (q: Queries, raw: Raw, withdrew: () => void) => Promise<T>): Promise<T> {
    const scope = this.scope;
    if (!scope) return this.transaction((tx) => (tx as unknown as PgIdentityTransactions).write(fn));
    return fn(this.q, this.raw, () => (scope.changed = true));
  }

  async transaction<T>(fn: (tx: IdentityPort) => Promise<T>): Promise<T> {
    if (this.scope) return this.savepoint(this.scope, fn);
    for (let attempt = 1; ; attempt++) {
      const client = await this.db.$client.connect();
      const scope: Scope = { client, q: drizzle(client), depth: 0, changed: false, ended: false };
      let result: T;
      try {
        await client.query('BEGIN ISOLATION LEVEL SERIALIZABLE');
        result = await fn(this.within(scope));
        await client.query('COMMIT');
      } catch (err) {
        scope.ended = true;
        let broken: Error | undefined;
        try {
          await client.query('ROLLBACK');
        } catch (e) {
          // a connection that cannot roll back is not given back to the pool
          broken = e instanceof Error ? e : new Error(String(e));
        }
        client.release(broken);
        if (attempt >= IDENTITY_TX_ATTEMPTS || !isRetryable(err)) throw err;
        // run again, a little later: the transaction it met has most likely ended by then
        // (full jitter over a doubling window, at most 200 ms: a burst of 16 device-token mints
        // at once outlasted 5 tries of a linear 5 ms step in the bench of 2026-11-26)
        await new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(200, 5 * 2 ** attempt)));
        continue;
      }
      scope.ended = true;
      client.release();
      if (scope.changed) this.moved();
      return result;
    }
  }

  /** a nested transaction: a savepoint, so that a throw inside undoes only what it wrote */
  private async savepoint<T>(scope: Scope, fn: (tx: IdentityPort) => Promise<T>): Promise<T> {
    if (scope.ended) throw new Error('an identity transaction was used after it ended');
    const name = `identity_${++scope.depth}`;
    try {
      await scope.client.query(`SAVEPOINT ${name}`);
      try {
        const result = await fn(this as unknown as IdentityPort);
        await scope.client.query(`RELEASE SAVEPOINT ${name}`);
        return result;
      } catch (err) {
        // if this fails too, the transaction is aborted and its COMMIT fails: the first error says why
        if (!scope.ended) await scope.client.query(`ROLLBACK TO SAVEPOINT ${name}`).catch(() => {});
        throw err;
      }
    } finally {
      scope.depth--;
    }
  }
}

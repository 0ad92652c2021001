// Opens PostgreSQL (DESIGN section 9): drizzle over a `pg` connection pool, and the migrations,
// run so that any number of nodes may start at once.
//
// Reading numbers: int8 (bigint) values come back from `pg` as strings. The schema's bigint
// columns are `mode: 'number'`, so drizzle's queries over them return numbers; raw SQL that
// returns an int8 (count(*), an id) has to convert it (or cast, `count(*)::int`).
import pg from 'pg';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { migrate } from 'drizzle-orm/node-postgres/migrator';
import { pgMigrationsPath } from '../../paths.js';
import * as schema from './schema.js';

export type PgDb = NodePgDatabase<typeof schema> & { $client: pg.Pool };

export interface PostgresOptions {
  /** postgres://user:password@host:port/database */
  url: string;
  /** most connections the pool opens (default 10) */
  poolMax?: number;
  /** shown in pg_stat_activity; NODE_ID is a good one */
  applicationName?: string;
  /**
   * An idle pooled connection failed (the server restarted, the network dropped it): the pool
   * has already dropped it and opens a new one when needed. Without a listener `pg` would throw
   * it as an uncaught exception; by default it becomes a process warning.
   */
  onError?: (err: Error) => void;
}

/**
 * The server ends a session of ours that sits this long inside a transaction waiting for its
 * next statement (idle_in_transaction_session_timeout). Our transactions send their statements
 * back to back (no hashing or other wait inside one), so only a node that stopped in the middle
 * of one meets it: a process frozen (SIGSTOP, a stalled VM) or cut off by the network keeps its
 * TCP connection open, and without this its row locks (a unit of work's devices and incident)
 * would hold every other node's writes to those rows until it resumed or TCP gave up, hours
 * later; a process that dies (kill -9) closes its connections and the server ends them at once.
 * Measured 2026-11-26 (test/e2e/nodes-failover.test.ts): without it, a create through node B
 * naming the devices a stopped node A had locked got no answer in 20 s; with it, after 5 s. The
 * stopped node's transactions that were waiting for those locks take them in turn and are each
 * ended 5 s later, so with k of them queued the wait is k × 5 s (4 at a time: 5, 10, 15 s).
 */
export const IDLE_IN_TRANSACTION_MS = 5000;

export function openPostgres({ url, poolMax = 10, applicationName, onError }: PostgresOptions): PgDb {
  const pool = new pg.Pool({
    connectionString: url,
    max: poolMax,
    idle_in_transaction_session_timeout: IDLE_IN_TRANSACTION_MS,
    ...(applicationName ? { application_name: applicationName } : {}),
  });
  pool.on('error', onError ?? ((err) => process.emitWarning(`PostgreSQL pool: ${err.message}`)));
  return drizzle(pool, { schema }) as PgDb;
}

/**
 * The session-level advisory lock every node takes around its migrations: the bytes of
 * "cad-migr" as a bigint. drizzle's migrator takes no lock of its own (drizzle-orm#874): two nodes
 * starting together would both find a migration pending and both run it (the second fails on
 * "already exists"), or race on `CREATE SCHEMA drizzle`.
 */
export const MIGRATION_LOCK = BigInt('0x' + Buffer.from('cad-migr').toString('hex')).toString();

/**
 * Applies the pending migrations, once, however many nodes call it at the same time: each waits
 * for the advisory lock on one connection and migrates over that same connection (drizzle runs
 * all pending migrations in one transaction); the ones that get the lock after the first find
 * nothing left to do. The lock is released before the connection goes back to the pool.
 */
export async function migratePostgres(db: PgDb): Promise<void> {
  const client = await db.$client.connect();
  let broken: Error | undefined;
  try {
    await client.query('SELECT pg_advisory_lock($1::bigint)', [MIGRATION_LOCK]);
    try {
      await migrate(drizzle(client, { schema }), { migrationsFolder: pgMigrationsPath });
    } finally {
      await client.query('SELECT pg_advisory_unlock($1::bigint)', [MIGRATION_LOCK]);
    }
  } catch (err) {
    // a connection whose unlock may not have run must not go back to the pool holding the lock
    broken = err instanceof Error ? err : new Error(String(err));
    throw err;
  } finally {
    client.release(broken);
  }
}

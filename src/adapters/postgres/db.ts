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
   * A pooled connection failed (the server restarted, the network dropped it, the server ended
   * a transaction left idle: IDLE_IN_TRANSACTION_MS), whether it sat idle in the pool or was
   * checked out by a unit of work. An idle one the pool drops and replaces; a checked-out one
   * fails its next statement, and its unit of work ROLLBACKs or drops it (transaction.ts).
   * Without a listener `pg` would throw it as an uncaught exception; by default it becomes a
   * process warning. Told once per connection.
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
    // no JIT compilation: every statement here is a short indexed one, and one whose plan is
    // merely estimated dear (the wake sender's lanes, a loose index scan of a few index seeks)
    // was compiled for 135 ms before it ran its 0.4 ms (2026-11-29)
    options: '-c jit=off',
    ...(applicationName ? { application_name: applicationName } : {}),
  });
  const report = onError ?? ((err: Error) => process.emitWarning(`PostgreSQL pool: ${err.message}`));
  // pg-pool listens for the errors of its idle clients only: a checked-out client whose server
  // ends it between two statements (a node frozen past IDLE_IN_TRANSACTION_MS, then resumed)
  // emits 'error' with no listener, which crashed the node (2026-11-26, found by a SIGSTOP and
  // SIGCONT of a node in the middle of writes). Every client gets a listener of its own when it
  // connects, and reports the first error of its connection (a connection the server ends emits
  // the server's error, then "Connection terminated unexpectedly"); the pool's own 'error' (the
  // same error, for an idle client) is already reported by it.
  pool.on('connect', (client) => {
    let told = false;
    client.on('error', (err) => {
      if (told) return;
      told = true;
      report(err);
    });
  });
  pool.on('error', () => {});
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

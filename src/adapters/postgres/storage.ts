// The PostgreSQL adapter, assembled (DESIGN section 9): the stores over one connection pool.
// `postgresStorage` opens the pool and migrates (under the advisory lock, so nodes may start
// together) before it hands back the factory main.ts and the tests call, as the SQLite adapter's
// (sqlite/storage.ts) is called: asynchronous, since migrating waits for the server.
//
// What SQLite needs and PostgreSQL does not: no group commit (the server groups concurrent
// commits itself) and no write refusal (a failed fsync is the server's to handle: it stops, and
// its errors then say unavailable); every committed row is durable, so the outbox has no
// durable horizon either.
import type { FastifyBaseLogger } from 'fastify';
import type { Presence } from '../../ports/presence.js';
import type { Storage, StorageHealth } from '../../ports/storage.js';
import { migratePostgres, openPostgres, type PgDb } from './db.js';
import { isPgUnavailable } from './errors.js';
import { PgIdentity, type PgIdentityOptions } from './identity.js';
import { PgIncidents } from './incidents.js';
import { PgOutbox } from './outbox.js';
import { PgResponses } from './responses.js';
import { PgLoginThrottle } from './login-throttle.js';
import { pgRetention } from './retention.js';
import { PgWebhooks } from './webhooks.js';
import { PgWakeTargets } from './wake-targets.js';
import { PgWakeSteps } from './wake-steps.js';

/** how long health() trusts its last answer */
export const HEALTH_CACHE_MS = 1_000;
/** how long health() waits for `SELECT 1` before it answers unavailable */
export const HEALTH_TIMEOUT_MS = 2_000;

export interface PostgresStorageOptions extends PgIdentityOptions {
  /** postgres://user:password@host:port/database */
  url: string;
  /** most connections the pool opens (default 10) */
  poolMax?: number;
  /** this node's NODE_ID: its connections' application_name in pg_stat_activity */
  nodeId?: string;
}

export type PostgresStorage = Storage & {
  readonly db: PgDb;
  readonly identity: PgIdentity;
  readonly outbox: PgOutbox;
};

/** opens the pool, migrates, and returns the factory; a failed migration closes the pool and throws */
/** the factory, with the pool it opened (the bus and presence of several nodes use it too) */
export type PostgresStorageFactory = ((log: FastifyBaseLogger, presence: Presence) => PostgresStorage) & { readonly db: PgDb };

export async function postgresStorage(options: PostgresStorageOptions): Promise<PostgresStorageFactory> {
  // an idle connection's error, before a log is given: a process warning (db.ts)
  let onPoolError = (err: Error) => process.emitWarning(`PostgreSQL pool: ${err.message}`);
  let closed: Promise<void> | null = null;
  const db = openPostgres({
    url: options.url,
    ...(options.poolMax !== undefined ? { poolMax: options.poolMax } : {}),
    applicationName: options.nodeId ? `cad-${options.nodeId}` : 'cad',
    // once closing, a connection still ending may report its end (pool.end() resolves before they have)
    onError: (err) => closed === null && onPoolError(err),
  });
  try {
    await migratePostgres(db);
  } catch (err) {
    await db.$client.end().catch(() => {});
    throw err;
  }
  // the login throttles made (one per app): their pruning stops before the pool ends
  const throttles: PgLoginThrottle[] = [];
  const close = () =>
    (closed ??= Promise.all(throttles.map((t) => t.close())).then(() => db.$client.end()));

  const factory = (log: FastifyBaseLogger, presence: Presence): PostgresStorage => {
    onPoolError = (err) => log.warn({ err }, 'PostgreSQL: an idle pooled connection failed (a new one is opened when needed)');
    let last: { at: number; health: StorageHealth } | null = null;
    let probing: Promise<StorageHealth> | null = null;

    const probe = async (): Promise<StorageHealth> => {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<StorageHealth>((resolve) => {
        timer = setTimeout(() => resolve({ ok: false, why: `the database did not answer within ${HEALTH_TIMEOUT_MS} ms` }), HEALTH_TIMEOUT_MS);
      });
      const answer = db.$client.query('SELECT 1').then(
        (): StorageHealth => ({ ok: true }),
        (err: unknown): StorageHealth => ({ ok: false, why: 'the database does not answer', err }),
      );
      try {
        return await Promise.race([answer, timeout]);
      } finally {
        clearTimeout(timer);
      }
    };

    return {
      db,
      identity: new PgIdentity(db, options.onCredentialsChanged ? { onCredentialsChanged: options.onCredentialsChanged } : {}),
      incidents: new PgIncidents(db, presence),
      outbox: new PgOutbox(db),
      responses: new PgResponses(db),
      retention: pgRetention(db),
      webhooks: new PgWebhooks(db),
      wakeTargets: new PgWakeTargets(db),
      wakeSteps: new PgWakeSteps(db),
      /** the last answer if younger than HEALTH_CACHE_MS; else one `SELECT 1`, shared by the callers meanwhile */
      health() {
        if (last && Date.now() - last.at < HEALTH_CACHE_MS) return last.health;
        probing ??= probe().then((health) => {
          last = { at: Date.now(), health };
          probing = null;
          return health;
        });
        return probing;
      },
      /** counted in login_buckets and login_known, shared by every node (login-throttle.ts) */
      loginThrottle(throttleOptions) {
        const throttle = new PgLoginThrottle(db.$client, throttleOptions, log);
        throttles.push(throttle);
        return throttle;
      },
      writeRefusal: () => null,
      isUnavailable: isPgUnavailable,
      stats: () => ({ pool: { total: db.$client.totalCount, idle: db.$client.idleCount, waiting: db.$client.waitingCount } }),
      close,
    };
  };
  return Object.assign(factory, { db });
}

// Retention on PostgreSQL (ports/retention.ts), with the sweeps of sqlite/retention.ts: one per
// table, each batch one short transaction on a pooled client. Several nodes may sweep at once:
// a batch takes its rows FOR UPDATE SKIP LOCKED, so two nodes never wait on each other's rows
// and never remove a row twice; a row another transaction holds is left to a later batch.
//
// A walk (events) reads the next `limit` rows by key from the cursor, stops at the first one that
// is not old (ids are not in commit order here, schema.ts; a young row met early only ends the
// pass early: the next pass starts from the first key again), and removes the old ones it may.
// Identity values are never given out twice, so unlike SQLite no row needs to be spared for its
// key; migration 0004 replaced 0001's "never deleted" triggers with ones that refuse removing a
// PENDING event or a version an event points at.
//
// An event's version goes once no event points at it. Two nodes removing the last two events of
// one version could each still see the other's (READ COMMITTED): so a batch locks the versions of
// the events it took (in id order: no deadlock between batches) before it removes them, and the
// second batch, waiting for that lock, then sees the first's removal committed.
//
// Another table (webhook deliveries, idempotency keys) is one more line in `pgSweeps`.
import type pg from 'pg';
import type { PgDb } from './db.js';
import { isRetryable } from './errors.js';
import { inTransaction } from './transaction.js';
import type { RetentionCutoffs, RetentionPort, SweepBatch } from '../../ports/retention.js';

type Client = pg.PoolClient;
type Cutoff = keyof Pick<RetentionCutoffs, 'retainedSince' | 'sessionsIdleSince'>;

interface PgSweep {
  readonly name: string;
  batch(c: Client, cutoffs: RetentionCutoffs, limit: number, from: number): Promise<SweepBatch>;
}

interface WalkOptions {
  name: string;
  table: string;
  /** ISO 8601 text, written in key order (give or take a commit) */
  time: string;
  cutoff: Cutoff;
  /** SQL over the row: an old row for which it holds stays (a PENDING push) */
  keep?: string;
  columns?: readonly string[];
  /** before the rows are removed (lock what `after` changes), and after, in the same transaction */
  before?: (c: Client, rows: readonly Record<string, unknown>[]) => Promise<void>;
  after?: (c: Client, rows: readonly Record<string, unknown>[]) => Promise<Record<string, number>>;
}

const num = (v: unknown): number => Number(v);

export function walk(o: WalkOptions): PgSweep {
  const window = `SELECT id, ${o.time} < $1 AS old FROM ${o.table} WHERE id > $2 ORDER BY id LIMIT $3`;
  const take = `SELECT ${['id', ...(o.columns ?? [])].join(', ')} FROM ${o.table}
    WHERE id > $2 AND id <= $3 AND ${o.time} < $1${o.keep ? ` AND NOT (${o.keep})` : ''}
    ORDER BY id FOR UPDATE SKIP LOCKED`;
  const remove = `DELETE FROM ${o.table} WHERE id = ANY($1::bigint[])`;
  return {
    name: o.name,
    async batch(c, cutoffs, limit, from) {
      const cutoff = cutoffs[o.cutoff];
      if (cutoff === null) return { removed: {}, next: null };
      const seen = (await c.query<{ id: string; old: boolean }>(window, [cutoff, from, limit])).rows;
      const firstYoung = seen.findIndex((r) => !r.old);
      const upTo = firstYoung >= 0 ? firstYoung - 1 : seen.length - 1;
      const removed: Record<string, number> = { [o.name]: 0 };
      if (upTo >= 0) {
        const rows = (await c.query<Record<string, unknown>>(take, [cutoff, from, num(seen[upTo]!.id)])).rows;
        if (rows.length > 0) {
          await o.before?.(c, rows);
          removed[o.name] = (await c.query(remove, [rows.map((r) => num(r.id))])).rowCount ?? 0;
          if (o.after) Object.assign(removed, await o.after(c, rows));
        }
      }
      return { removed, next: firstYoung >= 0 || seen.length < limit ? null : num(seen.at(-1)!.id) };
    },
  };
}

interface WhereOptions {
  name: string;
  table: string;
  cutoff: Cutoff;
  /** SQL over the row (the table's own name), with p.cutoff and p.now */
  condition: string;
}

export function where(o: WhereOptions): PgSweep {
  const remove = `DELETE FROM ${o.table} WHERE id IN (
    SELECT ${o.table}.id FROM ${o.table}, (SELECT $1::text AS cutoff, $2::text AS now) p
    WHERE ${o.condition} LIMIT $3 FOR UPDATE OF ${o.table} SKIP LOCKED)`;
  return {
    name: o.name,
    async batch(c, cutoffs, limit) {
      const cutoff = cutoffs[o.cutoff];
      if (cutoff === null) return { removed: {}, next: null };
      const n = (await c.query(remove, [cutoff, cutoffs.now, limit])).rowCount ?? 0;
      return { removed: { [o.name]: n }, next: n >= limit ? 0 : null };
    },
  };
}

const versionsOf = (rows: readonly Record<string, unknown>[]) => [...new Set(rows.map((r) => num(r.version_id)))].sort((a, b) => a - b);

/** The sweeps, in the order a pass runs them (the small tables first: a backlog of events never holds them back). One line per table. */
export const pgSweeps: readonly PgSweep[] = [
  // revoked or expired before the retention; never one a live token was minted under
  where({
    name: 'tokens',
    table: 'tokens',
    cutoff: 'retainedSince',
    condition: `(tokens.revoked_at < p.cutoff OR tokens.expires_at < p.cutoff) AND NOT EXISTS (
      SELECT 1 FROM tokens c WHERE c.parent_id = tokens.id AND c.revoked_at IS NULL AND (c.expires_at IS NULL OR c.expires_at > p.now))`,
  }),
  // idle past their expiry: refused already (services/authenticator.ts SESSION_IDLE_MS)
  where({ name: 'sessions', table: 'sessions', cutoff: 'sessionsIdleSince', condition: 'sessions.last_seen_at < p.cutoff' }),
  // pushes: old and settled (DELIVERED, EXPIRED, SUPERSEDED), with the versions only they used
  walk({
    name: 'events',
    table: 'events',
    time: 'event_time',
    cutoff: 'retainedSince',
    keep: `state = 'PENDING'`,
    columns: ['version_id'],
    before: async (c, rows) => {
      await c.query(`SELECT id FROM incident_versions WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE`, [versionsOf(rows)]);
    },
    after: async (c, rows) => {
      const { rowCount } = await c.query(
        `DELETE FROM incident_versions v WHERE v.id = ANY($1::bigint[])
           AND NOT EXISTS (SELECT 1 FROM events e WHERE e.incident_id = v.incident_id AND e.version_id = v.id)`,
        [versionsOf(rows)],
      );
      return { incidentVersions: rowCount ?? 0 };
    },
  }),
  // the devices' answers (sqlite/retention.ts)
  walk({ name: 'responses', table: 'responses', time: 'received_at', cutoff: 'retainedSince' }),
  // webhook deliveries settled, with their attempts (sqlite/retention.ts)
  walk({ name: 'webhookDeliveries', table: 'webhook_deliveries', time: 'created_at', cutoff: 'retainedSince', keep: `state = 'PENDING'` }),
];

/** how many times a batch runs before a deadlock or serialization failure is thrown */
const ATTEMPTS = 3;

export function pgRetention(db: PgDb, sweeps: readonly PgSweep[] = pgSweeps): RetentionPort {
  const byName = new Map(sweeps.map((s) => [s.name, s]));
  const pool = db.$client;
  return {
    sweeps: [...byName.keys()],
    async sweep(name, cutoffs, limit, from) {
      const sweep = byName.get(name);
      if (!sweep) throw new Error(`no sweep named ${name}`);
      return inTransaction(pool, (c) => sweep.batch(c, cutoffs, limit, from), { retries: ATTEMPTS - 1, again: isRetryable });
    },
  };
}

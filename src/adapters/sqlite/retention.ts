// Retention on SQLite (ports/retention.ts): the list of sweeps, one per table. A batch is one
// synchronous function run as an operation of the group commit (storage.ts: the writer path of
// every incident write), so it is one short transaction that shares the group's fsync and never
// overlaps another write; it looks at `limit` rows at most.
//
// Two kinds of sweep:
// - walk: for a table written in time order by its integer key (events): reads the next
//   `limit` rows by key from the cursor, removes the old ones it may, and stops for this pass
//   at the first row that is not old (every later row is younger too; a clock stepped back only
//   makes a pass stop early, never remove a young row). No index on the time column is needed,
//   and a pass that finds nothing to do reads one row.
// - where: for a small table (tokens, sessions): the next `limit` rows matching a condition.
//
// Events and incident versions have rowid keys without AUTOINCREMENT (migration 0008): a new row
// takes the largest key + 1, so the row holding the largest key is never removed (else its key
// would be given out again, and the TTL sweep's floor, the group commit's horizon and the hub's
// event ids all take an event id to name one event for good). Migration 0016 replaced 0010's
// "never deleted" triggers with triggers that refuse exactly that, and the removal of a PENDING
// event or of a version an event still points at.
//
// Another table (webhook deliveries, idempotency keys) is one more line in `sqliteSweeps`.
import type Database from 'better-sqlite3';
import type { RetentionCutoffs, RetentionPort, SweepBatch } from '../../ports/retention.js';
import type { GroupCommitter } from './engine/group-commit.js';

export interface SqliteSweep {
  readonly name: string;
  /** one batch; runs inside the caller's transaction (a group commit's) */
  batch(cutoffs: RetentionCutoffs, limit: number, from: number): SweepBatch;
}

type Cutoff = keyof Pick<RetentionCutoffs, 'retainedSince' | 'sessionsIdleSince'>;

interface WalkOptions {
  name: string;
  table: string;
  /** ISO 8601 text, in key order */
  time: string;
  cutoff: Cutoff;
  /** SQL over the row: an old row for which it holds stays (a PENDING push) */
  keep?: string;
  /** the row with the largest key stays (a rowid table without AUTOINCREMENT) */
  spareLast?: boolean;
  /** more columns the `after` step needs */
  columns?: readonly string[];
  /** after the rows are removed, in the same transaction: what else goes with them, counted by table */
  after?: (sqlite: Database.Database) => (removed: readonly Record<string, number>[]) => Record<string, number>;
}

/** a sweep that walks a table in key (= time) order */
export function walk(o: WalkOptions): (sqlite: Database.Database) => SqliteSweep {
  return (sqlite) => {
    const cols = ['id', `${o.time} < @cutoff AS old`, `${o.keep ? `(${o.keep})` : '0'} AS kept`, ...(o.columns ?? [])];
    const last = o.spareLast ? ` AND id < (SELECT max(id) FROM ${o.table})` : '';
    const window = sqlite.prepare(`SELECT ${cols.join(', ')} FROM ${o.table} WHERE id > @from${last} ORDER BY id LIMIT @limit`);
    const remove = sqlite.prepare(`DELETE FROM ${o.table} WHERE id = ?`);
    const after = o.after?.(sqlite);
    return {
      name: o.name,
      batch(cutoffs, limit, from) {
        const cutoff = cutoffs[o.cutoff];
        if (cutoff === null) return { removed: {}, next: null };
        const rows = window.all({ cutoff, from, limit }) as ({ id: number; old: number; kept: number } & Record<string, number>)[];
        const gone: Record<string, number>[] = [];
        let young = false;
        for (const row of rows) {
          if (!row.old) {
            young = true;
            break;
          }
          if (row.kept) continue;
          remove.run(row.id);
          gone.push(row);
        }
        const removed: Record<string, number> = { [o.name]: gone.length };
        if (after && gone.length > 0) Object.assign(removed, after(gone));
        return { removed, next: young || rows.length < limit ? null : rows.at(-1)!.id };
      },
    };
  };
}

interface WhereOptions {
  name: string;
  table: string;
  cutoff: Cutoff;
  /** SQL over the row, with @cutoff and @now */
  condition: string;
}

/** a sweep of the rows of a small table that match a condition */
export function where(o: WhereOptions): (sqlite: Database.Database) => SqliteSweep {
  return (sqlite) => {
    const remove = sqlite.prepare(`DELETE FROM ${o.table} WHERE id IN (SELECT id FROM ${o.table} WHERE ${o.condition} LIMIT @limit)`);
    return {
      name: o.name,
      batch(cutoffs, limit) {
        const cutoff = cutoffs[o.cutoff];
        if (cutoff === null) return { removed: {}, next: null };
        const n = remove.run({ cutoff, now: cutoffs.now, limit }).changes;
        return { removed: { [o.name]: n }, next: n >= limit ? 0 : null };
      },
    };
  };
}

/**
 * The incident versions the removed events pointed at, once no event points at them (events of
 * one version belong to one incident: found through events_incident). The newest version stays
 * (a rowid key, as events').
 */
function orphanedVersions(sqlite: Database.Database) {
  const remove = sqlite.prepare(
    `DELETE FROM incident_versions WHERE id = @version AND id < (SELECT max(id) FROM incident_versions)
       AND NOT EXISTS (SELECT 1 FROM events WHERE incident_id = @incident AND version_id = @version)`,
  );
  return (removed: readonly Record<string, number>[]): Record<string, number> => {
    const seen = new Set<number>();
    let n = 0;
    for (const r of removed) {
      const version = r.version_id!;
      if (seen.has(version)) continue;
      seen.add(version);
      n += remove.run({ version, incident: r.incident_id! }).changes;
    }
    return { incidentVersions: n };
  };
}

/** The sweeps, in the order a pass runs them (the small tables first: a backlog of events never holds them back). One line per table. */
export const sqliteSweeps = [
  // revoked or expired before the retention; never one a live token was minted under (a
  // child never outlives its parent, so this only guards the rule: deleting cascades to children)
  where({ name: 'tokens', table: 'tokens', cutoff: 'retainedSince', condition: `(revoked_at < @cutoff OR expires_at < @cutoff) AND NOT EXISTS (
      SELECT 1 FROM tokens c WHERE c.parent_id = tokens.id AND c.revoked_at IS NULL AND (c.expires_at IS NULL OR c.expires_at > @now))` }),
  // idle past their expiry: refused already (services/authenticator.ts SESSION_IDLE_MS)
  where({ name: 'sessions', table: 'sessions', cutoff: 'sessionsIdleSince', condition: 'last_seen_at < @cutoff' }),
  // pushes: old and settled (DELIVERED, EXPIRED, SUPERSEDED), with the versions only they used
  walk({ name: 'events', table: 'events', time: 'event_time', cutoff: 'retainedSince', keep: `state = 'PENDING'`, spareLast: true, columns: ['version_id', 'incident_id'], after: orphanedVersions }),
  // the devices' answers, each kept once per (device, responseId) so a repeat gets the first
  // result: a repeat after RETENTION_DAYS is decided again (the assignment's status is kept with
  // the incident, in assignment_responses, and never moves backwards)
  walk({ name: 'responses', table: 'responses', time: 'received_at', cutoff: 'retainedSince' }),
  // webhook deliveries settled (DELIVERED, FAILED) and older than the retention, with their
  // attempts (ON DELETE CASCADE); a PENDING one stays until it is sent or fails (24 h)
  walk({ name: 'webhookDeliveries', table: 'webhook_deliveries', time: 'created_at', cutoff: 'retainedSince', keep: `state = 'PENDING'` }),
] as const;

/** the port: each batch one operation of the group commit, the writer path incident writes take */
export function sqliteRetention(sqlite: Database.Database, writes: Pick<GroupCommitter, 'run'>, sweeps: readonly ((sqlite: Database.Database) => SqliteSweep)[] = sqliteSweeps): RetentionPort {
  const byName = new Map(sweeps.map((make) => make(sqlite)).map((s) => [s.name, s]));
  return {
    sweeps: [...byName.keys()],
    sweep(name, cutoffs, limit, from) {
      const sweep = byName.get(name);
      if (!sweep) return Promise.reject(new Error(`no sweep named ${name}`));
      return writes.run(() => {
        const t0 = performance.now();
        const batch = sweep.batch(cutoffs, limit, from);
        return { ...batch, heldMs: performance.now() - t0 };
      });
    },
  };
}

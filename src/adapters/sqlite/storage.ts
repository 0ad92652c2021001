// The SQLite adapter, assembled: the stores over one connection, incident writes through the
// group committer (engine/group-commit.ts), their fsync off the event loop (engine/wal-sync.ts),
// and the checkpoint thread's hold (engine/checkpointer.ts). main.ts builds it; tests too.
import type { FastifyBaseLogger } from 'fastify';
import type { Caller, Locator } from '../../domain/incident.js';
import type { Decide, IncidentStorePort, ListFilter, EventFilter, WriteOptions } from '../../ports/incidents.js';
import type { Presence } from '../../ports/presence.js';
import { noMetrics, type Metrics } from '../../ports/metrics.js';
import type { Storage } from '../../ports/storage.js';
import type { Db, Synchronous } from './db.js';
import { isStorageError } from './errors.js';
import { databaseAnswers, storageProbe } from './health.js';
import { Gate } from './gate.js';
import { SqliteIdentity } from './identity.js';
import { IncidentRows } from './incidents.js';
import { OutboxRows, SqliteOutbox } from './outbox.js';
import { SqliteResponses } from './responses.js';
import { SqliteWebhooks, WebhookRows } from './webhooks.js';
import { SqliteWakeTargets, WakeTargetRows } from './wake-targets.js';
import { sqliteRetention } from './retention.js';
import type { Checkpointer } from './engine/checkpointer.js';
import { GroupCommitter } from './engine/group-commit.js';
import { walSync, type DeferredSync } from './engine/wal-sync.js';
import { without } from './engine/tuning.js';
import { SqliteWakeSteps, WakeStepRows } from './wake-steps.js';

/** the longest a write group waits for the checkpoint pass that lets the WAL start over */
export const WAL_RESTART_HOLD_MAX_MS = 5;

export interface SqliteOptions {
  db: Db;
  synchronous: Synchronous;
  /** the checkpoint thread's interval while the service is idle */
  checkpointIntervalMs: number;
  /** how group commits reach the disk; by default an fdatasync of the WAL off the event loop (wal-sync.ts) */
  durability?: DeferredSync | null;
  /** after a failed fsync, once it is logged (main.ts exits: recovery reads what the disk has) */
  onStorageFailure?: () => void;
  /** an fsync pending for longer than this fails the health check (default 10 s) */
  syncStallMs?: number;
  /** the WAL checkpoint thread (main.ts): when it says the WAL is large, writes wait for its next pass */
  walCheckpoints?: (Pick<Checkpointer, 'whenWalLarge' | 'checkpoint' | 'halt'> & Partial<Pick<Checkpointer, 'whenSyncFails'>>) | null;
  /** the longest writes wait for that pass (default WAL_RESTART_HOLD_MAX_MS) */
  walRestartHoldMs?: number;
}

export type SqliteStorage = Storage & {
  readonly db: Db;
  readonly writes: GroupCommitter;
  readonly store: IncidentRows;
  readonly identity: SqliteIdentity;
  readonly outbox: SqliteOutbox;
};

/** The incident port over the sync store: each write joins the next group commit. */
class SqliteIncidents implements IncidentStorePort {
  constructor(
    private readonly store: IncidentRows,
    private readonly writes: GroupCommitter,
  ) {}

  write(caller: Caller, locator: Locator, decide: Decide, options: WriteOptions) {
    return this.writes.run(() => this.store.write(caller, locator, decide, options));
  }
  async get(caller: Caller, id: number) {
    return this.store.get(caller, id);
  }
  async read(caller: Caller, id: number) {
    return this.store.read(caller, id);
  }
  /** a batch, as one operation of a write group (its deletes are synced as the group's writes are) */
  sweepIdempotencyKeys(createdBefore: string, limit: number) {
    return this.writes.run(() => this.store.sweepIdempotencyKeys(createdBefore, limit));
  }
  async list(filter: ListFilter) {
    return this.store.list(filter);
  }
  async events(filter: EventFilter) {
    return this.store.events(filter);
  }
  async exists(id: number) {
    return this.store.exists(id);
  }
}

export function sqliteStorage(options: SqliteOptions): (log: FastifyBaseLogger, presence: Presence, metrics?: Metrics) => SqliteStorage {
  return (log, presence, metrics = noMetrics) => {
    const { db } = options;
    // the open identity transaction, which the identity, outbox and webhook ports' calls wait for
    const gate = new Gate();
    // BENCH_WITHOUT=walsync: SQLite's own commit at the configured level, on the event loop (engine/tuning.ts)
    const durability = options.durability !== undefined ? options.durability : without.walsync ? null : walSync(db.$client, options.synchronous);
    const lastEvent = db.$client.prepare('SELECT coalesce(max(id), 0) FROM events').pluck();
    const checkpoints = options.walCheckpoints;
    const writes = new GroupCommitter(db.$client, {
      durability,
      mark: () => lastEvent.get() as number,
      // an incident write's events are its result's; their ids only grow
      markOf: (r) => (r as { ok: boolean; events?: { id: number }[] }).events?.at(-1)?.id ?? 0,
      // the write-group sizes an operator sees (GET /api/metrics)
      onGroup: (size) => metrics.writeGroup(size),
      onFailure: (err) => {
        metrics.databaseError('sync');
        // from now on nothing copies the WAL into the database file (Checkpointer.halt says why)
        checkpoints?.halt();
        try {
          db.$client.pragma('wal_autocheckpoint = 0');
        } catch (e) {
          log.error({ err: e }, 'could not turn the automatic checkpoint off');
        }
        log.fatal({ err }, 'the database could not be synced: what is on disk is unknown; every write request is refused until a restart');
        options.onStorageFailure?.();
      },
      // a full disk (SQLITE_FULL): the group's writes answer 503, the next group tries again (engine/storage-errors.ts)
      onStorage: (err) => {
        if (err) log.error({ err }, 'storage unavailable: writes are refused (503) until one can be stored again; reads go on');
        else log.warn('storage available again: writes are stored');
      },
      probe: storageProbe(db.$client),
      ...(options.syncStallMs !== undefined ? { stallMs: options.syncStallMs } : {}),
    });
    // the WAL starts over at the next group's COMMIT if no group commits during the pass (checkpointer.ts)
    const holdMs = options.walRestartHoldMs ?? WAL_RESTART_HOLD_MAX_MS;
    checkpoints?.whenWalLarge(() => writes.holdUntil(() => checkpoints.checkpoint(), holdMs));
    // a failed fsync of the checkpoint thread is a failed sync like the WAL's (checkpointer.ts)
    checkpoints?.whenSyncFails?.((err) => writes.syncFailed(err));
    const store = new IncidentRows(db, presence, () => writes.horizon());
    return {
      db,
      writes,
      store,
      identity: new SqliteIdentity(db, gate),
      incidents: new SqliteIncidents(store, writes),
      outbox: new SqliteOutbox(new OutboxRows(db, () => writes.horizon()), gate),
      responses: new SqliteResponses(db, writes),
      retention: sqliteRetention(db.$client, writes),
      webhooks: new SqliteWebhooks(new WebhookRows(db), gate),
      wakeTargets: new SqliteWakeTargets(new WakeTargetRows(db), gate),
      wakeSteps: new SqliteWakeSteps(new WakeStepRows(db), gate),
      health() {
        if (!writes.healthy()) {
          const why = writes.failure ? 'a sync to disk failed' : writes.unavailable ? 'writes fail (the disk may be full)' : 'a sync to disk has been pending too long';
          return { ok: false, why, err: writes.failure ?? writes.unavailable ?? undefined };
        }
        return databaseAnswers(db) ? { ok: true } : { ok: false, why: 'the database does not answer' };
      },
      writeRefusal: () => writes.failure,
      isUnavailable: isStorageError,
      stats: () => ({ groupCommit: writes.stats }),
      close: () => writes.close(),
    };
  };
}

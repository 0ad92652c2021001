// The incident unit of work: inside ONE synchronous SQLite transaction it reads the current
// state, runs the pure domain function, and writes the plan it returns (domain/incident-write.ts
// WritePlan): the incident (its resources and assignments are on its row), its callsign keys,
// response states and webhook deliveries, and its events, which are the push outbox
// (transactional outbox). It decides none of them. Inside a group commit (group-commit.ts) it runs in the group's
// transaction; a group with a failing operation is rolled back and each operation re-run
// alone, so each stays atomic on its own.
import type Database from 'better-sqlite3';
import { callsignKey } from '../../domain/callsign.js';
import type { Assignment, Caller, CurrentIncident, Incident, Locator, MatchContext } from '../../domain/incident.js';
import type { WakeKind } from '../../domain/wake.js';
import { eventStates, type WritePlan } from '../../domain/incident-write.js';
import type { Db } from './db.js';
import { without } from './engine/tuning.js';
import { incidentOf, rowValues, selectList, SET_LIST } from '../shared/incident-rows.js';
import { answerOf, keptAnswer, type Current, type Decide, type EventFilter, type EventView, type IncidentResult, type ListFilter, type Outcome, type Versioned, type WriteOptions } from '../../ports/incidents.js';
import { writeWebhookDeliveries } from './webhooks.js';
import { keepsAnswer, roomForKey } from '../../domain/idempotency.js';
import { SqliteKeys } from './idempotency-keys.js';
import { listEvents, listIncidents } from './incident-reads.js';

export type { EventFilter, EventView, IncidentResult, ListFilter, Outcome };

/** a row as read: the incident's fields, with its callsigns still JSON */
type IncidentRow = Omit<Incident, 'resources'> & { resources: string };

interface StoredRow extends IncidentRow {
  /** JSON array of Assignment */
  assignments: string;
  version: number;
}

const toIncident = incidentOf;

/** an incident as stored, with its assignments as on its row */
interface Stored {
  readonly incident: Incident;
  readonly version: number;
  readonly assignments: readonly Assignment[];
}

export class IncidentRows {
  private readonly sqlite: Database.Database;
  private readonly st;
  private readonly dataVersion: () => number;
  /** the Idempotency-Keys' rows (idempotency-keys.ts) */
  private readonly keys: SqliteKeys;

  constructor(
    db: Db,
    private readonly presence: { readonly online: ReadonlySet<number> },
    /** events above it may not be on disk yet (group-commit.ts): the event list stops there */
    private readonly durable: () => number = () => Infinity,
  ) {
    this.sqlite = db.$client;
    this.keys = new SqliteKeys(this.sqlite);
    const p = (sql: string) => this.sqlite.prepare(sql);
    this.st = {
      byId: p(`SELECT ${selectList()}, version FROM incidents WHERE id = ?`),
      storedById: p(`SELECT ${selectList()}, assignments, version FROM incidents WHERE id = ?`),
      byOriginId: p(`SELECT ${selectList()}, assignments, version FROM incidents WHERE origin_id = ?`),
      idByOriginId: p(`SELECT id FROM incidents WHERE origin_id = ?`).pluck(),
      exists: p(`SELECT 1 FROM incidents WHERE id = ?`).pluck(),
      deviceExists: p(`SELECT 1 FROM devices WHERE id = ?`).pluck(),
      // positional parameters: binding 14 named ones looks each up on an object (a create and
      // an update each paid for that, and for the object built to hold them)
      insert: p(`INSERT INTO incidents (${SET_LIST.join(', ')}, origin_id) VALUES (${SET_LIST.map(() => '?').join(', ')}, ?)`),
      // origin_id is set only when it changes: a column in the SET list has its index entry
      // deleted and written again even when the value is the same, one more random page of
      // incidents_origin_id per update in the WAL (BENCHMARKS.md as of 966ad38)
      update: p(`UPDATE incidents SET ${SET_LIST.map((c) => `${c} = ?`).join(', ')}, version = ? WHERE id = ?`),
      updateAndMove: p(`UPDATE incidents SET ${SET_LIST.map((c) => `${c} = ?`).join(', ')}, version = ?, origin_id = ? WHERE id = ?`),
      delete: p(`DELETE FROM incidents WHERE id = ?`),
      insertCallsign: p(`INSERT OR IGNORE INTO incident_callsigns (callsign_key, incident_id) VALUES (?, ?)`),
      deleteCallsign: p(`DELETE FROM incident_callsigns WHERE callsign_key = ? AND incident_id = ?`),
      link: p(`INSERT OR IGNORE INTO user_incidents (user_id, incident_id) VALUES (?, ?)`),
      insertVersion: p(`INSERT INTO incident_versions (incident_id, incident) VALUES (?, ?)`),
      insertEvent: p(
        `INSERT INTO events (type, device_id, incident_id, event_time, attributes, version_id, state, push_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      // the device's next pushId, taken in this transaction: gapless and in commit order per
      // device (a rolled-back write gives its numbers back). On PostgreSQL the same statement
      // locks the device's row until the commit, so its pushes commit in pushId order.
      nextPushId: p(`UPDATE devices SET push_seq = push_seq + 1 WHERE id = ? RETURNING push_seq`).pluck(),
      // an assignment push still waiting and never sent: the stand-down about to be written
      // supersedes it (found through events_incident (incident_id, device_id))
      supersedeAssign: p(
        `UPDATE events SET state = 'SUPERSEDED'
           WHERE incident_id = ? AND device_id = ? AND type = 'incidentAssigned' AND state = 'PENDING' AND attempts = 0`,
      ),
      matchAll: p(`SELECT id FROM devices WHERE name_key = ? AND disabled = 0 ORDER BY id`).pluck(),
      matchReachable: p(
        `SELECT d.id FROM devices d WHERE d.name_key = ? AND d.disabled = 0 AND EXISTS (
           SELECT 1 FROM user_devices ud WHERE ud.device_id = d.id
             AND (ud.user_id = ? OR ud.user_id IN (SELECT managed_user_id FROM user_users WHERE user_id = ?)))
         ORDER BY d.id`,
      ).pluck(),
      // the kinds of wake target each of the devices (a JSON array of ids) holds (the wake ladder: domain/wake.ts);
      // a statement of its own: as a column of the match (a correlated group_concat per device) it
      // cost 6 µs per key instead of 3.8 µs per write (2026-11-29)
      wakeKinds: p(`SELECT DISTINCT device_id AS deviceId, kind FROM wake_targets WHERE device_id IN (SELECT value FROM json_each(?))`),
      reaches: p(
        `SELECT 1 FROM user_incidents WHERE incident_id = ? AND (user_id = ? OR user_id IN (SELECT managed_user_id FROM user_users WHERE user_id = ?)) LIMIT 1`,
      ).pluck(),
      // a stand-down cancels the assignment's response state (responses.ts), keeping the times it reached
      cancel: p(
        `INSERT INTO assignment_responses (incident_id, device_id, callsign, status, times) VALUES (@incident, @device, @callsign, 'CANCELLED', json_object('CANCELLED', @now))
         ON CONFLICT (incident_id, device_id) DO UPDATE SET status = 'CANCELLED', times = json_set(times, '$.CANCELLED', @now)`,
      ),
      insertWakeStep: p(`INSERT INTO wake_steps (event_id, device_id, incident_id, owner_id, step, due_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`),
      // a new assignment starts at NONE (after an earlier one of the device was stood down)
      restart: p(`DELETE FROM assignment_responses WHERE incident_id = ? AND device_id = ?`),
    };
    const { storedById, byOriginId } = this.st;
    const dataVersion = p('PRAGMA data_version').pluck();
    this.dataVersion = () => dataVersion.get() as number;
    this.readStored = (at) => {
      const row = ('id' in at ? storedById.get(at.id) : byOriginId.get(at.originId)) as StoredRow | undefined;
      return row && { incident: toIncident(row), version: row.version, assignments: JSON.parse(row.assignments) as Assignment[] };
    };
  }

  /** the incident a locator names, read from its row */
  private readonly readStored: (at: Locator) => Stored | undefined;

  /** fn in a transaction of its own, or as part of the caller's (a group commit's transaction) */
  private atomically<T>(fn: () => T): T {
    if (this.sqlite.inTransaction) return fn();
    return this.sqlite.transaction(fn).immediate();
  }

  /** list and event queries are built from their filters; each shape is prepared once */
  private readonly dynamic = new Map<string, Database.Statement>();
  private prepared(sql: string): Database.Statement {
    let st = this.dynamic.get(sql);
    if (!st) {
      st = this.sqlite.prepare(sql);
      if (this.dynamic.size < 256) this.dynamic.set(sql, st);
    }
    return st;
  }

  // GET /incidents/{id} is the hot read: incidents as last read, by id. Only this store writes
  // incidents and their resources, and it drops an entry whenever it writes that incident
  // (inside the write transaction, so a read after COMMIT, or after a rollback, re-reads).
  // A commit by another connection to the file (an operator's sqlite3 session) changes
  // data_version, read on every use (about 1–2 µs), and the cache starts over. Bounded by
  // incidents and by callsigns held (an incident may carry 500).
  private readonly cache = new Map<number, Versioned>();
  private cachedCallsigns = 0;
  private cacheVersion: number | null = null;
  private static readonly CACHE_MAX_INCIDENTS = 10_000;
  private static readonly CACHE_MAX_CALLSIGNS = 100_000;

  private cached(id: number): Versioned | undefined {
    if (without.getcache) {
      const row = this.st.byId.get(id) as (IncidentRow & { version: number }) | undefined;
      return row && { incident: toIncident(row), version: row.version };
    }
    const version = this.dataVersion();
    if (version !== this.cacheVersion) {
      this.cache.clear();
      this.cachedCallsigns = 0;
      this.cacheVersion = version;
    }
    const hit = this.cache.get(id);
    if (hit) return hit;
    const row = this.st.byId.get(id) as (IncidentRow & { version: number }) | undefined;
    if (!row) return undefined;
    const incident = toIncident(row);
    if (this.cache.size >= IncidentRows.CACHE_MAX_INCIDENTS || this.cachedCallsigns + incident.resources.length > IncidentRows.CACHE_MAX_CALLSIGNS) {
      this.cache.clear();
      this.cachedCallsigns = 0;
    }
    const entry = { incident, version: row.version };
    this.cache.set(id, entry);
    this.cachedCallsigns += incident.resources.length;
    return entry;
  }

  private forget(id: number): void {
    const hit = this.cache.get(id);
    if (!hit) return;
    this.cache.delete(id);
    this.cachedCallsigns -= hit.incident.resources.length;
  }

  exists(id: number): boolean {
    return this.st.exists.get(id) !== undefined;
  }

  private reaches(caller: Caller, id: number): boolean {
    return caller.administrator || this.st.reaches.get(id, caller.id, caller.id) !== undefined;
  }

  /**
   * The stored assignments of devices that still exist, in the order they were assigned. A
   * deleted device's entry stays on the row until the incident is next written: deleting a
   * device would otherwise have to search every incident.
   */
  private storedAssignments(stored: readonly Assignment[], context: MatchContext): readonly Assignment[] {
    // a device the callsigns matched in this transaction exists: only the others are looked up
    let found: Set<number> | null = null;
    let gone: Set<number> | null = null;
    for (const a of stored) {
      if (!found) {
        found = new Set<number>();
        for (const ids of context.matches.values()) for (const id of ids) found.add(id);
      }
      if (found.has(a.deviceId) || gone?.has(a.deviceId)) continue;
      if (this.st.deviceExists.get(a.deviceId) === undefined) (gone ??= new Set<number>()).add(a.deviceId);
      else found.add(a.deviceId);
    }
    return gone === null ? stored : stored.filter((a) => !gone.has(a.deviceId));
  }

  /** the incident, if the caller has permission on it */
  get(caller: Caller, id: number): Incident | 'NOT_FOUND' | 'FORBIDDEN' {
    const read = this.read(caller, id);
    return typeof read === 'string' ? read : read.incident;
  }

  /** the incident and its version, if the caller has permission on it */
  read(caller: Caller, id: number): Versioned | 'NOT_FOUND' | 'FORBIDDEN' {
    const entry = this.cached(id);
    if (!entry) return 'NOT_FOUND';
    if (!this.reaches(caller, id)) return 'FORBIDDEN';
    return entry;
  }

  /** up to `limit` Idempotency-Keys created before `createdBefore`, oldest first, removed */
  sweepIdempotencyKeys(createdBefore: string, limit: number): number {
    return this.atomically(() => this.keys.sweep(createdBefore, limit));
  }

  /** the enabled devices each of the callsigns matches for the caller (a query per distinct key) */
  private matchContext(caller: Caller, callsigns: readonly string[] | null | undefined, withWakeKinds: boolean): MatchContext {
    const matches = new Map<string, readonly number[]>();
    for (const c of callsigns ?? []) {
      const key = callsignKey(c);
      if (matches.has(key)) continue;
      const ids = (caller.administrator ? this.st.matchAll.all(key) : this.st.matchReachable.all(key, caller.id, caller.id)) as number[];
      matches.set(key, ids);
    }
    for (const [key, ids] of matches) if (ids.length === 0) matches.delete(key);
    return withWakeKinds ? { matches, online: this.presence.online, wakeKinds: this.wakeKinds(matches) } : { matches, online: this.presence.online };
  }

  /** the kinds of wake target each matched device holds */
  private wakeKinds(matches: ReadonlyMap<string, readonly number[]>): Map<number, Set<WakeKind>> {
    const out = new Map<number, Set<WakeKind>>();
    if (matches.size === 0) return out;
    const ids = [...new Set([...matches.values()].flat())];
    for (const r of this.st.wakeKinds.all(JSON.stringify(ids)) as { deviceId: number; kind: WakeKind }[]) {
      let kinds = out.get(r.deviceId);
      if (!kinds) out.set(r.deviceId, (kinds = new Set()));
      kinds.add(r.kind);
    }
    return out;
  }

  /** the incident holding `originId`, when it is not `stored` (a write that would move it there) */
  private holder(caller: Caller, stored: Incident, originId: string | undefined): CurrentIncident['originIdHolder'] {
    if (originId === undefined || originId === stored.originId) return null;
    const id = this.st.idByOriginId.get(originId) as number | undefined;
    return id === undefined ? null : { id, reachable: this.reaches(caller, id) };
  }

  /**
   * The plan's events, each also its push (the outbox), numbered in its device's own sequence
   * (outbox.ts); first the unsent assignments the plan's stand-downs replace (WritePlan.supersede).
   */
  private writeEvents(incident: Incident, plan: WritePlan): EventView[] {
    if (plan.events.length === 0) return [];
    const { now } = plan;
    const versionId = this.st.insertVersion.run(incident.id, JSON.stringify(incident)).lastInsertRowid;
    const replaced = new Set<number>();
    for (const deviceId of plan.supersede) if (this.st.supersedeAssign.run(incident.id, deviceId).changes > 0) replaced.add(deviceId);
    const states = eventStates(plan.events, replaced);
    return plan.events.map((e, i) => {
      const attributes = JSON.stringify(e.attributes);
      const state = states[i]!;
      // the plan names only devices that exist in this transaction (storedAssignments, the matches)
      const pushId = this.st.nextPushId.get(e.deviceId) as number | undefined;
      if (pushId === undefined) throw new Error(`an event for device ${e.deviceId}, which does not exist`);
      const eventId = Number(this.st.insertEvent.run(e.type, e.deviceId, incident.id, now, attributes, versionId, state, pushId).lastInsertRowid);
      return { id: eventId, type: e.type, eventTime: now, deviceId: e.deviceId, incidentId: incident.id, attributes: e.attributes, state, attempts: 0 };
    });
  }

  /**
   * The unit of work (ports/incidents.ts): reads the incident `locator` names and matches the
   * callsigns for the caller, lets `decide` (a pure domain function) plan the write, and writes
   * the plan, in one transaction: its own, or the group commit's it runs in.
   */
  write(caller: Caller, locator: Locator, decide: Decide, options: WriteOptions): Outcome {
    const claim = options.idempotency;
    if (!claim) return this.atomically(() => this.change(caller, locator, decide, options));
    // the key, read and written in the same transaction as the write it answers
    return this.atomically((): Outcome => {
      const stored = this.keys.kept(caller.id, claim.key);
      if (stored && stored.createdAt > claim.keptAfter) return keptAnswer(stored, claim);
      // a new key is counted (one past its retention is replaced: the count stands); the whole
      // write runs in one synchronous transaction, so the count read is the count written
      const fresh = stored === undefined;
      if (fresh && !roomForKey(this.keys.held(caller.id), claim.maxKeys)) {
        return { ok: false, refusal: { code: 'IDEMPOTENCY_KEYS_EXHAUSTED', max: claim.maxKeys } };
      }
      const outcome = this.change(caller, locator, decide, options);
      // a refusal wrote nothing and keeps no key: a retry is decided again
      if (!keepsAnswer(outcome)) return outcome;
      this.keys.store(caller.id, claim, options.now, JSON.stringify(answerOf(outcome)), fresh);
      return outcome;
    });
  }

  /** the read and the decision of a unit of work, inside its transaction, then the plan written */
  private change(caller: Caller, locator: Locator, decide: Decide, options: WriteOptions): Outcome {
    const found = this.readStored(locator);
    const context = this.matchContext(caller, options.callsigns, options.wakeKinds === true);
    const current: Current | null = found
      ? {
          incident: found.incident,
          version: found.version,
          assignments: this.storedAssignments(found.assignments, context),
          reachable: this.reaches(caller, found.incident.id),
          originIdHolder: this.holder(caller, found.incident, options.originId),
        }
      : null;
    const decision = decide(current, context);
    return decision.ok ? this.persist(decision.plan) : decision;
  }

  /** every row of the plan, as it says (domain/incident-write.ts WritePlan) */
  private persist(plan: WritePlan): IncidentResult {
    const { row, now } = plan;
    // before the row: a deleted incident's links, which say who sees it, go with it
    for (const payload of plan.webhooks) writeWebhookDeliveries(this.sqlite, payload);
    let incident: Incident;
    if (row.write === 'insert') {
      const draft = row.incident;
      const id = Number(this.st.insert.run(...rowValues(draft, now, plan.assignments), draft.originId).lastInsertRowid);
      incident = { id, ...draft };
      this.st.link.run(row.creator, id);
    } else {
      incident = row.incident;
      this.forget(incident.id);
      if (row.write === 'update') {
        const values = rowValues(incident, now, plan.assignments);
        if (row.moved) this.st.updateAndMove.run(...values, plan.version, incident.originId, incident.id);
        else this.st.update.run(...values, plan.version, incident.id);
      }
    }
    for (const c of plan.responses.cancel) this.st.cancel.run({ incident: incident.id, device: c.deviceId, callsign: c.callsign, now });
    for (const deviceId of plan.responses.restart) this.st.restart.run(incident.id, deviceId);
    for (const key of plan.callsignKeys.remove) this.st.deleteCallsign.run(key, incident.id);
    for (const key of plan.callsignKeys.add) this.st.insertCallsign.run(key, incident.id);
    const events = this.writeEvents(incident, plan);
    for (const w of plan.wakeSteps) this.st.insertWakeStep.run(events[w.event]!.id, events[w.event]!.deviceId, incident.id, w.owner, w.step, w.dueAt, now);
    if (row.write === 'delete') this.st.delete.run(incident.id);
    return { ok: true, incident, version: plan.version, report: plan.report, events };
  }

  list(filter: ListFilter): { incidents: Incident[]; more: boolean } {
    return listIncidents((sql) => this.prepared(sql), filter);
  }

  events(filter: EventFilter): EventView[] {
    return listEvents((sql) => this.prepared(sql), filter, this.durable());
  }
}

// The incident store on PostgreSQL (ports/incidents.ts, DESIGN section 9): the behaviour of
// src/adapters/sqlite/incidents.ts (IncidentRows), without its performance mechanisms (the
// kept state, the GET cache, the match cache): plain queries, parameterised, over one pooled
// client per unit of work.
//
// One write is one transaction (READ COMMITTED) on one client:
//  1. `SELECT … FOR UPDATE` the incident the locator names, by id or by origin_id: writes to one
//     incident take effect one after another, each deciding on what the one before it left (a
//     waiter re-reads the row once the holder commits; a row deleted or moved meanwhile is not
//     found).
//  2. match the callsigns for the caller, drop the stored assignments of deleted devices, read
//     whether the caller reaches the incident, and run `decide`. The devices read are not
//     locked (a KEY SHARE lock on each cost a third of the throughput of writes sharing
//     devices, 2026-11-26): one deleted before the events are written is found missing then
//     (DeviceGone), and the unit of work runs again without it.
//  3. write the plan's rows (WritePlan: the incident, its callsign keys, the creator's link, response
//     states, webhook deliveries, an incident_versions row); the devices that get events are told
//     to the other nodes AFTER the commit (push-notify.ts), never in the transaction.
//  4. the events, last, in one statement: the devices that get them locked in ascending id
//     order (`FOR NO KEY UPDATE`, a materialised CTE the bump joins, so no row is updated
//     before every lower one is locked): two writes sharing devices never wait on each other
//     in a cycle; each device's push_seq bumped by its number of events (`UPDATE devices SET
//     push_seq = push_seq + n … RETURNING`); the events inserted, numbered in plan order. The
//     device's row lock, held to the commit, orders its pushes: pushIds gapless and in commit
//     order, and event ids too (drawn after the lock). Every write sharing a device waits for
//     that lock, so it is held for this statement and the COMMIT only (one round trip fewer
//     than a separate locking statement: about 12% more creates/s on 3 shared devices,
//     2026-11-26). Then COMMIT.
//
// A create whose originId is free takes no lock for it: two concurrent creates of one originId
// both find nothing, and the unique index incidents_origin_id makes the second INSERT wait for
// the first to commit, then fail with 23505. So does a move (an update to another originId)
// racing a create or move to the same one. A 23505 on that index rolls the unit of work back and
// runs it again, `decide` included: it then finds the incident and refuses ORIGIN_ID_TAKEN
// exactly as a write that came later would (with the id only for a caller who reaches it). The
// same retry answers a serialization failure or a deadlock (40001, 40P01) and a device deleted
// meanwhile (DeviceGone); after MAX_RETRIES the error is thrown.
//
// A write resolves once COMMIT has returned: a committed row is on disk, so events() has no
// durable horizon here (SQLite's group commit has one).
import type pg from 'pg';
import { inTransaction } from './transaction.js';
import { callsignKey } from '../../domain/callsign.js';
import type { Assignment, Caller, CurrentIncident, Incident, Locator, MatchContext } from '../../domain/incident.js';
import type { WritePlan } from '../../domain/incident-write.js';
import type { WakeKind } from '../../domain/wake.js';
import {
  answerOf,
  type Current,
  type Decide,
  type EventFilter,
  type EventView,
  type IncidentResult,
  type IncidentStorePort,
  type ListFilter,
  type Outcome,
  type Versioned,
  type WriteOptions,
} from '../../ports/incidents.js';
import type { Presence } from '../../ports/presence.js';
import type { PgDb } from './db.js';
import { isRetryable, isUniqueViolation, pgConstraint } from './errors.js';
import { incidentOf, rowValues, selectList, SET_LIST } from '../shared/incident-rows.js';
import { writeWebhookDeliveries } from './webhooks.js';
import { keepsAnswer, roomForKey } from '../../domain/idempotency.js';
import { claimKey, countKey, storeAnswer, sweepKeys } from './idempotency-keys.js';
import { listEvents, listIncidents, type IncidentRow } from './incident-reads.js';
import { inRange } from './ids.js';
import { PushNotifier } from './push-notify.js';
import { DeviceGone, writeEvents } from './event-rows.js';

/** retries of a unit of work after a serialization failure, a deadlock or an originId taken meanwhile */
export const MAX_RETRIES = 3;



interface StoredRow extends IncidentRow {
  /** JSON array of Assignment */
  assignments: string;
  /** int8, which `pg` gives as a string */
  version: string | number;
  /** the caller is linked to it, or manages a user who is */
  reachable: boolean;
}

/** ids are int8, which `pg` gives as strings: incidentOf makes them numbers */
const toIncident = incidentOf;


// a create in one statement: the incident, its callsign keys, and its creator's link to it
const N = SET_LIST.length;
const CREATE = `WITH created AS (
    INSERT INTO incidents (${SET_LIST.join(', ')}, origin_id) VALUES (${SET_LIST.map((_, i) => `$${i + 1}`).join(', ')}, $${N + 1}) RETURNING id
  ), keys AS (
    INSERT INTO incident_callsigns (callsign_key, incident_id) SELECT k, created.id FROM created, unnest($${N + 2}::text[]) AS k
  ), link AS (
    INSERT INTO user_incidents (user_id, incident_id) SELECT $${N + 3}, created.id FROM created
  )
  SELECT id FROM created`;
// origin_id is set only when it changes, as in SQLite (an unchanged key column still costs an index write there)
const UPDATE = `UPDATE incidents SET ${SET_LIST.map((c, i) => `${c} = $${i + 1}`).join(', ')}, version = $${N + 1} WHERE id = $${N + 2}`;
const UPDATE_AND_MOVE = `UPDATE incidents SET ${SET_LIST.map((c, i) => `${c} = $${i + 1}`).join(', ')}, version = $${N + 1}, origin_id = $${N + 2} WHERE id = $${N + 3}`;
// the incident a write names, locked, and whether the caller ($2) reaches it
const REACHED = `EXISTS (SELECT 1 FROM user_incidents ui WHERE ui.incident_id = incidents.id
    AND (ui.user_id = $2 OR ui.user_id IN (SELECT managed_user_id FROM user_users WHERE user_id = $2))) AS reachable`;
const STORED_BY_ID = `SELECT ${selectList()}, assignments, version, ${REACHED} FROM incidents WHERE id = $1 FOR UPDATE OF incidents`;
const STORED_BY_ORIGIN_ID = `SELECT ${selectList()}, assignments, version, ${REACHED} FROM incidents WHERE origin_id = $1 FOR UPDATE OF incidents`;
const BY_ID = `SELECT ${selectList()}, version FROM incidents WHERE id = $1`;
const REACHES = `SELECT 1 FROM user_incidents WHERE incident_id = $1 AND (user_id = $2 OR user_id IN (SELECT managed_user_id FROM user_users WHERE user_id = $2)) LIMIT 1`;
// the devices the callsign keys match for the caller, each key's in id order (not locked: DeviceGone)
// with each device, the kinds of wake target it holds (the wake ladder: domain/wake.ts), comma-separated or null
// (read only when the service runs a ladder: WriteOptions.wakeKinds; a column of the match, not a round trip of its own)
const WAKE_KINDS = `(SELECT string_agg(DISTINCT w.kind, ',') FROM wake_targets w WHERE w.device_id = d.id) AS kinds`;
const matchAll = (kinds: string) => `SELECT d.name_key AS key, d.id, ${kinds} FROM devices d WHERE d.name_key = ANY($1::text[]) AND NOT d.disabled ORDER BY d.id`;
const matchReachable = (kinds: string) => `SELECT d.name_key AS key, d.id, ${kinds} FROM devices d WHERE d.name_key = ANY($1::text[]) AND NOT d.disabled AND EXISTS (
    SELECT 1 FROM user_devices ud WHERE ud.device_id = d.id
      AND (ud.user_id = $2 OR ud.user_id IN (SELECT managed_user_id FROM user_users WHERE user_id = $2)))
  ORDER BY d.id`;
const MATCH = { all: matchAll('NULL AS kinds'), reachable: matchReachable('NULL AS kinds') };
const MATCH_WITH_KINDS = { all: matchAll(WAKE_KINDS), reachable: matchReachable(WAKE_KINDS) };


/** an outcome whose unit of work is rolled back, its key claim with it: a refusal, or a key past the bound */
class Unkept extends Error {
  constructor(readonly outcome: Outcome) {
    super('rolled back: an outcome that keeps no key');
  }
}


/** whether the unit of work is run again: a serialization failure, a deadlock, an originId taken or a device deleted by a write that committed meanwhile */
export function runsAgain(err: unknown): boolean {
  return isRetryable(err) || err instanceof DeviceGone || (isUniqueViolation(err) && pgConstraint(err) === 'incidents_origin_id');
}

type Client = pg.PoolClient;

async function rows<T>(c: Client | pg.Pool, sql: string, values: unknown[] = []): Promise<T[]> {
  return (await c.query(sql, values)).rows as T[];
}

export class PgIncidents implements IncidentStorePort {
  /** units of work run again (serialization failures, deadlocks, originIds taken, devices deleted meanwhile), for stats */
  retries = 0;

  /** tells the other nodes which devices have pushes, after each commit (push-notify.ts) */
  private readonly notifier: PushNotifier;

  constructor(
    private readonly db: PgDb,
    private readonly presence: Presence,
  ) {
    this.notifier = new PushNotifier(db.$client);
  }

  private get pool(): pg.Pool {
    return this.db.$client;
  }

  /**
   * fn in a transaction of its own on one pooled client, run again (whole) on a retryable error.
   * A client whose ROLLBACK failed is dropped from the pool, not given back half-way through.
   */
  private unitOfWork<T>(fn: (c: Client) => Promise<T>): Promise<T> {
    return inTransaction(this.pool, fn, { retries: MAX_RETRIES, again: runsAgain, onRetry: () => (this.retries += 1) });
  }

  async exists(id: number): Promise<boolean> {
    if (!inRange(id)) return false;
    return (await rows(this.pool, `SELECT 1 FROM incidents WHERE id = $1`, [id])).length > 0;
  }

  private async reaches(c: Client | pg.Pool, caller: Caller, id: number): Promise<boolean> {
    return caller.administrator || (await rows(c, REACHES, [id, caller.id])).length > 0;
  }

  async get(caller: Caller, id: number): Promise<Incident | 'NOT_FOUND' | 'FORBIDDEN'> {
    if (!inRange(id)) return 'NOT_FOUND';
    const [row] = await rows<IncidentRow>(this.pool, BY_ID, [id]);
    if (!row) return 'NOT_FOUND';
    if (!(await this.reaches(this.pool, caller, id))) return 'FORBIDDEN';
    return toIncident(row);
  }

  /** the devices the callsigns match for the caller, by key in the order the callsigns first name it; keys with no device left out */
  private async match(c: Client, caller: Caller, callsigns: readonly string[], withWakeKinds: boolean): Promise<MatchContext> {
    const q = withWakeKinds ? MATCH_WITH_KINDS : MATCH;
    const matches = new Map<string, number[]>();
    const wakeKinds = new Map<number, Set<WakeKind>>();
    const keys = [...new Set(callsigns.map(callsignKey))];
    if (keys.length > 0) {
      const found = caller.administrator
        ? await rows<{ key: string; id: string; kinds: string | null }>(c, q.all, [keys])
        : await rows<{ key: string; id: string; kinds: string | null }>(c, q.reachable, [keys, caller.id]);
      const byKey = new Map<string, number[]>();
      for (const r of found) {
        if (r.kinds !== null) wakeKinds.set(Number(r.id), new Set(r.kinds.split(',') as WakeKind[]));
        let ids = byKey.get(r.key);
        if (!ids) byKey.set(r.key, (ids = []));
        ids.push(Number(r.id));
      }
      for (const key of keys) {
        const ids = byKey.get(key);
        if (ids) matches.set(key, ids);
      }
    }
    return withWakeKinds ? { matches, online: this.presence.online, wakeKinds } : { matches, online: this.presence.online };
  }

  /**
   * The stored assignments of devices that still exist, in the order they were assigned (a
   * deleted device's entry stays on the row until the incident is next written, as in SQLite).
   * `read` gathers every device found, matched or stored: one missing when its events are
   * written was deleted meanwhile (DeviceGone).
   */
  private async storedAssignments(c: Client, stored: readonly Assignment[], read: Set<number>): Promise<readonly Assignment[]> {
    const unknown = [...new Set(stored.map((a) => a.deviceId).filter((id) => !read.has(id)))];
    if (unknown.length === 0) return stored;
    const found = await rows<{ id: string }>(c, `SELECT id FROM devices WHERE id = ANY($1::int8[])`, [unknown]);
    for (const r of found) read.add(Number(r.id));
    return found.length === unknown.length ? stored : stored.filter((a) => read.has(a.deviceId));
  }

  /**
   * SQLite's stand-down rule, in one statement: SQLite writes the drafts in order, and each
   * stand-down supersedes its device's assignments of the incident still PENDING and never sent
   * (the stand-down is then SUPERSEDED too). Here the stored ones are superseded at once, and
   * the drafts' states worked out in order: an assignment of this plan followed by a stand-down
   * of its device is stored SUPERSEDED (it is returned as written, PENDING, as SQLite returns it).
   * The domain's plans put stand-downs first, so that case is SQLite's rule taken whole.
   */

  async read(caller: Caller, id: number): Promise<Versioned | 'NOT_FOUND' | 'FORBIDDEN'> {
    if (!inRange(id)) return 'NOT_FOUND';
    const [row] = await rows<IncidentRow & { version: string | number }>(this.pool, BY_ID, [id]);
    if (!row) return 'NOT_FOUND';
    if (!(await this.reaches(this.pool, caller, id))) return 'FORBIDDEN';
    return { incident: toIncident(row), version: Number(row.version) };
  }

  async sweepIdempotencyKeys(createdBefore: string, limit: number): Promise<number> {
    return sweepKeys(this.pool, createdBefore, limit);
  }

  /**
   * The unit of work (ports/incidents.ts): reads the incident `locator` names (locked), matches
   * the callsigns for the caller, lets `decide` say what to write, and writes it, in one
   * transaction; run again whole on a retryable error (runsAgain).
   */
  async write(caller: Caller, locator: Locator, decide: Decide, options: WriteOptions): Promise<Outcome> {
    const outcome = await this.committed(caller, locator, decide, options);
    // committed: the other nodes may send these pushes (a replay wrote none)
    if (outcome.ok && !outcome.replayed && outcome.events.length > 0) this.notifier.afterCommit(outcome.events.map((e) => e.deviceId));
    return outcome;
  }

  private async committed(caller: Caller, locator: Locator, decide: Decide, options: WriteOptions): Promise<Outcome> {
    const claim = options.idempotency;
    if (!claim) return this.unitOfWork((c) => this.change(c, caller, locator, decide, options));
    const exhausted: Outcome = { ok: false, refusal: { code: 'IDEMPOTENCY_KEYS_EXHAUSTED', max: claim.maxKeys } };
    try {
      return await this.unitOfWork(async (c): Promise<Outcome> => {
        const claimed = await claimKey(c, caller.id, claim, options.now);
        if ('ok' in claimed) return claimed;
        // a new key past the bound: refused before deciding, as SQLite refuses it
        if (claimed.fresh && !roomForKey(claimed.held, claim.maxKeys)) throw new Unkept(exhausted);
        const outcome = await this.change(c, caller, locator, decide, options);
        // a refusal wrote nothing and keeps no key: rolled back, the claim with it
        if (!keepsAnswer(outcome)) throw new Unkept(outcome);
        // a new key counted near the end (its stripe's lock held only to the COMMIT), exactly:
        // past the bound, the write is rolled back
        let stripe: number | null = null;
        if (claimed.fresh) {
          stripe = await countKey(c, caller.id, claim.maxKeys);
          if (stripe === null) throw new Unkept(exhausted);
        }
        await storeAnswer(c, caller.id, claim.key, JSON.stringify(answerOf(outcome)), stripe);
        return outcome;
      });
    } catch (err) {
      if (err instanceof Unkept) return err.outcome;
      throw err;
    }
  }

  /** the incident holding `originId`, when it is not `stored` (a write that would move it there) */
  private async holder(c: Client, caller: Caller, stored: Incident, originId: string | undefined): Promise<CurrentIncident['originIdHolder']> {
    if (originId === undefined || originId === stored.originId) return null;
    const [taken] = await rows<{ id: string }>(c, `SELECT id FROM incidents WHERE origin_id = $1`, [originId]);
    if (!taken) return null;
    const id = Number(taken.id);
    return { id, reachable: await this.reaches(c, caller, id) };
  }

  /** the read and the decision of a unit of work, inside its transaction, then the plan written */
  private async change(c: Client, caller: Caller, locator: Locator, decide: Decide, options: WriteOptions): Promise<Outcome> {
    let row: StoredRow | undefined;
    if ('id' in locator) {
      if (inRange(locator.id)) [row] = await rows<StoredRow>(c, STORED_BY_ID, [locator.id, caller.id]);
    } else [row] = await rows<StoredRow>(c, STORED_BY_ORIGIN_ID, [locator.originId, caller.id]);
    const context = await this.match(c, caller, options.callsigns, options.wakeKinds === true);
    const read = new Set<number>();
    for (const ids of context.matches.values()) for (const id of ids) read.add(id);
    let current: Current | null = null;
    if (row) {
      const incident = toIncident(row);
      const assignments = await this.storedAssignments(c, JSON.parse(row.assignments) as Assignment[], read);
      const originIdHolder = await this.holder(c, caller, incident, options.originId);
      current = { incident, version: Number(row.version), assignments, reachable: caller.administrator || row.reachable, originIdHolder };
    }
    const decision = decide(current, context);
    return decision.ok ? await this.persist(c, decision.plan, read) : decision;
  }

  /** every row of the plan, as it says (domain/incident-write.ts WritePlan); the events last: they lock the devices */
  private async persist(c: Client, plan: WritePlan, read: ReadonlySet<number>): Promise<IncidentResult> {
    const { row, now } = plan;
    // before the row: a deleted incident's links, which say who sees it, go with it
    for (const payload of plan.webhooks) await writeWebhookDeliveries(c, payload);
    let incident: Incident;
    if (row.write === 'insert') {
      const draft = row.incident;
      const [created] = await rows<{ id: string }>(c, CREATE, [...rowValues(draft, now, plan.assignments), draft.originId, plan.callsignKeys.add, row.creator]);
      incident = { id: Number(created!.id), ...draft };
    } else {
      incident = row.incident;
      const { cancel, restart } = plan.responses;
      if (cancel.length > 0) {
        await c.query(
          `INSERT INTO assignment_responses (incident_id, device_id, callsign, status, times)
             SELECT $1, x.d, x.c, 'CANCELLED', json_build_object('CANCELLED', $4::text)::text FROM unnest($2::int8[], $3::text[]) AS x(d, c)
           ON CONFLICT (incident_id, device_id) DO UPDATE
             SET status = 'CANCELLED', times = jsonb_set(assignment_responses.times::jsonb, '{CANCELLED}', to_jsonb($4::text))::text`,
          [incident.id, cancel.map((x) => x.deviceId), cancel.map((x) => x.callsign), now],
        );
      }
      if (restart.length > 0) await c.query(`DELETE FROM assignment_responses WHERE incident_id = $1 AND device_id = ANY($2::int8[])`, [incident.id, restart]);
      const { add, remove } = plan.callsignKeys;
      if (remove.length > 0) await c.query(`DELETE FROM incident_callsigns WHERE incident_id = $1 AND callsign_key = ANY($2::text[])`, [incident.id, remove]);
      if (row.write === 'delete') await c.query(`DELETE FROM incidents WHERE id = $1`, [incident.id]);
      else {
        const values = rowValues(incident, now, plan.assignments);
        if (row.moved) await c.query(UPDATE_AND_MOVE, [...values, plan.version, incident.originId, incident.id]);
        else await c.query(UPDATE, [...values, plan.version, incident.id]);
        if (add.length > 0) {
          await c.query(`INSERT INTO incident_callsigns (callsign_key, incident_id) SELECT k, $1 FROM unnest($2::text[]) AS k ON CONFLICT DO NOTHING`, [incident.id, add]);
        }
      }
    }
    const events = await writeEvents(c, incident, plan, read);
    if (plan.wakeSteps.length > 0) {
      const ofStep = plan.wakeSteps.map((w) => events[w.event]!);
      await c.query(
        `INSERT INTO wake_steps (event_id, device_id, incident_id, owner_id, step, due_at, created_at)
           SELECT x.e, x.d, $3, x.o, x.s, x.due, $6 FROM unnest($1::int8[], $2::int8[], $4::text[], $5::text[], $7::int8[]) AS x(e, d, s, due, o)`,
        [ofStep.map((e) => e.id), ofStep.map((e) => e.deviceId), incident.id, plan.wakeSteps.map((w) => w.step), plan.wakeSteps.map((w) => w.dueAt), now, plan.wakeSteps.map((w) => w.owner)],
      );
    }
    return { ok: true, incident, version: plan.version, report: plan.report, events };
  }

  list(filter: ListFilter): Promise<{ incidents: Incident[]; more: boolean }> {
    return listIncidents(this.pool, filter);
  }

  events(filter: EventFilter): Promise<EventView[]> {
    return listEvents(this.pool, filter);
  }
}

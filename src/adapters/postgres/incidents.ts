// The incident store on PostgreSQL (ports/incidents.ts, DESIGN section 9): the behaviour of
// src/adapters/sqlite/incidents.ts (IncidentStore), without its performance mechanisms (the
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
//  3. write the incident, its callsign keys, the creator's link (a create: one statement), an
//     incident_versions row; the devices that get events are noted, and told to the other
//     nodes with `pg_notify('pushes', '<device id>,<device id>,…')` AFTER the commit, never in
//     the transaction: a transaction that has queued a NOTIFY takes one cluster-wide lock at its
//     commit and holds it until the commit is on disk, so no two writes that notified could
//     commit together (7 of 8.6 active backends waited on it in the bench of 2026-11-26,
//     scripts/bench/postgres.ts). Sent after the commit, the notification is its own short
//     statement with no write to flush; the device ids of writes that commit in the same turn
//     of the event loop go in one. A node that dies between the commit and the NOTIFY loses
//     the notification: the other nodes' 2 s poll (bus.ts) sends those pushes.
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
import { eventStates, type WritePlan } from '../../domain/incident-write.js';
import { utc } from '../../domain/time.js';
import {
  answerOf,
  keptAnswer,
  type Current,
  type Decide,
  type EventFilter,
  type EventView,
  type IdempotencyClaim,
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
import { keepsAnswer, keyStripeCaps, roomForKey } from '../../domain/idempotency.js';

/** retries of a unit of work after a serialization failure, a deadlock or an originId taken meanwhile */
export const MAX_RETRIES = 3;

/** the channel a write notifies, with the ids of the devices it wrote pushes for */
export const PUSH_CHANNEL = 'pushes';

/** NOTIFY refuses payloads of 8000 bytes or more: longer lists of device ids go in several */
const NOTIFY_MAX = 7900;

/** a row as read: ids are int8, which `pg` gives as strings; the callsigns still JSON */
type IncidentRow = Omit<Incident, 'id' | 'resources'> & { id: string | number; resources: string };

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
// The Idempotency-Key, claimed first in the unit of work: inserted, or taken over when past its
// retention (created at or before $5). A unit of work with the same key that has not ended holds the row: this one
// waits for it, then finds the key taken (no row returned) and reads its answer.
// With it, whether the row is new (xmax 0: inserted, not taken over) and the keys the user held
// as this transaction began (the early refusal; the exact count is taken by KEY_COUNTED).
const KEY_CLAIM = `WITH claimed AS (
    INSERT INTO idempotency_keys (user_id, key, fingerprint, created_at, answer) VALUES ($1, $2, $3, $4, '')
    ON CONFLICT (user_id, key) DO UPDATE SET fingerprint = excluded.fingerprint, created_at = excluded.created_at, answer = ''
      WHERE idempotency_keys.created_at <= $5
    RETURNING xmax = 0 AS fresh
  )
  SELECT fresh, (SELECT coalesce(sum(keys), 0) FROM idempotency_key_counts WHERE user_id = $1) AS held FROM claimed`;
/** the stripes a user's keys are counted in (schema.ts idempotencyKeyCounts) */
const KEY_STRIPES = 16;
// A new key counted, near the end of its unit of work, in a stripe below its share ($2, by
// stripe) that no other write holds (SKIP LOCKED; locked until the COMMIT): no row when every
// stripe with room is held or there is none (KEY_COUNTED_WAIT then).
const KEY_COUNTED = `WITH pick AS (
    SELECT stripe FROM idempotency_key_counts WHERE user_id = $1 AND keys < ($2::int[])[stripe + 1]
    ORDER BY random() LIMIT 1 FOR UPDATE SKIP LOCKED
  )
  UPDATE idempotency_key_counts k SET keys = k.keys + 1 FROM pick WHERE k.user_id = $1 AND k.stripe = pick.stripe
  RETURNING k.stripe`;
// the same, waiting for a stripe held by another write (its share is checked again once it is
// released); no row: every stripe is at its share, the user holds the bound
const KEY_COUNTED_WAIT = KEY_COUNTED.replace('FOR UPDATE SKIP LOCKED', 'FOR UPDATE');
// a rewording of KEY_COUNTED that the replace no longer finds would make every wait skip: refuse to start
if (KEY_COUNTED_WAIT === KEY_COUNTED) throw new Error('KEY_COUNTED_WAIT was not derived from KEY_COUNTED');
// a user's stripes, made at its first key
const KEY_STRIPES_MADE = `INSERT INTO idempotency_key_counts (user_id, stripe, keys)
  SELECT $1, s, 0 FROM generate_series(0, ${KEY_STRIPES - 1}) AS s ON CONFLICT DO NOTHING`;
const KEY_ANSWER = `SELECT fingerprint, answer FROM idempotency_keys WHERE user_id = $1 AND key = $2`;
// the answer, and the stripe a new key was counted in (null: one taken over keeps its own)
const KEY_STORE = `UPDATE idempotency_keys SET answer = $3, stripe = coalesce($4, stripe) WHERE user_id = $1 AND key = $2`;
// the keys' counts lowered with them; created_at checked again on the row deleted, so a key
// taken over meanwhile (KEY_CLAIM, created now) is not swept
const KEY_SWEEP = `WITH gone AS (
    DELETE FROM idempotency_keys WHERE (user_id, key) IN (
      SELECT user_id, key FROM idempotency_keys WHERE created_at < $1 ORDER BY created_at LIMIT $2) AND created_at < $1
    RETURNING user_id, stripe
  ), counted AS (
    SELECT user_id, stripe, count(*)::int AS n FROM gone GROUP BY user_id, stripe
  ), lowered AS (
    UPDATE idempotency_key_counts k SET keys = k.keys - counted.n FROM counted WHERE k.user_id = counted.user_id AND k.stripe = counted.stripe
  )
  SELECT coalesce(sum(n), 0)::int AS removed FROM counted`;
const REACHES = `SELECT 1 FROM user_incidents WHERE incident_id = $1 AND (user_id = $2 OR user_id IN (SELECT managed_user_id FROM user_users WHERE user_id = $2)) LIMIT 1`;
// the devices the callsign keys match for the caller, each key's in id order (not locked: DeviceGone)
const MATCH_ALL = `SELECT d.name_key AS key, d.id FROM devices d WHERE d.name_key = ANY($1::text[]) AND NOT d.disabled ORDER BY d.id`;
const MATCH_REACHABLE = `SELECT d.name_key AS key, d.id FROM devices d WHERE d.name_key = ANY($1::text[]) AND NOT d.disabled AND EXISTS (
    SELECT 1 FROM user_devices ud WHERE ud.device_id = d.id
      AND (ud.user_id = $2 OR ud.user_id IN (SELECT managed_user_id FROM user_users WHERE user_id = $2)))
  ORDER BY d.id`;

const PG_INT8_MAX = 9223372036854775807n;

/** an id the database can hold: a larger one names no row (int8 would reject it) */
function inRange(id: number): boolean {
  return Number.isInteger(id) && id >= 0 && BigInt(id) <= PG_INT8_MAX;
}

/** an outcome whose unit of work is rolled back, its key claim with it: a refusal, or a key past the bound */
class Unkept extends Error {
  constructor(readonly outcome: Outcome) {
    super('rolled back: an outcome that keeps no key');
  }
}

/** a device the unit of work read (matched, or of a stored assignment) was deleted before its events were written */
export class DeviceGone extends Error {}

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

  /** devices with pushes committed and not yet told to the other nodes (flushed once per turn) */
  private readonly toNotify = new Set<number>();
  private notifying = false;

  constructor(
    private readonly db: PgDb,
    private readonly presence: Presence,
  ) {}

  /** after a commit: the devices it wrote pushes for, told to every node's LISTEN in the next turn */
  private notifyAfterCommit(deviceIds: readonly number[]): void {
    for (const id of deviceIds) this.toNotify.add(id);
    if (this.notifying || this.toNotify.size === 0) return;
    this.notifying = true;
    setImmediate(() => {
      const ids = [...this.toNotify].sort((a, b) => a - b);
      this.toNotify.clear();
      this.notifying = false;
      for (const payload of notifyPayloads(ids)) {
        // lost (the database away): the other nodes' poll finds these pushes within 2 s
        this.pool.query(`SELECT pg_notify($1, $2)`, [PUSH_CHANNEL, payload]).catch(() => {});
      }
    });
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
  private async match(c: Client, caller: Caller, callsigns: readonly string[]): Promise<MatchContext> {
    const matches = new Map<string, number[]>();
    const keys = [...new Set(callsigns.map(callsignKey))];
    if (keys.length > 0) {
      const found = caller.administrator
        ? await rows<{ key: string; id: string }>(c, MATCH_ALL, [keys])
        : await rows<{ key: string; id: string }>(c, MATCH_REACHABLE, [keys, caller.id]);
      const byKey = new Map<string, number[]>();
      for (const r of found) {
        let ids = byKey.get(r.key);
        if (!ids) byKey.set(r.key, (ids = []));
        ids.push(Number(r.id));
      }
      for (const key of keys) {
        const ids = byKey.get(key);
        if (ids) matches.set(key, ids);
      }
    }
    return { matches, online: this.presence.online };
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
   * The plan's events, each also its push (the outbox), numbered in its device's own sequence;
   * first the unsent assignments the plan's stand-downs replace (WritePlan.supersede), as in
   * SQLite. The devices' rows are locked last, and held only for one statement and the COMMIT:
   * every write that shares a device waits for them.
   */
  private async writeEvents(c: Client, incident: Incident, plan: WritePlan, read: ReadonlySet<number>): Promise<EventView[]> {
    if (plan.events.length === 0) return [];
    const { now, events: drafts } = plan;
    const [version] = await rows<{ id: string }>(c, `INSERT INTO incident_versions (incident_id, incident) VALUES ($1, $2) RETURNING id`, [
      incident.id,
      JSON.stringify(incident),
    ]);
    const replaced = new Set<number>();
    if (plan.supersede.length > 0) {
      const superseded = await rows<{ device_id: string }>(
        c,
        `UPDATE events SET state = 'SUPERSEDED'
           WHERE incident_id = $1 AND device_id = ANY($2::int8[]) AND type = 'incidentAssigned' AND state = 'PENDING' AND attempts = 0
           RETURNING device_id`,
        [incident.id, plan.supersede],
      );
      for (const r of superseded) replaced.add(Number(r.device_id));
    }
    const states = eventStates(drafts, replaced);
    const deviceIds = [...new Set(drafts.map((e) => e.deviceId))].sort((a, b) => a - b);
    // the devices locked in ascending id order (the bump joins `locked`, read in its order, so
    // it updates no row before the lower ones are locked); each device's push_seq bumped once
    // by its number of events, which take the numbers in plan order; the events inserted in
    // plan order, so their ids grow in it
    const written = await rows<{ id: string; device_id: string; push_seq: string }>(
      c,
      `WITH locked AS MATERIALIZED (
         SELECT id FROM devices WHERE id = ANY($8::int8[]) ORDER BY id FOR NO KEY UPDATE
       ), input AS (
         SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS x(device_id, type, attributes, state, ord)
       ), counts AS (
         SELECT device_id, count(*) AS n FROM input GROUP BY device_id
       ), bumped AS (
         UPDATE devices d SET push_seq = d.push_seq + c.n FROM counts c JOIN locked l ON l.id = c.device_id WHERE d.id = c.device_id RETURNING d.id, d.push_seq - c.n AS before
       )
       INSERT INTO events (type, device_id, incident_id, event_time, attributes, version_id, state, push_seq)
       SELECT i.type, i.device_id, $5, $6, i.attributes, $7, i.state, b.before + row_number() OVER (PARTITION BY i.device_id ORDER BY i.ord)
       FROM input i JOIN bumped b ON b.id = i.device_id
       ORDER BY i.ord
       RETURNING id, device_id, push_seq`,
      [
        drafts.map((e) => e.deviceId),
        drafts.map((e) => e.type),
        drafts.map((e) => JSON.stringify(e.attributes)),
        states,
        incident.id,
        now,
        Number(version!.id),
        deviceIds,
      ],
    );
    if (written.length !== drafts.length) {
      const found = new Set(written.map((r) => Number(r.device_id)));
      const missing = drafts.find((e) => !found.has(e.deviceId))!.deviceId;
      // deleted since this unit of work read it: run again, without it; else a plan's bug
      if (read.has(missing)) throw new DeviceGone(`device ${missing} was deleted during the write`);
      throw new Error(`an event for device ${missing}, which does not exist`);
    }
    // each device's rows, in push_seq order, are its drafts in plan order
    const byDevice = new Map<number, number[]>();
    for (const r of [...written].sort((x, y) => Number(x.push_seq) - Number(y.push_seq))) {
      const device = Number(r.device_id);
      let ids = byDevice.get(device);
      if (!ids) byDevice.set(device, (ids = []));
      ids.push(Number(r.id));
    }
    return drafts.map((e, i) => ({
      id: byDevice.get(e.deviceId)!.shift()!,
      type: e.type,
      eventTime: now,
      deviceId: e.deviceId,
      incidentId: incident.id,
      attributes: e.attributes,
      state: states[i]!,
      attempts: 0,
    }));
  }

  /**
   * SQLite's stand-down rule, in one statement: SQLite writes the drafts in order, and each
   * stand-down supersedes its device's assignments of the incident still PENDING and never sent
   * (the stand-down is then SUPERSEDED too). Here the stored ones are superseded at once, and
   * the drafts' states worked out in order: an assignment of this plan followed by a stand-down
   * of its device is stored SUPERSEDED (it is returned as written, PENDING, as SQLite returns it).
   * The domain's plans put stand-downs first, so that case is SQLite's rule taken whole.
   */

  /**
   * The key claimed in this transaction (whether it is new, and the keys the user held), or the
   * answer to give instead: the stored one (same fingerprint), or IDEMPOTENCY_KEY_REUSED.
   */
  private async claim(c: Client, caller: Caller, claim: IdempotencyClaim, now: string): Promise<Outcome | { fresh: boolean; held: number }> {
    // a key found taken can be swept (past its retention by another node's clock) before it is
    // read: then it is claimed again
    for (let attempt = 0; attempt < 2; attempt += 1) {
      const [claimed] = await rows<{ fresh: boolean; held: number | string }>(c, KEY_CLAIM, [caller.id, claim.key, claim.fingerprint, now, claim.keptAfter]);
      if (claimed) return { fresh: claimed.fresh, held: Number(claimed.held) };
      const [stored] = await rows<{ fingerprint: string; answer: string }>(c, KEY_ANSWER, [caller.id, claim.key]);
      if (stored) return keptAnswer(stored, claim);
    }
    throw new Error('an Idempotency-Key found taken, then gone, twice');
  }

  /** the stripe a new key of the user is counted in, or null when the user holds the bound */
  private async countKey(c: Client, userId: number, max: number): Promise<number | null> {
    const caps = keyStripeCaps(max, KEY_STRIPES);
    const [free] = await rows<{ stripe: number }>(c, KEY_COUNTED, [userId, caps]);
    if (free) return free.stripe;
    await c.query(KEY_STRIPES_MADE, [userId]);
    const [waited] = await rows<{ stripe: number }>(c, KEY_COUNTED_WAIT, [userId, caps]);
    return waited ? waited.stripe : null;
  }

  async read(caller: Caller, id: number): Promise<Versioned | 'NOT_FOUND' | 'FORBIDDEN'> {
    if (!inRange(id)) return 'NOT_FOUND';
    const [row] = await rows<IncidentRow & { version: string | number }>(this.pool, BY_ID, [id]);
    if (!row) return 'NOT_FOUND';
    if (!(await this.reaches(this.pool, caller, id))) return 'FORBIDDEN';
    return { incident: toIncident(row), version: Number(row.version) };
  }

  async sweepIdempotencyKeys(createdBefore: string, limit: number): Promise<number> {
    const [swept] = await rows<{ removed: number }>(this.pool, KEY_SWEEP, [createdBefore, limit]);
    return swept?.removed ?? 0;
  }

  /**
   * The unit of work (ports/incidents.ts): reads the incident `locator` names (locked), matches
   * the callsigns for the caller, lets `decide` say what to write, and writes it, in one
   * transaction; run again whole on a retryable error (runsAgain).
   */
  async write(caller: Caller, locator: Locator, decide: Decide, options: WriteOptions): Promise<Outcome> {
    const outcome = await this.committed(caller, locator, decide, options);
    // committed: the other nodes may send these pushes (a replay wrote none)
    if (outcome.ok && !outcome.replayed && outcome.events.length > 0) this.notifyAfterCommit(outcome.events.map((e) => e.deviceId));
    return outcome;
  }

  private async committed(caller: Caller, locator: Locator, decide: Decide, options: WriteOptions): Promise<Outcome> {
    const claim = options.idempotency;
    if (!claim) return this.unitOfWork((c) => this.change(c, caller, locator, decide, options));
    const exhausted: Outcome = { ok: false, refusal: { code: 'IDEMPOTENCY_KEYS_EXHAUSTED', max: claim.maxKeys } };
    try {
      return await this.unitOfWork(async (c): Promise<Outcome> => {
        const claimed = await this.claim(c, caller, claim, options.now);
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
          stripe = await this.countKey(c, caller.id, claim.maxKeys);
          if (stripe === null) throw new Unkept(exhausted);
        }
        await c.query(KEY_STORE, [caller.id, claim.key, JSON.stringify(answerOf(outcome)), stripe]);
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
    const context = await this.match(c, caller, options.callsigns);
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
    const events = await this.writeEvents(c, incident, plan, read);
    return { ok: true, incident, version: plan.version, report: plan.report, events };
  }

  async list(filter: ListFilter): Promise<{ incidents: Incident[]; more: boolean }> {
    const where: string[] = [];
    const args: unknown[] = [];
    const arg = (v: unknown) => {
      args.push(v);
      return `$${args.length}`;
    };
    let from = 'incidents i';
    let order = 'i.id';
    if (filter.ownerIds !== null) {
      if (filter.ownerIds.length === 0) return { incidents: [], more: false };
      if (filter.ownerIds.length === 1) {
        // walks the owner's links (user_incidents' primary key) in incident order
        from = 'user_incidents ui JOIN incidents i ON i.id = ui.incident_id';
        order = 'ui.incident_id';
        where.push(`ui.user_id = ${arg(filter.ownerIds[0])}`);
      } else {
        where.push(`EXISTS (SELECT 1 FROM user_incidents ui WHERE ui.incident_id = i.id AND ui.user_id = ANY(${arg(filter.ownerIds)}::int8[]))`);
      }
    }
    if (filter.status) where.push(`i.status = ${arg(filter.status)}`);
    if (filter.originId !== undefined) where.push(`i.origin_id = ${arg(filter.originId)}`);
    if (filter.callsign !== undefined) where.push(`i.id IN (SELECT incident_id FROM incident_callsigns WHERE callsign_key = ${arg(callsignKey(filter.callsign))})`);
    if (filter.updatedSince !== undefined) where.push(`i.stored_at >= ${arg(utc(filter.updatedSince))}`);
    const sql = `SELECT ${selectList('i.')} FROM ${from} ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY ${order} LIMIT ${arg(filter.limit + 1)} OFFSET ${arg(filter.offset)}`;
    const found = await rows<IncidentRow>(this.pool, sql, args);
    const more = found.length > filter.limit;
    const page = more ? found.slice(0, filter.limit) : found;
    return { incidents: page.map(toIncident), more };
  }

  async events(filter: EventFilter): Promise<EventView[]> {
    const where: string[] = [];
    const args: unknown[] = [];
    const arg = (v: unknown) => {
      args.push(v);
      return `$${args.length}`;
    };
    if (filter.ownerIds !== null) {
      if (filter.ownerIds.length === 0) return [];
      where.push(`e.device_id IN (SELECT device_id FROM user_devices WHERE user_id = ANY(${arg(filter.ownerIds)}::int8[]))`);
    }
    if (filter.incidentId !== undefined) {
      if (!inRange(filter.incidentId)) return [];
      where.push(`e.incident_id = ${arg(filter.incidentId)}`);
    }
    if (filter.deviceId !== undefined) {
      if (!inRange(filter.deviceId)) return [];
      where.push(`e.device_id = ${arg(filter.deviceId)}`);
    }
    if (filter.type !== undefined) where.push(`e.type = ${arg(filter.type)}`);
    if (filter.from !== undefined) where.push(`e.event_time >= ${arg(utc(filter.from))}`);
    if (filter.to !== undefined) where.push(`e.event_time < ${arg(utc(filter.to))}`);
    // in id order, as the spec says, one device's too: its incidentResponse events have negative
    // push_seqs (responses.ts), so push_seq order is no longer id order (2026-11-26)
    const order = 'e.id';
    const found = await rows<Omit<EventView, 'id' | 'deviceId' | 'incidentId' | 'attributes'> & { id: string; deviceId: string; incidentId: string; attributes: string }>(
      this.pool,
      `SELECT e.id, e.type, e.event_time AS "eventTime", e.device_id AS "deviceId", e.incident_id AS "incidentId", e.attributes, e.state, e.attempts
       FROM events e ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY ${order} LIMIT ${arg(filter.limit)} OFFSET ${arg(filter.offset)}`,
      args,
    );
    return found.map((r) => ({
      ...r,
      id: Number(r.id),
      deviceId: Number(r.deviceId),
      incidentId: Number(r.incidentId),
      attributes: JSON.parse(r.attributes) as EventView['attributes'],
    }));
  }
}

/** the device ids, comma-separated, in as few payloads as NOTIFY takes (each under 8000 bytes) */
export function notifyPayloads(deviceIds: readonly number[]): string[] {
  const out: string[] = [];
  let current = '';
  for (const id of deviceIds) {
    const s = String(id);
    if (current.length > 0 && current.length + 1 + s.length > NOTIFY_MAX) {
      out.push(current);
      current = '';
    }
    current = current.length > 0 ? `${current},${s}` : s;
  }
  if (current.length > 0) out.push(current);
  return out;
}

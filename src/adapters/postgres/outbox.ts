// The push outbox on PostgreSQL (ports/outbox.ts), with the answers of src/adapters/sqlite/outbox.ts:
// what is pending for a device, what was sent, acknowledged, expired; and the devices' presence
// rows. Every event is a push; its pushId is events.push_seq, the device's own sequence, bumped
// under the device's row lock by the unit of work that writes it (incidents.ts): gapless and in
// commit order per device. Event ids are not in commit order here (schema.ts), and nothing below
// relies on them being so.
//
// devices.settled_up_to is the floor of sqlite/outbox.ts: no push of the device at or below it
// is pending; a hint for reads, never needed for correctness. It is raised only to a value read
// in the same snapshot as what justifies it, or an older one: a device's pushes commit in pushId
// order, so a snapshot holds a prefix of them, and a push committed after it has a higher pushId
// than any it holds. "The device's last push" is max(push_seq) of its events in that snapshot.
//
// No durable horizon: a committed row is on disk (SQLite's group commit answers before its
// fsync, hence its horizon).
//
// The TTL sweep cannot walk events by id from a floor as SQLite's does: an id below the floor
// may still commit later. It takes, instead, a bounded batch of the pending events older than
// the cutoff through the partial index events_pending (migration 0002), skipping rows another
// transaction holds (they are expired by a later step). push_expiry is not used here.
//
// Each method is one statement (autocommit), run again on a deadlock or serialization failure:
// an ack or a sweep meets the incident unit of work on the same devices and events rows.
import type pg from 'pg';
import type { PgDb } from './db.js';
import { isRetryable } from './errors.js';
import type { OutboxPort, PushRow } from '../../ports/outbox.js';
import { incidentDeliveryPayload, type DeliveryFacts } from '../../domain/webhook-payloads.js';
import { webhooksWant, writeWebhookDeliveries } from './webhooks.js';

export type { PushRow };

/** how many pending events one step of the TTL sweep expires at most */
export const EXPIRY_STEP = 5_000;

/** how many times a statement runs before a deadlock or serialization failure is thrown */
const ATTEMPTS = 3;

async function retrying<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      if (attempt >= ATTEMPTS || !isRetryable(err)) throw err;
    }
  }
}

// the device's last push, its floor, in the statement's snapshot
const LAST_PUSH = `SELECT coalesce(max(push_seq), 0) AS n FROM events WHERE device_id = $1`;
const FLOOR = `SELECT settled_up_to FROM devices WHERE id = $1`;

/** the pending pushes after the cursor (or the floor), with the device's floor and last push of the same snapshot */
const PENDING_AFTER = `
  SELECT coalesce((${FLOOR}), 0) AS floor, last.n AS last,
         r.push_seq AS "pushId", r.id AS "eventId", r.type, r.event_time AS "eventTime", r.device_id AS "deviceId",
         r.incident_id AS "incidentId", r.attributes, r.incident, r.last_sent_at AS "lastSentAt"
  FROM (${LAST_PUSH}) last
  LEFT JOIN LATERAL (
    SELECT e.push_seq, e.id, e.type, e.event_time, e.device_id, e.incident_id, e.attributes, v.incident, e.last_sent_at
    FROM events e JOIN incident_versions v ON v.id = e.version_id
    WHERE e.device_id = $1 AND e.push_seq > greatest($2::bigint, (${FLOOR})) AND e.state = 'PENDING'
    ORDER BY e.push_seq LIMIT $3
  ) r ON true
  ORDER BY r.push_seq`;

/** the oldest pending push sent (pushId up to $2), with the floor and the last push of the same snapshot */
const OLDEST_UNACKED = `
  SELECT coalesce((${FLOOR}), 0) AS floor, last.n AS last, o.push_seq AS id, o.last_sent_at AS "lastSentAt"
  FROM (${LAST_PUSH}) last
  LEFT JOIN LATERAL (
    SELECT push_seq, last_sent_at FROM events
    WHERE device_id = $1 AND push_seq > coalesce((${FLOOR}), 0) AND push_seq <= $2 AND state = 'PENDING'
    ORDER BY push_seq LIMIT 1
  ) o ON true`;

const RAISE = `UPDATE devices SET settled_up_to = $2 WHERE id = $1 AND settled_up_to < $2`;

/**
 * A cumulative ack in one statement: the device's row first (the lock the unit of work takes
 * before it writes the device's events, so the two never wait on each other in a cycle), then
 * its pending pushes from the floor up to the ack, never past its last push of this snapshot,
 * then the floor raised there.
 */
const ACK = `
  WITH device AS (SELECT settled_up_to AS floor FROM devices WHERE id = $1 FOR NO KEY UPDATE),
  upto AS (SELECT least($2::bigint, (${LAST_PUSH})) AS n),
  delivered AS (
    UPDATE events SET state = 'DELIVERED', delivered_at = $3
    WHERE device_id = $1 AND push_seq > (SELECT floor FROM device) AND push_seq <= (SELECT n FROM upto) AND state = 'PENDING'
    RETURNING 1
  ),
  raised AS (
    UPDATE devices SET settled_up_to = (SELECT n FROM upto)
    WHERE id = $1 AND settled_up_to < (SELECT n FROM upto)
    RETURNING 1
  )
  SELECT (SELECT count(*)::int FROM delivered) AS delivered, (SELECT count(*)::int FROM raised) AS raised`;

/**
 * One step of the sweep: up to $2 events pending since before $1, none another transaction
 * holds. `= ANY(ARRAY(…))`, not `IN (…)`: the rows are then updated through the primary key
 * (with IN, the planner joins the step's ids with every pending event).
 */
const EXPIRE = `
  UPDATE events SET state = 'EXPIRED' WHERE id = ANY(ARRAY(
    SELECT id FROM events WHERE state = 'PENDING' AND event_time < $1
    ORDER BY event_time LIMIT $2 FOR UPDATE SKIP LOCKED
  )) AND state = 'PENDING'`;

/** ACK and EXPIRE returning what they settled, for the incident.delivery webhooks (run in a transaction with their deliveries) */
const ACK_RETURNING = ACK.replace('RETURNING 1\n  ),\n  raised', `RETURNING id, type, device_id, incident_id, attributes, version_id
  ),
  raised`).replace(
  'SELECT (SELECT count(*)::int FROM delivered) AS delivered, (SELECT count(*)::int FROM raised) AS raised',
  `SELECT d.id, d.type, d.device_id AS "deviceId", d.incident_id AS "incidentId", d.attributes, v.incident::jsonb->>'originId' AS "originId",
          (SELECT count(*)::int FROM raised) AS raised
   FROM delivered d JOIN incident_versions v ON v.id = d.version_id`,
);
const EXPIRE_RETURNING = `WITH expired AS (${EXPIRE.trim()} RETURNING id, type, device_id, incident_id, attributes, version_id)
  SELECT e.id, e.type, e.device_id AS "deviceId", e.incident_id AS "incidentId", e.attributes, v.incident::jsonb->>'originId' AS "originId"
  FROM expired e JOIN incident_versions v ON v.id = e.version_id`;

if (ACK_RETURNING === ACK) throw new Error('ACK_RETURNING was not derived from ACK');

/** a push settled, as its webhook delivery needs it */
interface Settled {
  id: Num;
  /** a push's event: only those are ever PENDING */
  type: DeliveryFacts['eventType'];
  deviceId: Num;
  incidentId: Num;
  attributes: string;
  originId: string | null;
}

const SET_STATUSES = `
  UPDATE devices d SET status = v.status, last_update = coalesce(v.at, d.last_update)
  FROM unnest($1::bigint[], $2::text[], $3::text[]) AS v(id, status, at)
  WHERE d.id = v.id`;

type Num = string | number;
const num = (v: Num | null | undefined): number => (v === null || v === undefined ? 0 : Number(v));

/** how long PgOutbox trusts its last look at whether a webhook wants incident.delivery */
export const WANTS_DELIVERY_TTL_MS = 1000;

export class PgOutbox implements OutboxPort {
  private readonly pool: pg.Pool;
  private wants: { at: number; value: Promise<boolean> } | null = null;

  /**
   * Whether an enabled webhook subscribes to incident.delivery, asked at most once a second (an
   * ack is one statement; asking on each would add a round trip to every ack). A webhook
   * created or enabled gets the deliveries of acks from a second later on.
   */
  private wantsDelivery(): Promise<boolean> {
    const now = Date.now();
    if (!this.wants || now - this.wants.at >= WANTS_DELIVERY_TTL_MS) {
      const value = webhooksWant(this.pool, 'incident.delivery');
      this.wants = { at: now, value };
      value.catch(() => (this.wants = null));
    }
    return this.wants.value;
  }

  constructor(db: PgDb) {
    this.pool = db.$client;
  }

  /** the floor is a hint: a raise that fails (the row locked, the connection lost) is left to a later one */
  private async raise(deviceId: number, floor: number, to: number): Promise<void> {
    if (to <= floor) return;
    try {
      await this.pool.query(RAISE, [deviceId, to]);
    } catch {
      // raised by a later read instead
    }
  }

  /** the device's pending pushes after `afterPushId`, in order (0: a new socket's first read) */
  async pendingAfter(deviceId: number, afterPushId: number, limit: number): Promise<PushRow[]> {
    type Row = { floor: Num; last: Num; pushId: Num | null; eventId: Num; deviceId: Num; incidentId: Num } & Omit<PushRow, 'pushId' | 'eventId' | 'deviceId' | 'incidentId'>;
    const { rows } = await retrying(() => this.pool.query<Row>(PENDING_AFTER, [deviceId, afterPushId, limit]));
    const head = rows[0];
    const found: PushRow[] = rows
      .filter((r) => r.pushId !== null)
      .map((r) => ({
        pushId: num(r.pushId),
        eventId: num(r.eventId),
        type: r.type,
        eventTime: r.eventTime,
        deviceId: num(r.deviceId),
        incidentId: num(r.incidentId),
        attributes: r.attributes,
        incident: r.incident,
        lastSentAt: r.lastSentAt,
      }));
    // A new socket reads from the floor: nothing is pending below the first row found (or at
    // all, up to the last push of the read's snapshot), so the floor moves past what it stepped
    // over (sqlite/outbox.ts). Later reads start at the socket's cursor and write nothing.
    if (afterPushId === 0 && head) await this.raise(deviceId, num(head.floor), found.length > 0 ? found[0]!.pushId - 1 : num(head.last));
    return found;
  }

  /** the pushes sent, by their event ids (PushRow.eventId): one statement */
  async markSent(eventIds: readonly number[], at: string): Promise<void> {
    if (eventIds.length === 0) return;
    await retrying(() => this.pool.query('UPDATE events SET attempts = attempts + 1, last_sent_at = $2 WHERE id = ANY($1::bigint[])', [eventIds, at]));
  }

  /**
   * The statement run in a transaction with the incident.delivery webhook deliveries of the
   * pushes it settled (one per push; none when no webhook wants them). How many pushes.
   */
  private async settledWithHooks(sql: string, values: unknown[], state: 'DELIVERED' | 'EXPIRED', at: string): Promise<number> {
    return retrying(async () => {
      const c = await this.pool.connect();
      let broken: Error | undefined;
      try {
        await c.query('BEGIN');
        try {
          const { rows } = await c.query<Settled>(sql, values);
          for (const e of rows) {
            await writeWebhookDeliveries(
              c,
              incidentDeliveryPayload({
                incidentId: num(e.incidentId),
                originId: e.originId,
                deviceId: num(e.deviceId),
                eventId: num(e.id),
                eventType: e.type,
                attributes: JSON.parse(e.attributes) as DeliveryFacts['attributes'],
                state,
                at,
              }),
            );
          }
          await c.query('COMMIT');
          return rows.length;
        } catch (err) {
          await c.query('ROLLBACK').catch((e: unknown) => (broken = e instanceof Error ? e : new Error(String(e))));
          throw err;
        }
      } finally {
        c.release(broken);
      }
    });
  }

  /** cumulative: every pending push of this device with a pushId <= upTo becomes DELIVERED (none past its last push) */
  async ack(deviceId: number, upTo: number, at: string): Promise<number> {
    if (await this.wantsDelivery()) return this.settledWithHooks(ACK_RETURNING, [deviceId, upTo, at], 'DELIVERED', at);
    const { rows } = await retrying(() => this.pool.query<{ delivered: number }>(ACK, [deviceId, upTo, at]));
    return rows[0]?.delivered ?? 0;
  }

  /** the oldest push of the device still pending among those sent so far (pushIds up to sentUpTo); `id` is its pushId */
  async oldestUnacked(deviceId: number, sentUpTo: number): Promise<{ id: number; lastSentAt: string | null } | undefined> {
    const { rows } = await retrying(() =>
      this.pool.query<{ floor: Num; last: Num; id: Num | null; lastSentAt: string | null }>(OLDEST_UNACKED, [deviceId, sentUpTo]),
    );
    const row = rows[0];
    if (!row) return undefined;
    if (row.id !== null) return { id: num(row.id), lastSentAt: row.lastSentAt };
    // everything sent is settled without an ack (expired): the next lookup starts after it, but
    // never past the device's last push (sqlite/outbox.ts)
    await this.raise(deviceId, num(row.floor), Math.min(sentUpTo, num(row.last)));
    return undefined;
  }

  /**
   * One step of the TTL sweep: up to `step` events pending since before `cutoff` become
   * EXPIRED. `more` is true when the step was full: call again (after a turn of the event loop)
   * until it is false. A row another transaction holds is skipped, and expired by a later sweep.
   */
  async expireStep(cutoff: string, step = EXPIRY_STEP, at = new Date().toISOString()): Promise<{ expired: number; more: boolean }> {
    if (await this.wantsDelivery()) {
      const expired = await this.settledWithHooks(EXPIRE_RETURNING, [cutoff, step], 'EXPIRED', at);
      return { expired, more: expired >= step };
    }
    const { rowCount } = await retrying(() => this.pool.query(EXPIRE, [cutoff, step]));
    const expired = rowCount ?? 0;
    return { expired, more: expired >= step };
  }

  /** presence of many devices in one statement; a device named twice ends as its last row says */
  async setStatuses(rows: readonly { deviceId: number; status: 'online' | 'offline'; at: string | null }[]): Promise<void> {
    if (rows.length === 0) return;
    const last = new Map<number, { status: string; at: string | null }>();
    for (const r of rows) last.set(r.deviceId, { status: r.status, at: r.at ?? last.get(r.deviceId)?.at ?? null });
    // in ascending id order, as the unit of work locks devices
    const ids = [...last.keys()].sort((a, b) => a - b);
    await retrying(() =>
      this.pool.query(SET_STATUSES, [ids, ids.map((id) => last.get(id)!.status), ids.map((id) => last.get(id)!.at)]),
    );
  }

  /** the pending pushes: an index-only count of the partial index events_pending (migration 0002) */
  async countPending(): Promise<number> {
    const { rows } = await this.pool.query<{ n: string }>(`SELECT count(*) AS n FROM events WHERE state = 'PENDING'`);
    return Number(rows[0]!.n);
  }

  /** at start: no device is online (a crash left some rows saying so) */
  async resetPresence(): Promise<void> {
    await retrying(() => this.pool.query(`UPDATE devices SET status = 'offline' WHERE status = 'online'`));
  }
}

// The push outbox on SQLite (ports/outbox.ts), as the delivery side sees it: what is pending for a
// device, what was sent, acknowledged, expired. OutboxRows holds the SQL, synchronous (tests call
// it directly); SqliteOutbox, at the end, is the port over it. Every event is a push; the incident unit of work (incidents.ts) writes
// them. Its pushId is events.push_seq, the device's own sequence: gapless and in commit order
// for that device, so a cumulative ack ("every push <= N of this device") never settles a push
// that commits later with a lower number, as a global id could on an engine whose sequences
// commit out of order (PostgreSQL). Per device, pushIds grow with event ids.
//
// devices.settled_up_to is a floor, a pushId of the device: none of its pushes at or below it
// is pending. Every read here starts there, on events_device (device_id, push_seq), instead of
// at the device's first push. It only rises: a cumulative ack raises it to the acked pushId
// (never past the device's last push written, so an ack of an unused pushId hides nothing
// later); a new socket's first read, which finds nothing pending below its first row, raises it
// there, so expired or superseded pushes are stepped over once per connection, not on every
// read. No push of the device can later appear at or below it: its pushIds only grow. It is a
// hint for reads, never needed for correctness: any lower value gives the same answers, more
// slowly.
//
// Only pushes the disk has are read or settled: those whose event id is up to `durable()`, the
// group commit's horizon (group-commit.ts, a global event id). A push of a write whose fsync is
// still under way waits for it: a device must never act on an incident that a power cut could
// take back. Per device the pushes past the horizon are the last ones, so none is stepped over.
//
// The TTL sweep walks events by id, with no index of its own (an index of pending events cost
// every event one more B-tree write; migration 0011). Events are written in time order: a
// PENDING event younger than the cutoff means every later one is younger too, so a sweep
// stops there. push_expiry.expired_through is where the last sweep stopped: no event at or
// below it is PENDING past that sweep's cutoff, and none can become PENDING again. A clock
// stepped back while events were written only delays the expiry of the events written after
// the step (up to the size of the step); none expires early, as every row is also checked
// against the cutoff.
import type Database from 'better-sqlite3';
import type { Db } from './db.js';
import type { OutboxPort, PushRow } from '../../ports/outbox.js';
import type { Gate } from './gate.js';
import { incidentDeliveryPayload, type DeliveryFacts } from '../../domain/webhook-payloads.js';
import { webhooksWant, writeWebhookDeliveries } from './webhooks.js';
import { relaxedTransaction } from './engine/relaxed.js';

export type { PushRow };

/**
 * How many event ids one slice of the pending count reads, in one turn of the event loop: about
 * 2 ms (300 000 events read whole took 30-120 ms on this machine, 2026-11-26, under load).
 */
export const COUNT_SLICE = 20_000;

/** how many event ids one step of the TTL sweep covers (two range scans of the table by id) */
export const EXPIRY_STEP = 5_000;

/** a push settled (acknowledged or expired), as its webhook delivery needs it */
interface Settled {
  id: number;
  /** a push's event: only those are ever PENDING */
  type: DeliveryFacts['eventType'];
  deviceId: number;
  incidentId: number;
  attributes: string;
  versionId: number;
}

/** the outbox's queries, answering at once */
export class OutboxRows {
  private readonly sqlite: Database.Database;
  private readonly st;
  /** push_expiry.expired_through, as last written */
  private expiredThrough: number;
  private readonly level: number;

  constructor(
    db: Db,
    private readonly durable: () => number = () => Infinity,
  ) {
    this.sqlite = db.$client;
    const p = (sql: string) => this.sqlite.prepare(sql);
    this.st = {
      floor: p(`SELECT settled_up_to FROM devices WHERE id = ?`).pluck(),
      raise: p(`UPDATE devices SET settled_up_to = ? WHERE id = ? AND settled_up_to < ?`),
      lastEvent: p(`SELECT coalesce(max(id), 0) FROM events`).pluck(),
      // the device's last push on disk: backwards on events_device from its last push
      lastDurablePush: p(`SELECT push_seq FROM events WHERE device_id = ? AND id <= ? ORDER BY push_seq DESC LIMIT 1`).pluck(),
      pendingFrom: p(
        `SELECT e.push_seq AS pushId, e.id AS eventId, e.type, e.event_time AS eventTime, e.device_id AS deviceId, e.incident_id AS incidentId,
                e.attributes, v.incident, e.last_sent_at AS lastSentAt
         FROM events e JOIN incident_versions v ON v.id = e.version_id
         WHERE e.device_id = ? AND e.push_seq > ? AND e.id <= ? AND e.state = 'PENDING' ORDER BY e.push_seq LIMIT ?`,
      ),
      markSent: p(`UPDATE events SET attempts = attempts + 1, last_sent_at = ? WHERE id = ?`),
      ack: p(`UPDATE events SET state = 'DELIVERED', delivered_at = ? WHERE device_id = ? AND push_seq > ? AND push_seq <= ? AND state = 'PENDING'`),
      oldestPending: p(
        `SELECT push_seq AS id, last_sent_at AS lastSentAt FROM events
         WHERE device_id = ? AND push_seq > ? AND push_seq <= ? AND state = 'PENDING' ORDER BY push_seq LIMIT 1`,
      ),
      // the first event of the step still PENDING and younger than the cutoff: the sweep stops there
      youngPending: p(`SELECT id FROM events WHERE id > ? AND id <= ? AND state = 'PENDING' AND event_time >= ? ORDER BY id LIMIT 1`).pluck(),
      expire: p(`UPDATE events SET state = 'EXPIRED' WHERE id > ? AND id <= ? AND state = 'PENDING' AND event_time < ?`),
      expiredThrough: p(`SELECT expired_through FROM push_expiry WHERE id = 1`).pluck(),
      setExpiredThrough: p(
        `INSERT INTO push_expiry (id, expired_through) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET expired_through = excluded.expired_through`,
      ),
      // the incident.delivery webhooks' variants: what was settled, for their deliveries
      ackReturning: p(
        `UPDATE events SET state = 'DELIVERED', delivered_at = ? WHERE device_id = ? AND push_seq > ? AND push_seq <= ? AND state = 'PENDING'
         RETURNING id, type, device_id AS deviceId, incident_id AS incidentId, attributes, version_id AS versionId`,
      ),
      expireReturning: p(
        `UPDATE events SET state = 'EXPIRED' WHERE id > ? AND id <= ? AND state = 'PENDING' AND event_time < ?
         RETURNING id, type, device_id AS deviceId, incident_id AS incidentId, attributes, version_id AS versionId`,
      ),
      originOf: p(`SELECT json_extract(incident, '$.originId') FROM incident_versions WHERE id = ?`).pluck(),
      status: p(`UPDATE devices SET status = ?, last_update = COALESCE(?, last_update) WHERE id = ?`),
      resetPresence: p(`UPDATE devices SET status = 'offline' WHERE status = 'online'`),
      countPendingIn: p(`SELECT count(*) FROM events WHERE id > ? AND id <= ? AND state = 'PENDING'`).pluck(),
    };
    this.expiredThrough = (this.st.expiredThrough.get() as number | undefined) ?? 0;
    // the connection's configured synchronous level (0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA)
    this.level = this.sqlite.pragma('synchronous', { simple: true }) as number;
  }

  /** the pushId of the device's last push the disk has (0: none) */
  private lastDurablePush(deviceId: number): number {
    return (this.st.lastDurablePush.get(deviceId, Math.min(this.durable(), Number.MAX_SAFE_INTEGER)) as number | undefined) ?? 0;
  }

  /** no push of the device at or below the returned id is pending */
  private floor(deviceId: number): number {
    return (this.st.floor.get(deviceId) as number | undefined) ?? 0;
  }

  private raise(deviceId: number, floor: number, to: number): void {
    if (to > floor) this.relaxed(() => this.st.raise.run(to, deviceId, to));
  }

  /** the device's pending pushes after `afterPushId`, in order (0: a new socket's first read) */
  pendingAfter(deviceId: number, afterPushId: number, limit: number): PushRow[] {
    const floor = this.floor(deviceId);
    const durable = Math.min(this.durable(), Number.MAX_SAFE_INTEGER);
    const rows = this.st.pendingFrom.all(deviceId, Math.max(afterPushId, floor), durable, limit) as PushRow[];
    // A new socket reads from the floor: nothing is pending below the first row found (or at
    // all), so the floor moves past what this read stepped over. Later reads start at the
    // socket's cursor and write nothing: no write per push delivered.
    // The floor is a hint: a write refused (a full disk) must not lose the rows read.
    if (afterPushId === 0) {
      try {
        this.raise(deviceId, floor, rows.length > 0 ? rows[0]!.pushId - 1 : this.lastDurablePush(deviceId));
      } catch {
        // raised by a later read instead
      }
    }
    return rows;
  }

  /**
   * A delivery write: one transaction at synchronous=NORMAL, whatever the database's level. It
   * needs no fsync of its own (at FULL, one each made the event loop wait for the disk 1 200
   * times a second at 100 incidents/s): a lost ack or send repeats a push, which devices drop
   * by pushId; presence starts over at every start; the floor is a hint. The next group
   * commit's fdatasync of the WAL makes it durable with everything before it.
   */
  private relaxed<T>(fn: () => T): T {
    // inside a transaction already (ack raising the floor): part of it
    return relaxedTransaction(this.sqlite, this.level, fn, 'deferred');
  }

  /** the incident.delivery webhook deliveries of the pushes just settled, in the same transaction; how many pushes */
  private deliveryHooks(settled: readonly Settled[], state: 'DELIVERED' | 'EXPIRED', at: string): number {
    for (const e of settled) {
      const originId = this.st.originOf.get(e.versionId) as string | undefined;
      writeWebhookDeliveries(
        this.sqlite,
        incidentDeliveryPayload({
          incidentId: e.incidentId,
          originId: originId ?? null,
          deviceId: e.deviceId,
          eventId: e.id,
          eventType: e.type,
          attributes: JSON.parse(e.attributes) as DeliveryFacts['attributes'],
          state,
          at,
        }),
      );
    }
    return settled.length;
  }

  /** the pushes sent, by their event ids (PushRow.eventId): one row each by its key */
  markSent(eventIds: readonly number[], at: string): void {
    this.relaxed(() => {
      for (const id of eventIds) this.st.markSent.run(at, id);
    });
  }

  /** cumulative: every pending push of this device with a pushId <= upTo becomes DELIVERED (none it cannot have been sent) */
  ack(deviceId: number, upTo: number, at: string): number {
    return this.relaxed(() => {
      const floor = this.floor(deviceId);
      const settled = Math.min(upTo, this.lastDurablePush(deviceId));
      const delivered = webhooksWant(this.sqlite, 'incident.delivery')
        ? this.deliveryHooks(this.st.ackReturning.all(at, deviceId, floor, settled) as Settled[], 'DELIVERED', at)
        : this.st.ack.run(at, deviceId, floor, settled).changes;
      this.raise(deviceId, floor, settled);
      return delivered;
    });
  }

  /** the oldest push of the device still pending among those sent so far (pushIds up to sentUpTo); `id` is its pushId */
  oldestUnacked(deviceId: number, sentUpTo: number): { id: number; lastSentAt: string | null } | undefined {
    const floor = this.floor(deviceId);
    if (sentUpTo <= floor) return undefined;
    const oldest = this.st.oldestPending.get(deviceId, floor, sentUpTo) as { id: number; lastSentAt: string | null } | undefined;
    // everything sent is settled without an ack (expired): the next lookup starts after it, but
    // never past the device's last push on disk, like an ack (a pushId above it was not sent,
    // and a floor there would hide the push that later takes it; contract suite, 2026-11-26)
    if (!oldest) this.raise(deviceId, floor, Math.min(sentUpTo, this.lastDurablePush(deviceId)));
    return oldest;
  }

  /**
   * One step of the TTL sweep: every PENDING event written before `cutoff` among the next
   * `step` ids from the floor becomes EXPIRED, up to the first younger one still PENDING.
   * `more` is true when the step ended only because it was full: call again (after a turn of
   * the event loop) until it is false.
   */
  expireStep(cutoff: string, step = EXPIRY_STEP, at = new Date().toISOString()): { expired: number; more: boolean } {
    const floor = this.expiredThrough;
    const { expired, more, through } = this.sqlite.transaction(() => {
      const last = this.st.lastEvent.get() as number;
      const end = Math.min(floor + step, last);
      if (end <= floor) return { expired: 0, more: false, through: floor };
      const young = this.st.youngPending.get(floor, end, cutoff) as number | undefined;
      const through = young === undefined ? end : young - 1;
      const expired =
        through <= floor
          ? 0
          : webhooksWant(this.sqlite, 'incident.delivery')
            ? this.deliveryHooks(this.st.expireReturning.all(floor, through, cutoff) as Settled[], 'EXPIRED', at)
            : this.st.expire.run(floor, through, cutoff).changes;
      if (through > floor) this.st.setExpiredThrough.run(through);
      return { expired, more: young === undefined && end < last, through };
    })();
    // the floor in memory moves only once its row has committed: a failed COMMIT leaves both
    this.expiredThrough = through;
    return { expired, more };
  }

  /** the sweep's floor: no event at or below it is PENDING past the last cutoff swept */
  expiryFloor(): number {
    return this.expiredThrough;
  }

  setStatus(deviceId: number, status: 'online' | 'offline', at: string | null): void {
    this.setStatuses([{ deviceId, status, at }]);
  }

  /** presence of many devices in one transaction (the hub queues it per turn of the event loop) */
  setStatuses(rows: readonly { deviceId: number; status: 'online' | 'offline'; at: string | null }[]): void {
    if (rows.length === 0) return;
    this.relaxed(() => {
      for (const r of rows) this.st.status.run(r.status, r.at, r.deviceId);
    });
  }

  /**
   * How many pushes are PENDING (the metrics' gauge). None is at or below the TTL sweep's floor
   * (top of this file), so only the events after it are read: about the last PUSH_TTL_S of them.
   * They are read by id in slices of COUNT_SLICE, one per turn of the event loop, so that a
   * scrape never holds requests up; a write committed between two slices may be counted or not
   * (a gauge, not an invariant). Pushes of a write whose sync is under way count already. (The
   * device floors do not help here: a join from each device's floor took longer than this walk.)
   */
  async countPending(): Promise<number> {
    const last = this.st.lastEvent.get() as number;
    let from = this.expiredThrough;
    let pending = 0;
    while (from < last) {
      const to = Math.min(from + COUNT_SLICE, last);
      pending += this.st.countPendingIn.get(from, to) as number;
      from = to;
      if (from < last) await new Promise((resolve) => setImmediate(resolve));
    }
    return pending;
  }

  /** after a restart nobody is connected */
  resetPresence(): void {
    this.st.resetPresence.run();
  }
}

/** The outbox port: each call runs its query after the gate (gate.ts), like the identity port's. */
export class SqliteOutbox implements OutboxPort {
  constructor(
    /** the synchronous queries behind the port */
    readonly rows: OutboxRows,
    private readonly gate: Gate,
  ) {}

  pendingAfter(deviceId: number, afterPushId: number, limit: number) {
    return this.gate.pass(() => this.rows.pendingAfter(deviceId, afterPushId, limit));
  }
  markSent(eventIds: readonly number[], at: string) {
    return this.gate.pass(() => this.rows.markSent(eventIds, at));
  }
  ack(deviceId: number, upTo: number, at: string) {
    return this.gate.pass(() => this.rows.ack(deviceId, upTo, at));
  }
  oldestUnacked(deviceId: number, sentUpTo: number) {
    return this.gate.pass(() => this.rows.oldestUnacked(deviceId, sentUpTo));
  }
  expireStep(cutoff: string, step?: number, at?: string) {
    return this.gate.pass(() => this.rows.expireStep(cutoff, step, at));
  }
  setStatuses(rows: readonly { deviceId: number; status: 'online' | 'offline'; at: string | null }[]) {
    return this.gate.pass(() => this.rows.setStatuses(rows));
  }
  resetPresence() {
    return this.gate.pass(() => this.rows.resetPresence());
  }
  /** read in slices, a turn of the event loop each (OutboxRows.countPending) */
  countPending() {
    return this.gate.pass(() => this.rows.countPending());
  }
}

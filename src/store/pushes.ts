// The push outbox as the delivery side sees it: what is pending for a device, what was sent,
// acknowledged, expired. Every event is a push (its id is the pushId); the incident unit of
// work (incidents.ts) writes them. Acks are cumulative, so nothing of a device at or below its
// devices.acked_up_to is pending: every read here starts there, on events_device
// (device_id, id), instead of at the device's first event.
import type Database from 'better-sqlite3';
import type { Db } from './db.js';

export interface PushRow {
  pushId: number;
  eventId: number;
  type: 'incidentAssigned' | 'incidentDeassigned';
  eventTime: string;
  deviceId: number;
  incidentId: number;
  attributes: string;
  incident: string;
  lastSentAt: string | null;
}

export class PushStore {
  private readonly sqlite: Database.Database;
  private readonly st;

  constructor(db: Db) {
    this.sqlite = db.$client;
    const p = (sql: string) => this.sqlite.prepare(sql);
    this.st = {
      pendingAfter: p(
        `SELECT e.id AS pushId, e.id AS eventId, e.type, e.event_time AS eventTime, e.device_id AS deviceId, e.incident_id AS incidentId,
                e.attributes, v.incident, e.last_sent_at AS lastSentAt
         FROM events e JOIN incident_versions v ON v.id = e.version_id
         WHERE e.device_id = @deviceId AND e.state = 'PENDING'
           AND e.id > max(@after, coalesce((SELECT acked_up_to FROM devices WHERE id = @deviceId), 0))
         ORDER BY e.id LIMIT @limit`,
      ),
      markSent: p(`UPDATE events SET attempts = attempts + 1, last_sent_at = ? WHERE id = ?`),
      ack: p(
        `UPDATE events SET state = 'DELIVERED', delivered_at = @at
           WHERE device_id = @deviceId AND state = 'PENDING' AND id <= @upTo
             AND id > coalesce((SELECT acked_up_to FROM devices WHERE id = @deviceId), 0)`,
      ),
      // never past the last event written: an ack of an id not yet used must not hide later pushes
      raiseAcked: p(
        `UPDATE devices SET acked_up_to = min(@upTo, coalesce((SELECT max(id) FROM events), 0))
           WHERE id = @deviceId AND acked_up_to < min(@upTo, coalesce((SELECT max(id) FROM events), 0))`,
      ),
      oldestUnacked: p(
        `SELECT id, last_sent_at AS lastSentAt FROM events
           WHERE device_id = @deviceId AND state = 'PENDING' AND id <= @sentUpTo
             AND id > coalesce((SELECT acked_up_to FROM devices WHERE id = @deviceId), 0)
           ORDER BY id LIMIT 1`,
      ),
      expire: p(`UPDATE events SET state = 'EXPIRED' WHERE state = 'PENDING' AND event_time < ?`),
      status: p(`UPDATE devices SET status = ?, last_update = COALESCE(?, last_update) WHERE id = ?`),
      resetPresence: p(`UPDATE devices SET status = 'offline' WHERE status = 'online'`),
    };
  }

  pendingAfter(deviceId: number, afterPushId: number, limit: number): PushRow[] {
    return this.st.pendingAfter.all({ deviceId, after: afterPushId, limit }) as PushRow[];
  }

  markSent(pushIds: readonly number[], at: string): void {
    this.sqlite.transaction(() => {
      for (const id of pushIds) this.st.markSent.run(at, id);
    })();
  }

  /** cumulative: every pending push <= upTo of this device becomes DELIVERED */
  ack(deviceId: number, upTo: number, at: string): number {
    return this.sqlite.transaction(() => {
      const delivered = this.st.ack.run({ at, deviceId, upTo }).changes;
      this.st.raiseAcked.run({ deviceId, upTo });
      return delivered;
    })();
  }

  /** the oldest push of the device still pending among those sent so far (ids up to sentUpTo) */
  oldestUnacked(deviceId: number, sentUpTo: number): { id: number; lastSentAt: string | null } | undefined {
    return this.st.oldestUnacked.get({ deviceId, sentUpTo }) as { id: number; lastSentAt: string | null } | undefined;
  }

  expireBefore(createdBefore: string): number {
    return this.st.expire.run(createdBefore).changes;
  }

  setStatus(deviceId: number, status: 'online' | 'offline', at: string | null): void {
    this.st.status.run(status, at, deviceId);
  }

  /** after a restart nobody is connected */
  resetPresence(): void {
    this.st.resetPresence.run();
  }
}

// The push outbox as the delivery side sees it: what is pending for a device, what was sent,
// acknowledged, expired. Rows are written by the incident unit of work (incidents.ts).
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
        `SELECT p.id AS pushId, e.id AS eventId, e.type, e.event_time AS eventTime, e.device_id AS deviceId, e.incident_id AS incidentId,
                e.attributes, v.incident, p.last_sent_at AS lastSentAt
         FROM pushes p JOIN events e ON e.id = p.id JOIN incident_versions v ON v.id = e.version_id
         WHERE p.device_id = ? AND p.state = 'PENDING' AND p.id > ? ORDER BY p.id LIMIT ?`,
      ),
      markSent: p(`UPDATE pushes SET attempts = attempts + 1, last_sent_at = ? WHERE id = ?`),
      ack: p(`UPDATE pushes SET state = 'DELIVERED', delivered_at = ? WHERE device_id = ? AND state = 'PENDING' AND id <= ?`),
      oldestUnacked: p(
        `SELECT id, last_sent_at AS lastSentAt FROM pushes WHERE device_id = ? AND state = 'PENDING' ORDER BY id LIMIT 1`,
      ),
      expire: p(`UPDATE pushes SET state = 'EXPIRED' WHERE state = 'PENDING' AND created_at < ?`),
      status: p(`UPDATE devices SET status = ?, last_update = COALESCE(?, last_update) WHERE id = ?`),
      resetPresence: p(`UPDATE devices SET status = 'offline' WHERE status = 'online'`),
    };
  }

  pendingAfter(deviceId: number, afterPushId: number, limit: number): PushRow[] {
    return this.st.pendingAfter.all(deviceId, afterPushId, limit) as PushRow[];
  }

  markSent(pushIds: readonly number[], at: string): void {
    this.sqlite.transaction(() => {
      for (const id of pushIds) this.st.markSent.run(at, id);
    })();
  }

  /** cumulative: every pending push <= upTo of this device becomes DELIVERED */
  ack(deviceId: number, upTo: number, at: string): number {
    return this.st.ack.run(at, deviceId, upTo).changes;
  }

  oldestUnacked(deviceId: number): { id: number; lastSentAt: string | null } | undefined {
    return this.st.oldestUnacked.get(deviceId) as { id: number; lastSentAt: string | null } | undefined;
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

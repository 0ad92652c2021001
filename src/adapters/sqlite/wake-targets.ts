// The wake target store on SQLite (ports/wake-targets.ts). WakeTargetRows is synchronous: `add`
// finds, counts and inserts in one IMMEDIATE transaction (no await inside: nothing interleaves).
// The port's calls wait for an open identity transaction (gate.ts), as the webhooks' do. (The
// incident unit of work reads the kinds of the matched devices' targets itself: incidents.ts.)
import type Database from 'better-sqlite3';
import type { SmsSent, WakeTarget } from '../../domain/wake.js';
import type { WakeTargetRecord, WakeTargetStorePort } from '../../ports/wake-targets.js';
import type { Db } from './db.js';
import type { Gate } from './gate.js';

interface Row {
  id: number;
  deviceId: number;
  target: string;
  createdAt: string;
}

const COLUMNS = `id, device_id AS deviceId, target, created_at AS createdAt`;

function recordOf(r: Row): WakeTargetRecord {
  return { ...(JSON.parse(r.target) as WakeTarget), id: r.id, deviceId: r.deviceId, createdAt: r.createdAt };
}

export class WakeTargetRows {
  private readonly sqlite: Database.Database;
  private readonly st;

  constructor(db: Db) {
    this.sqlite = db.$client;
    const p = (sql: string) => this.sqlite.prepare(sql);
    this.st = {
      list: p(`SELECT ${COLUMNS} FROM wake_targets WHERE device_id = ? ORDER BY id`),
      device: p(`SELECT 1 FROM devices WHERE id = ?`).pluck(),
      count: p(`SELECT count(*) FROM wake_targets WHERE device_id = ?`).pluck(),
      insert: p(`INSERT INTO wake_targets (device_id, kind, target, created_at, address) VALUES (?, ?, ?, ?, ?)`),
      same: p(`UPDATE wake_targets SET target = ? WHERE device_id = ? AND kind = ? AND address = ? RETURNING ${COLUMNS}`),
      remove: p(`DELETE FROM wake_targets WHERE id = ? AND device_id = ?`),
      removeDead: p(`DELETE FROM wake_targets WHERE id = ?`),
      smsSentTo: p(
        `SELECT s.device_id AS deviceId, s.incident_id AS incidentId, w.id AS targetId, s.outcome
         FROM wake_targets w JOIN wake_steps s ON s.device_id = w.device_id AND s.step = 'sms' AND s.accepted_at IS NOT NULL
         WHERE w.kind = 'sms' AND w.address = ?
         ORDER BY coalesce(s.accepted_at, s.due_at) DESC, s.id DESC LIMIT ?`,
      ),
    };
  }

  private atomically<T>(fn: () => T): T {
    if (this.sqlite.inTransaction) return fn();
    return this.sqlite.transaction(fn).immediate();
  }

  list(deviceId: number): WakeTargetRecord[] {
    return (this.st.list.all(deviceId) as Row[]).map(recordOf);
  }

  add(deviceId: number, target: WakeTarget, address: string, now: string, max: number): { record: WakeTargetRecord; created: boolean } | 'FULL' | undefined {
    return this.atomically(() => {
      if (this.st.device.get(deviceId) === undefined) return undefined;
      const same = this.st.same.get(JSON.stringify(target), deviceId, target.kind, address) as Row | undefined;
      if (same) return { record: recordOf(same), created: false };
      if ((this.st.count.get(deviceId) as number) >= max) return 'FULL' as const;
      const id = Number(this.st.insert.run(deviceId, target.kind, JSON.stringify(target), now, address).lastInsertRowid);
      return { record: { ...target, id, deviceId, createdAt: now }, created: true };
    });
  }

  remove(deviceId: number, targetId: number): boolean {
    return this.st.remove.run(targetId, deviceId).changes > 0;
  }

  removeDead(targetId: number): boolean {
    return this.st.removeDead.run(targetId).changes > 0;
  }

  smsSentTo(phone: string, limit: number): SmsSent[] {
    return this.st.smsSentTo.all(phone, limit) as SmsSent[];
  }
}

export class SqliteWakeTargets implements WakeTargetStorePort {
  constructor(
    /** the synchronous queries behind the port */
    readonly rows: WakeTargetRows,
    private readonly gate: Gate,
  ) {}

  list(deviceId: number) {
    return this.gate.pass(() => this.rows.list(deviceId));
  }
  add(deviceId: number, target: WakeTarget, address: string, now: string, max: number) {
    return this.gate.pass(() => this.rows.add(deviceId, target, address, now, max));
  }
  remove(deviceId: number, targetId: number) {
    return this.gate.pass(() => this.rows.remove(deviceId, targetId));
  }
  removeDead(targetId: number) {
    return this.gate.pass(() => this.rows.removeDead(targetId));
  }
  smsSentTo(phone: string, limit: number) {
    return this.gate.pass(() => this.rows.smsSentTo(phone, limit));
  }
}

// The wake target store on PostgreSQL (ports/wake-targets.ts), the behaviour of
// sqlite/wake-targets.ts. `add` is one transaction that locks the device's row (FOR NO KEY
// UPDATE: two registrations for one device count one after the other, on any node; the insert's
// own KEY SHARE lock on the device does not conflict with it), then updates the device's target
// of the same kind and address if it holds one, else counts, then inserts.
import type pg from 'pg';
import type { SmsSent, WakeTarget } from '../../domain/wake.js';
import type { WakeTargetRecord, WakeTargetStorePort } from '../../ports/wake-targets.js';
import type { PgDb } from './db.js';
import { inRange } from './ids.js';
import { inTransaction } from './transaction.js';

interface Row {
  id: string | number;
  deviceId: string | number;
  target: string;
  createdAt: string;
}

const COLUMNS = `id, device_id AS "deviceId", target, created_at AS "createdAt"`;

function recordOf(r: Row): WakeTargetRecord {
  return { ...(JSON.parse(r.target) as WakeTarget), id: Number(r.id), deviceId: Number(r.deviceId), createdAt: r.createdAt };
}

export class PgWakeTargets implements WakeTargetStorePort {
  private readonly pool: pg.Pool;

  constructor(db: PgDb) {
    this.pool = db.$client;
  }

  async list(deviceId: number): Promise<WakeTargetRecord[]> {
    if (!inRange(deviceId)) return [];
    const { rows } = await this.pool.query<Row>(`SELECT ${COLUMNS} FROM wake_targets WHERE device_id = $1 ORDER BY id`, [deviceId]);
    return rows.map(recordOf);
  }

  async add(deviceId: number, target: WakeTarget, address: string, now: string, max: number): Promise<{ record: WakeTargetRecord; created: boolean } | 'FULL' | undefined> {
    if (!inRange(deviceId)) return undefined;
    return inTransaction(
      this.pool,
      async (c) => {
        const device = await c.query(`SELECT 1 FROM devices WHERE id = $1 FOR NO KEY UPDATE`, [deviceId]);
        if (device.rowCount === 0) return undefined;
        const same = await c.query<Row>(`UPDATE wake_targets SET target = $1 WHERE device_id = $2 AND kind = $3 AND address = $4 RETURNING ${COLUMNS}`, [
          JSON.stringify(target),
          deviceId,
          target.kind,
          address,
        ]);
        if (same.rows[0]) return { record: recordOf(same.rows[0]), created: false };
        const { rows } = await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM wake_targets WHERE device_id = $1`, [deviceId]);
        if (rows[0]!.n >= max) return 'FULL' as const;
        const inserted = await c.query<Row>(
          `INSERT INTO wake_targets (device_id, kind, target, created_at, address) VALUES ($1, $2, $3, $4, $5) RETURNING ${COLUMNS}`,
          [deviceId, target.kind, JSON.stringify(target), now, address],
        );
        return { record: recordOf(inserted.rows[0]!), created: true };
      },
      { retries: 0, again: () => false },
    );
  }

  async remove(deviceId: number, targetId: number): Promise<boolean> {
    if (!inRange(deviceId) || !inRange(targetId)) return false;
    const r = await this.pool.query(`DELETE FROM wake_targets WHERE id = $1 AND device_id = $2`, [targetId, deviceId]);
    return (r.rowCount ?? 0) > 0;
  }

  async smsSentTo(phone: string, limit: number): Promise<SmsSent[]> {
    const { rows } = await this.pool.query<{ deviceId: string; incidentId: string; targetId: string; outcome: string | null }>(
      `SELECT s.device_id AS "deviceId", s.incident_id AS "incidentId", w.id AS "targetId", s.outcome
       FROM wake_targets w JOIN wake_steps s ON s.device_id = w.device_id AND s.step = 'sms' AND s.accepted_at IS NOT NULL
       WHERE w.kind = 'sms' AND w.address = $1
       ORDER BY coalesce(s.accepted_at, s.due_at) DESC, s.id DESC LIMIT $2`,
      [phone, limit],
    );
    return rows.map((r) => ({ deviceId: Number(r.deviceId), incidentId: Number(r.incidentId), targetId: Number(r.targetId), outcome: r.outcome }));
  }

  async removeDead(targetId: number): Promise<boolean> {
    if (!inRange(targetId)) return false;
    const r = await this.pool.query(`DELETE FROM wake_targets WHERE id = $1`, [targetId]);
    return (r.rowCount ?? 0) > 0;
  }
}

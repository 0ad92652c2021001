// The incident store contract (test/adapters/contract/incidents.ts) against PgIncidents, with a
// minimal identity and outbox written here in SQL (only what the suite's set-up calls), so that
// the incident store is tested on its own. Each test gets a fresh database (freshDatabase).
import t from 'tap';
import { openPostgres, migratePostgres, type PgDb } from '../../../src/adapters/postgres/db.js';
import { PgIncidents, notifyPayloads, isRetryable } from '../../../src/adapters/postgres/incidents.js';
import type { DeviceChanges, NewDevice, NewUser } from '../../../src/ports/identity.js';
import type { Storage } from '../../../src/ports/storage.js';
import { incidentStoreContract, type StorageFactory } from '../contract/index.js';
import { freshDatabase, pgSkip } from '../../fixtures/postgres.js';

const n = (v: unknown) => Number(v);

/** just what the incident contract's set-up calls, in plain SQL */
function minimalIdentity(db: PgDb) {
  const q = async (sql: string, values: unknown[] = []) => (await db.$client.query(sql, values)).rows as Record<string, unknown>[];
  const device = (r: Record<string, unknown>) => ({ ...r, id: n(r.id), settledUpTo: n(r.settledUpTo), pushSeq: n(r.pushSeq) });
  const deviceCols = `id, name, name_key AS "nameKey", unique_id AS "uniqueId", status, last_update AS "lastUpdate", disabled, attributes, settled_up_to AS "settledUpTo", push_seq AS "pushSeq"`;
  return {
    async insertUser(v: NewUser) {
      const [r] = await q(`INSERT INTO users (name, email, email_key, password_hash, administrator, readonly) VALUES ($1, $2, lower($2), $3, $4, $5) RETURNING id`, [
        v.name,
        v.email,
        v.passwordHash,
        v.administrator ?? false,
        v.readonly ?? false,
      ]);
      return { ...v, id: n(r!.id), administrator: v.administrator ?? false, readonly: v.readonly ?? false };
    },
    async insertDevice(v: NewDevice) {
      const [r] = await q(`INSERT INTO devices (name, name_key, unique_id, disabled) VALUES ($1, $2, $3, $4) RETURNING ${deviceCols}`, [v.name, v.nameKey, v.uniqueId, v.disabled ?? false]);
      return device(r!);
    },
    async updateDevice(id: number, v: DeviceChanges) {
      const [r] = await q(
        `UPDATE devices SET name = coalesce($2, name), name_key = coalesce($3, name_key), disabled = coalesce($4, disabled) WHERE id = $1 RETURNING ${deviceCols}`,
        [id, v.name ?? null, v.nameKey ?? null, v.disabled ?? null],
      );
      return device(r!);
    },
    async deleteDevice(id: number) {
      await q(`DELETE FROM devices WHERE id = $1`, [id]);
    },
    async linkDevice(userId: number, deviceId: number) {
      await q(`INSERT INTO user_devices (user_id, device_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, [userId, deviceId]);
    },
    async unlinkDevice(userId: number, deviceId: number) {
      await q(`DELETE FROM user_devices WHERE user_id = $1 AND device_id = $2`, [userId, deviceId]);
    },
    async linkManagedUser(userId: number, managed: number) {
      await q(`INSERT INTO user_users (user_id, managed_user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, [userId, managed]);
    },
    async unlinkManagedUser(userId: number, managed: number) {
      await q(`DELETE FROM user_users WHERE user_id = $1 AND managed_user_id = $2`, [userId, managed]);
    },
    async linkIncident(userId: number, incidentId: number) {
      await q(`INSERT INTO user_incidents (user_id, incident_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, [userId, incidentId]);
    },
    async unlinkIncident(userId: number, incidentId: number) {
      await q(`DELETE FROM user_incidents WHERE user_id = $1 AND incident_id = $2`, [userId, incidentId]);
    },
    async reachesIncident(userId: number, incidentId: number) {
      const found = await q(
        `SELECT 1 FROM user_incidents WHERE incident_id = $2 AND (user_id = $1 OR user_id IN (SELECT managed_user_id FROM user_users WHERE user_id = $1))`,
        [userId, incidentId],
      );
      return found.length > 0;
    },
  };
}

function minimalOutbox(db: PgDb) {
  const q = async (sql: string, values: unknown[] = []) => await db.$client.query(sql, values);
  return {
    async pendingAfter(deviceId: number, after: number, limit: number) {
      const { rows } = await q(
        `SELECT e.push_seq AS "pushId", e.id AS "eventId", e.type, e.event_time AS "eventTime", e.device_id AS "deviceId", e.incident_id AS "incidentId",
                e.attributes, v.incident, e.last_sent_at AS "lastSentAt"
         FROM events e JOIN incident_versions v ON v.id = e.version_id
         WHERE e.device_id = $1 AND e.push_seq > $2 AND e.state = 'PENDING' ORDER BY e.push_seq LIMIT $3`,
        [deviceId, after, limit],
      );
      return rows.map((r: Record<string, unknown>) => ({ ...r, pushId: n(r.pushId), eventId: n(r.eventId), deviceId: n(r.deviceId), incidentId: n(r.incidentId) }));
    },
    async markSent(eventIds: readonly number[], at: string) {
      await q(`UPDATE events SET attempts = attempts + 1, last_sent_at = $2 WHERE id = ANY($1::int8[])`, [eventIds, at]);
    },
    async ack(deviceId: number, upTo: number, at: string) {
      const r = await q(`UPDATE events SET state = 'DELIVERED', delivered_at = $3 WHERE device_id = $1 AND push_seq <= $2 AND state = 'PENDING'`, [deviceId, upTo, at]);
      return r.rowCount ?? 0;
    },
  };
}

const factory: StorageFactory = async (t, presence) => {
  const url = await freshDatabase(t);
  // DROP DATABASE … WITH (FORCE) may still find a backend of a pool just ended: not this test's concern
  const db = openPostgres({ url, poolMax: 10, onError: () => {} });
  t.teardown(() => db.$client.end());
  await migratePostgres(db);
  const storage = {
    incidents: new PgIncidents(db, presence),
    identity: minimalIdentity(db),
    outbox: minimalOutbox(db),
  };
  return storage as unknown as Storage;
};

t.test('the incident store contract on PostgreSQL (PgIncidents)', { skip: pgSkip }, async (t) => {
  await incidentStoreContract(t, factory);
});

t.test('when the devices written for would make a NOTIFY payload of 8000 bytes or more, then they go in several, each under it', async (t) => {
  const ids = Array.from({ length: 3000 }, (_, i) => 1_000_000 + i);
  const payloads = notifyPayloads(ids);
  t.ok(payloads.length > 1);
  t.ok(payloads.every((p) => Buffer.byteLength(p) < 8000));
  t.same(payloads.join(',').split(',').map(Number), ids, 'every id once, in order');
  t.same(notifyPayloads([3, 5]), ['3,5']);
  t.same(notifyPayloads([]), []);
});

t.test('when an error is a serialization failure, a deadlock or a unique violation of incidents_origin_id, then the unit of work is run again; not otherwise', async (t) => {
  t.ok(isRetryable({ code: '40001' }));
  t.ok(isRetryable({ code: '40P01' }));
  t.ok(isRetryable({ code: '23505', constraint: 'incidents_origin_id' }));
  t.notOk(isRetryable({ code: '23505', constraint: 'users_email_key' }));
  t.notOk(isRetryable(new Error('a bug in a decision')));
  t.notOk(isRetryable({ code: '08006' }));
});

// The wake target store on PostgreSQL (adapters/postgres/wake-targets.ts) where nodes register at
// the same time: `add` counts a device's targets only once it holds the device's row, so two
// registrations for one device, on any connection or node, count one after the other and the
// limit holds (test/api/wake-targets.test.ts runs 20 at once through the API; this shows the lock
// deterministically). And list, removeDead, and the cascade from devices.
import t, { type Test } from 'tap';
import pg from 'pg';
import { PgWakeTargets } from '../../../src/adapters/postgres/wake-targets.js';
import { openPostgres, migratePostgres } from '../../../src/adapters/postgres/db.js';
import { freshDatabase, pgSkip } from '../../fixtures/postgres.js';
import type { WakeTargetStorePort } from '../../../src/ports/wake-targets.js';
import { targetAddress, type WakeTarget } from '../../../src/domain/wake.js';

async function setUp(t: Test): Promise<{ store: PgWakeTargets; c: pg.Client; device: (name: string) => Promise<number> }> {
  const url = await freshDatabase(t);
  const db = openPostgres({ url, poolMax: 4 });
  await migratePostgres(db);
  t.teardown(() => db.$client.end());
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  t.teardown(() => c.end());
  const device = async (name: string) =>
    Number((await c.query<{ id: string }>(`INSERT INTO devices (name, name_key, unique_id) VALUES ($1, $1, $1) RETURNING id`, [name])).rows[0]!.id);
  return { store: new PgWakeTargets(db), c, device };
}

const NOW = '2026-11-29T12:00:00.000Z';
/** a target added as the service adds it: at its address, at most 10 */
const add = (store: Pick<WakeTargetStorePort, 'add'>, deviceId: number, target: WakeTarget) => store.add(deviceId, target, targetAddress(target), NOW, 10);
const sms = (n: number) => ({ kind: 'sms' as const, phone: `+4179123${4000 + n}` });

t.test('when the device row is held by another transaction, then add waits for it before it counts', { skip: pgSkip }, async (t) => {
  const { store, c, device } = await setUp(t);
  const d = await device('D1');
  for (let i = 0; i < 9; i++) t.match(await add(store, d, sms(i)), { record: { id: Number }, created: true });
  // another registration of the same device, mid-way: it holds the row, has counted 9, not yet inserted
  await c.query('BEGIN');
  await c.query('SELECT 1 FROM devices WHERE id = $1 FOR NO KEY UPDATE', [d]);
  let settled = false;
  const waiting = add(store, d, sms(9)).then((r) => ((settled = true), r));
  await new Promise((r) => setTimeout(r, 300));
  t.notOk(settled, 'the add waits for the row');
  await c.query(`INSERT INTO wake_targets (device_id, kind, target, created_at) VALUES ($1, 'sms', '{"kind":"sms","phone":"+41791239999"}', $2)`, [d, NOW]);
  await c.query('COMMIT');
  t.equal(await waiting, 'FULL', 'then counts the other one’s target: the device is full');
  t.equal((await store.list(d)).length, 10);
});

t.test('when targets are read by kind, removed as dead, or their device deleted, then the store says so', { skip: pgSkip }, async (t) => {
  const { store, c, device } = await setUp(t);
  const [a, b, none] = [await device('A'), await device('B'), await device('N')];
  const fcm = await add(store, a, { kind: 'fcm', token: 'x'.repeat(30) });
  await add(store, a, sms(1));
  await add(store, a, sms(2));
  await add(store, b, { kind: 'voice', phone: '+14155550100' });
  t.same((await store.list(a)).map((x) => x.kind), ['fcm', 'sms', 'sms'], 'in id order');
  t.same((await store.list(b)).map((x) => x.kind), ['voice']);
  t.same(await store.list(none), [], 'a device holding none');
  t.equal(await add(store, 9_999_999, sms(3)), undefined, 'no device: undefined');
  if (typeof fcm !== 'object') throw new Error('fcm not added');
  t.match(await add(store, a, sms(1)), { record: { id: Number }, created: false }, 'the same address again: the stored one');
  t.equal((await store.list(a)).length, 3, 'not a second');
  t.equal(await store.remove(b, fcm.record.id), false, 'another device’s target is not removed');
  t.equal(await store.removeDead(fcm.record.id), true);
  t.equal(await store.removeDead(fcm.record.id), false, 'once');
  await c.query('DELETE FROM devices WHERE id = $1', [a]);
  t.same(await store.list(a), [], 'the cascade took the deleted device’s targets');
  t.equal((await store.list(b)).length, 1);
});

t.test('when an SMS reply looks for the SMS sent to its number, then the steps come newest accepted first, a step still PENDING included, one whose SMS failed left out', { skip: pgSkip }, async (t) => {
  const { store, c, device } = await setUp(t);
  const d = await device('E1');
  const phone = '+41791234567';
  const added = await add(store, d, { kind: 'sms', phone });
  if (typeof added !== 'object') throw new Error('not added');
  const target = added.record.id;
  const event = (await c.query<{ id: string }>(`INSERT INTO events (type, device_id, incident_id, event_time, attributes, version_id, push_seq) VALUES ('incidentAssigned', $1, 1, $2, '{}', 1, 1) RETURNING id`, [d, NOW])).rows[0]!.id;
  const step = (incident: number, due: string, state: string, outcome: string | null, acceptedAt: string | null) =>
    c.query(`INSERT INTO wake_steps (event_id, device_id, incident_id, step, due_at, state, outcome, accepted_at, created_at) VALUES ($1, $2, $3, 'sms', $4, $5, $6, $7, $8)`, [event, d, incident, due, state, outcome, acceptedAt, NOW]);
  await step(10, '2026-11-29T12:00:00.000Z', 'DONE', `sms#${target}:accepted`, '2026-11-29T12:00:40.000Z');
  await step(20, '2026-11-29T12:00:20.000Z', 'PENDING', `sms#${target}:accepted`, '2026-11-29T12:00:21.000Z');
  await step(30, '2026-11-29T12:00:50.000Z', 'DONE', `sms#${target}:failed`, null);
  t.same((await store.smsSentTo(phone, 20)).map((x) => [x.incidentId, x.targetId]), [[10, target], [20, target]], 'by when each was accepted');
  t.same(await store.smsSentTo('+41790000000', 20), [], 'another number: none');
});

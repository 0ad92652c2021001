// The wake target store on SQLite (adapters/sqlite/wake-targets.ts): the limit counted in the
// transaction that inserts, a target registered again updated, removeDead,
// another device's target left alone, and the cascade from devices (foreign keys are on).
import t from 'tap';
import { openDatabase } from '../../../src/adapters/sqlite/db.js';
import { SqliteWakeTargets, WakeTargetRows } from '../../../src/adapters/sqlite/wake-targets.js';
import { Gate } from '../../../src/adapters/sqlite/gate.js';
import type { WakeTargetStorePort } from '../../../src/ports/wake-targets.js';
import { targetAddress, type WakeTarget } from '../../../src/domain/wake.js';

const NOW = '2026-11-29T12:00:00.000Z';
/** a target added as the service adds it: at its address, at most 10 */
const add = (store: Pick<WakeTargetStorePort, 'add'>, deviceId: number, target: WakeTarget) => store.add(deviceId, target, targetAddress(target), NOW, 10);
const sms = (n: number) => ({ kind: 'sms' as const, phone: `+4179123${4000 + n}` });

t.test('when targets are added, read by kind, removed as dead, or their device deleted, then the store says so', async (t) => {
  const db = openDatabase({ path: ':memory:', synchronous: 'OFF' });
  t.teardown(() => db.$client.close());
  const device = (name: string) => Number(db.$client.prepare(`INSERT INTO devices (name, name_key, unique_id) VALUES (?, ?, ?)`).run(name, name, name).lastInsertRowid);
  const rows = new WakeTargetRows(db);
  const store = new SqliteWakeTargets(rows, new Gate());
  const [a, b, none] = [device('A'), device('B'), device('N')];
  const added = await Promise.all(Array.from({ length: 12 }, (_, i) => add(store, a, sms(i))));
  t.equal(added.filter((r) => typeof r === 'object').length, 10, 'ten taken');
  t.same(added.slice(10), ['FULL', 'FULL'], 'then FULL');
  t.equal(await add(store, 9_999, sms(1)), undefined, 'no device: undefined');
  const added1 = await add(store, b, { kind: 'fcm', token: 'x'.repeat(30) });
  await add(store, b, { kind: 'apns', token: 'a'.repeat(64), critical: false });
  if (typeof added1 !== 'object') throw new Error('fcm not added');
  const fcm = added1.record;
  t.same(added1, { record: { kind: 'fcm', token: 'x'.repeat(30), id: fcm.id, deviceId: b, createdAt: NOW }, created: true });
  // the same token again (an app's next start), now critical: the stored one updated, not a second
  t.same(await add(store, b, { kind: 'apns', token: 'a'.repeat(64), critical: true }), {
    record: { kind: 'apns', token: 'a'.repeat(64), critical: true, id: fcm.id + 1, deviceId: b, createdAt: NOW },
    created: false,
  }, 'the same address again: updated');
  t.same((await add(store, a, sms(0))), { record: { ...sms(0), id: Number((added[0] as { record: { id: number } }).record.id), deviceId: a, createdAt: NOW }, created: false }, 'a full device still takes a target it holds again');
  t.same((await store.list(b)).map((x) => x.kind), ['fcm', 'apns'], 'in id order');
  t.same((await store.list(b))[1], { kind: 'apns', token: 'a'.repeat(64), critical: true, id: fcm.id + 1, deviceId: b, createdAt: NOW }, 'as stored');
  t.same(await store.list(none), [], 'a device holding none');
  t.equal(await store.remove(a, fcm.id), false, 'another device’s target is not removed');
  t.equal(await store.removeDead(fcm.id), true);
  t.equal(await store.removeDead(fcm.id), false, 'once');
  db.$client.prepare('DELETE FROM devices WHERE id = ?').run(a);
  t.same(await store.list(a), [], 'the cascade took the deleted device’s targets');
  t.equal((await store.list(b)).length, 1);
});

t.test('when an SMS reply looks for the SMS sent to its number, then the steps come newest accepted first, a step still PENDING included, one whose SMS failed left out', async (t) => {
  const db = openDatabase({ path: ':memory:', synchronous: 'OFF' });
  t.teardown(() => db.$client.close());
  const sqlite = db.$client;
  const device = Number(sqlite.prepare(`INSERT INTO devices (name, name_key, unique_id) VALUES ('E1', 'e1', 'e1')`).run().lastInsertRowid);
  const store = new SqliteWakeTargets(new WakeTargetRows(db), new Gate());
  const phone = '+41791234567';
  const added = await add(store, device, { kind: 'sms', phone });
  if (typeof added !== 'object') throw new Error('not added');
  const target = added.record.id;
  const event = Number(sqlite.prepare(`INSERT INTO events (type, device_id, incident_id, event_time, attributes, version_id, push_seq) VALUES ('incidentAssigned', ?, 1, ?, '{}', 1, 1)`).run(device, NOW).lastInsertRowid);
  const step = (incident: number, due: string, state: string, outcome: string | null, acceptedAt: string | null) =>
    sqlite
      .prepare(`INSERT INTO wake_steps (event_id, device_id, incident_id, step, due_at, state, outcome, accepted_at, created_at) VALUES (?, ?, ?, 'sms', ?, ?, ?, ?, ?)`)
      .run(event, device, incident, due, state, outcome, acceptedAt, NOW);
  // incident 10 was due first but delivered last (its provider asked it to wait); 20 is still PENDING (another number retrying); 30 failed
  step(10, '2026-11-29T12:00:00.000Z', 'DONE', `sms#${target}:accepted`, '2026-11-29T12:00:40.000Z');
  step(20, '2026-11-29T12:00:20.000Z', 'PENDING', `sms#${target}:accepted`, '2026-11-29T12:00:21.000Z');
  step(30, '2026-11-29T12:00:50.000Z', 'DONE', `sms#${target}:failed`, null);
  t.same((await store.smsSentTo(phone, 20)).map((x) => [x.incidentId, x.targetId]), [[10, target], [20, target]], 'by when each was accepted');
  t.same(await store.smsSentTo('+41790000000', 20), [], 'another number: none');
});

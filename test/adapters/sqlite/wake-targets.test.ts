// The wake target store on SQLite (adapters/sqlite/wake-targets.ts): the limit counted in the
// transaction that inserts, kindsOf (synchronous, for the incident unit of work), removeDead,
// another device's target left alone, and the cascade from devices (foreign keys are on).
import t from 'tap';
import { openDatabase } from '../../../src/adapters/sqlite/db.js';
import { SqliteWakeTargets, WakeTargetRows } from '../../../src/adapters/sqlite/wake-targets.js';
import { Gate } from '../../../src/adapters/sqlite/gate.js';

const NOW = '2026-11-29T12:00:00.000Z';
const sms = (n: number) => ({ kind: 'sms' as const, phone: `+4179123${4000 + n}` });

t.test('when targets are added, read by kind, removed as dead, or their device deleted, then the store says so', async (t) => {
  const db = openDatabase({ path: ':memory:', synchronous: 'OFF' });
  t.teardown(() => db.$client.close());
  const device = (name: string) => Number(db.$client.prepare(`INSERT INTO devices (name, name_key, unique_id) VALUES (?, ?, ?)`).run(name, name, name).lastInsertRowid);
  const rows = new WakeTargetRows(db);
  const store = new SqliteWakeTargets(rows, new Gate());
  const [a, b, none] = [device('A'), device('B'), device('N')];
  const added = await Promise.all(Array.from({ length: 12 }, (_, i) => store.add(a, sms(i), NOW, 10)));
  t.equal(added.filter((r) => typeof r === 'object').length, 10, 'ten taken');
  t.same(added.slice(10), ['FULL', 'FULL'], 'then FULL');
  t.equal(await store.add(9_999, sms(1), NOW, 10), undefined, 'no device: undefined');
  const fcm = await store.add(b, { kind: 'fcm', token: 'x'.repeat(30) }, NOW, 10);
  await store.add(b, { kind: 'apns', token: 'a'.repeat(64), critical: true }, NOW, 10);
  if (typeof fcm !== 'object') throw new Error('fcm not added');
  t.same(fcm, { kind: 'fcm', token: 'x'.repeat(30), id: fcm.id, deviceId: b, createdAt: NOW });
  t.same((await store.list(b)).map((x) => x.kind), ['fcm', 'apns'], 'in id order');
  t.same((await store.list(b))[1], { kind: 'apns', token: 'a'.repeat(64), critical: true, id: fcm.id + 1, deviceId: b, createdAt: NOW }, 'as stored');
  const kinds = rows.kindsOf([a, b, none]);
  t.same([...kinds.keys()].sort(), [a, b].sort(), 'a device holding none is absent');
  t.same([...kinds.get(a)!], ['sms']);
  t.same([...kinds.get(b)!].sort(), ['apns', 'fcm']);
  t.equal(await store.remove(a, fcm.id), false, 'another device’s target is not removed');
  t.equal(await store.removeDead(fcm.id), true);
  t.equal(await store.removeDead(fcm.id), false, 'once');
  db.$client.prepare('DELETE FROM devices WHERE id = ?').run(a);
  t.same(await store.list(a), [], 'the cascade took the deleted device’s targets');
  t.equal((await store.list(b)).length, 1);
});

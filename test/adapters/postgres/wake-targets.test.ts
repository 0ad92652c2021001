// The wake target store on PostgreSQL (adapters/postgres/wake-targets.ts) where nodes register at
// the same time: `add` counts a device's targets only once it holds the device's row, so two
// registrations for one device, on any connection or node, count one after the other and the
// limit holds (test/api/wake-targets.test.ts runs 20 at once through the API; this shows the lock
// deterministically). And kindsOf, removeDead, and the cascade from devices.
import t, { type Test } from 'tap';
import pg from 'pg';
import { PgWakeTargets } from '../../../src/adapters/postgres/wake-targets.js';
import { openPostgres, migratePostgres } from '../../../src/adapters/postgres/db.js';
import { freshDatabase, pgSkip } from '../../fixtures/postgres.js';

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
const sms = (n: number) => ({ kind: 'sms' as const, phone: `+4179123${4000 + n}` });

t.test('when the device row is held by another transaction, then add waits for it before it counts', { skip: pgSkip }, async (t) => {
  const { store, c, device } = await setUp(t);
  const d = await device('D1');
  for (let i = 0; i < 9; i++) t.match(await store.add(d, sms(i), NOW, 10), { id: Number });
  // another registration of the same device, mid-way: it holds the row, has counted 9, not yet inserted
  await c.query('BEGIN');
  await c.query('SELECT 1 FROM devices WHERE id = $1 FOR NO KEY UPDATE', [d]);
  let settled = false;
  const waiting = store.add(d, sms(9), NOW, 10).then((r) => ((settled = true), r));
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
  const fcm = await store.add(a, { kind: 'fcm', token: 'x'.repeat(30) }, NOW, 10);
  await store.add(a, sms(1), NOW, 10);
  await store.add(a, sms(2), NOW, 10);
  await store.add(b, { kind: 'voice', phone: '+14155550100' }, NOW, 10);
  const kinds = await store.kindsOf([a, b, none, 9_999_999]);
  t.same([...kinds.keys()].sort(), [a, b].sort(), 'a device holding none is absent');
  t.same([...kinds.get(a)!].sort(), ['fcm', 'sms']);
  t.same([...kinds.get(b)!], ['voice']);
  t.same(await store.kindsOf([]), new Map());
  t.equal(await store.add(9_999_999, sms(3), NOW, 10), undefined, 'no device: undefined');
  if (typeof fcm !== 'object') throw new Error('fcm not added');
  t.equal(await store.remove(b, fcm.id), false, 'another device’s target is not removed');
  t.equal(await store.removeDead(fcm.id), true);
  t.equal(await store.removeDead(fcm.id), false, 'once');
  await c.query('DELETE FROM devices WHERE id = $1', [a]);
  t.same(await store.list(a), [], 'the cascade took the deleted device’s targets');
  t.equal((await store.list(b)).length, 1);
});

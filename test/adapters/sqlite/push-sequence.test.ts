// A pushId is the device's own sequence (DESIGN section 5): the incident unit of work numbers
// each device's pushes 1, 2, 3… in the transaction that writes them, so a cumulative ack of
// one device's pushId N settles exactly that device's first N pushes, whatever other devices'
// events were written in between.
import t, { type Test } from 'tap';
import { openDatabase } from '../../../src/adapters/sqlite/db.js';
import { IdentityRows, type UserRecord } from '../../../src/adapters/sqlite/identity-rows.js';
import { IncidentRows } from '../../fixtures/incident-store.js';
import { OutboxRows } from '../../../src/adapters/sqlite/outbox.js';

const NOW = '2026-11-25T08:00:00.000Z';

function world(t: Test) {
  const db = openDatabase({ path: ':memory:', synchronous: 'OFF' });
  t.teardown(() => db.$client.close());
  const identity = new IdentityRows(db);
  const incidents = new IncidentRows(db, { online: new Set<number>() });
  const pushes = new OutboxRows(db);
  const cad: UserRecord = identity.insertUser({ name: 'CAD', email: 'cad@example.test', passwordHash: 'x', createIncidents: true });
  let devices = 0;
  const device = (name: string) => {
    devices++;
    const d = identity.insertDevice({ name, nameKey: name.toLowerCase(), uniqueId: `dev-${devices}` });
    identity.linkDevice(cad.id, d.id);
    return d.id;
  };
  let made = 0;
  const create = (resources: string[]) => {
    made++;
    const outcome = incidents.create(cad, { originId: `CAD-${made}`, type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 2, resources }, NOW);
    if (!outcome.ok) throw new Error(`create refused: ${JSON.stringify(outcome.refusal)}`);
    return outcome.incident.id;
  };
  /** the device's pending pushes as a new socket reads them: [pushId, event id] */
  const pending = (deviceId: number) => pushes.pendingAfter(deviceId, 0, 100).map((r) => [r.pushId, r.eventId]);
  const states = (deviceId: number) => db.$client.prepare(`SELECT state FROM events WHERE device_id = ? ORDER BY id`).pluck().all(deviceId);
  return { sqlite: db.$client, incidents, pushes, cad, device, create, pending, states };
}

t.test('when two devices share incidents, then each gets pushIds 1, 2, 3… without gaps while their event ids interleave', async (t) => {
  const w = world(t);
  const a = w.device('E1');
  const b = w.device('E2');
  w.create(['E1', 'E2']);
  w.create(['E2']);
  w.create(['E1', 'E2']);
  w.create(['E1']);
  const pa = w.pending(a);
  const pb = w.pending(b);
  t.same(pa.map(([p]) => p), [1, 2, 3], "A's pushIds");
  t.same(pb.map(([p]) => p), [1, 2, 3], "B's pushIds");
  t.same(pa.map(([, e]) => e), [1, 4, 6], "A's events are the 1st, 4th and 6th written");
  t.same(pb.map(([, e]) => e), [2, 3, 5], "B's the others");
  t.same(
    w.sqlite.prepare(`SELECT id, push_seq FROM devices ORDER BY id`).all(),
    [
      { id: a, push_seq: 3 },
      { id: b, push_seq: 3 },
    ],
    "each device's sequence is at its last pushId",
  );
});

t.test("when a device acks its pushId N, then exactly its own first N pushes are delivered and the other device's stay pending", async (t) => {
  const w = world(t);
  const a = w.device('E1');
  const b = w.device('E2');
  for (let i = 0; i < 3; i++) w.create(['E2', 'E1']);
  t.equal(w.pushes.ack(a, 2, NOW), 2, "A's pushes 1 and 2 are delivered");
  t.same(w.states(a), ['DELIVERED', 'DELIVERED', 'PENDING']);
  t.same(w.states(b), ['PENDING', 'PENDING', 'PENDING'], "B's pushes, some with lower event ids, are untouched");
  t.same(w.pending(a).map(([p]) => p), [3], 'a new socket of A gets only push 3');
  t.same(w.pending(b).map(([p]) => p), [1, 2, 3], 'B gets all of its own');
  t.equal(w.pushes.ack(a, 99, NOW), 1, 'an ack past the last pushId delivers what there is');
  w.create(['E1']);
  t.same(w.pending(a).map(([p]) => p), [4], 'and hides nothing written later');
});

t.test('when a write is rolled back, then the pushIds it took are given again and the sequence stays gapless', async (t) => {
  const w = world(t);
  const a = w.device('E1');
  w.create(['E1']);
  t.throws(
    () =>
      w.sqlite.transaction(() => {
        w.create(['E1']);
        throw new Error('rolled back');
      })(),
    /rolled back/,
  );
  w.create(['E1']);
  t.same(w.pending(a).map(([p]) => p), [1, 2], 'the push after the rollback is 2');
});

t.test('when an incident stands a device down, then the stand-down takes the next pushId of that device', async (t) => {
  const w = world(t);
  const a = w.device('E1');
  const b = w.device('E2');
  const id = w.create(['E1', 'E2']);
  w.pushes.markSent(w.pushes.pendingAfter(b, 0, 10).map((r) => r.eventId), NOW); // sent: the stand-down follows it
  const outcome = w.incidents.update(w.cad, { id }, { originId: 'CAD-1', type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 2, resources: ['E1'] }, NOW);
  t.ok(outcome.ok);
  t.same(w.pending(b).map(([p]) => p), [1, 2], "B's assignment and its stand-down");
  t.same(w.pending(a).map(([p]) => p), [1], "A's sequence is its own");
});

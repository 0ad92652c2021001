// Delivery reads a device's events from its acked_up_to on (acks are cumulative). These check
// the watermark: it only rises, never past the last event written, and what is at or below it
// is never offered again.
import t, { type Test } from 'tap';
import { openDatabase } from '../../../src/store/db.js';
import { PushStore } from '../../../src/store/pushes.js';

function world(t: Test) {
  const db = openDatabase({ path: ':memory:', synchronous: 'OFF' });
  t.teardown(() => db.$client.close());
  const sqlite = db.$client;
  const device = (name: string) => Number(sqlite.prepare(`INSERT INTO devices (name, name_key, unique_id) VALUES (?, ?, ?)`).run(name, name.toLowerCase(), `u-${name}`).lastInsertRowid);
  const version = Number(sqlite.prepare(`INSERT INTO incident_versions (incident_id, incident) VALUES (1, '{"id":1}')`).run().lastInsertRowid);
  const event = (deviceId: number, state = 'PENDING') =>
    Number(
      sqlite
        .prepare(`INSERT INTO events (type, device_id, incident_id, event_time, attributes, version_id, state) VALUES ('incidentAssigned', ?, 1, '2026-01-01T00:00:00.000Z', '{}', ?, ?)`)
        .run(deviceId, version, state).lastInsertRowid,
    );
  const acked = (deviceId: number) => sqlite.prepare('SELECT acked_up_to FROM devices WHERE id = ?').pluck().get(deviceId);
  const states = () => sqlite.prepare('SELECT state FROM events ORDER BY id').pluck().all();
  return { pushes: new PushStore(db), device, event, acked, states };
}

t.test('when a device acks, then its pushes up to that id are delivered and delivery starts after them', async (t) => {
  const w = world(t);
  const a = w.device('A');
  const b = w.device('B');
  const [a1, b1, a2, a3] = [w.event(a), w.event(b), w.event(a), w.event(a)];
  t.equal(w.pushes.ack(a, a2!, 'T'), 2, 'two pushes of A delivered');
  t.same(w.states(), ['DELIVERED', 'PENDING', 'DELIVERED', 'PENDING'], "B's push is untouched");
  t.equal(w.acked(a), a2);
  t.same(w.pushes.pendingAfter(a, 0, 10).map((r) => r.pushId), [a3], 'from a new socket (cursor 0), only what follows the ack');
  t.same(w.pushes.pendingAfter(b, 0, 10).map((r) => r.pushId), [b1]);
  t.equal(w.pushes.ack(a, a1!, 'T'), 0, 'an older ack changes nothing');
  t.equal(w.acked(a), a2, 'and does not lower the watermark');
});

t.test('when a device acks an id not yet written, then later pushes are still sent', async (t) => {
  const w = world(t);
  const a = w.device('A');
  const a1 = w.event(a);
  t.equal(w.pushes.ack(a, 1_000_000, 'T'), 1);
  t.equal(w.acked(a), a1, 'the watermark stops at the last event written');
  const a2 = w.event(a);
  t.same(w.pushes.pendingAfter(a, 0, 10).map((r) => r.pushId), [a2], 'a push written after the ack is offered');
});

t.test('when pushes were superseded or expired, then delivery and the ack-timeout lookup skip them', async (t) => {
  const w = world(t);
  const a = w.device('A');
  w.event(a, 'SUPERSEDED');
  w.event(a, 'EXPIRED');
  const p = w.event(a);
  t.same(w.pushes.pendingAfter(a, 0, 10).map((r) => r.pushId), [p]);
  t.equal(w.pushes.oldestUnacked(a, p - 1), undefined, 'nothing pending among what was sent before it');
  w.pushes.markSent([p], '2026-01-01T00:00:05.000Z');
  t.same(w.pushes.oldestUnacked(a, p), { id: p, lastSentAt: '2026-01-01T00:00:05.000Z' });
  w.pushes.ack(a, p, 'T');
  t.equal(w.pushes.oldestUnacked(a, p), undefined, 'acked: nothing to resend');
});

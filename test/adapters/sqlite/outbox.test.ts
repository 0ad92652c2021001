// Delivery reads a device's events from its settled_up_to on: no push of the device at or below
// it is pending. These check that floor: acks and reads raise it, it never passes the last event
// written, and at every step what delivery offers is exactly what is pending.
import t, { type Test } from 'tap';
import type Database from 'better-sqlite3';
import fc from 'fast-check';
import { openDatabase } from '../../../src/adapters/sqlite/db.js';
import { COUNT_SLICE, OutboxRows } from '../../../src/adapters/sqlite/outbox.js';

/**
 * An event as the incident unit of work writes it (incidents.ts): the device's next pushId,
 * taken in the same transaction. Its event id and pushId.
 */
function writeEvent(sqlite: Database.Database, deviceId: number, state = 'PENDING', time = '2026-01-01T00:00:00.000Z', version = 1): { id: number; pushId: number } {
  return sqlite.transaction(() => {
    const pushId = sqlite.prepare(`UPDATE devices SET push_seq = push_seq + 1 WHERE id = ? RETURNING push_seq`).pluck().get(deviceId) as number;
    const id = Number(
      sqlite
        .prepare(`INSERT INTO events (type, device_id, incident_id, event_time, attributes, version_id, state, push_seq) VALUES ('incidentAssigned', ?, 1, ?, '{}', ?, ?, ?)`)
        .run(deviceId, time, version, state, pushId).lastInsertRowid,
    );
    return { id, pushId };
  })();
}

function world(t: Test, durable?: () => number) {
  const db = openDatabase({ path: ':memory:', synchronous: 'OFF' });
  t.teardown(() => db.$client.close());
  const sqlite = db.$client;
  const device = (name: string) => Number(sqlite.prepare(`INSERT INTO devices (name, name_key, unique_id) VALUES (?, ?, ?)`).run(name, name.toLowerCase(), `u-${name}`).lastInsertRowid);
  const version = Number(sqlite.prepare(`INSERT INTO incident_versions (incident_id, incident) VALUES (1, '{"id":1}')`).run().lastInsertRowid);
  /** a push of the device: its pushId */
  const event = (deviceId: number, state = 'PENDING') => writeEvent(sqlite, deviceId, state, '2026-01-01T00:00:00.000Z', version).pushId;
  /** the event id of a device's push */
  const eventId = (deviceId: number, pushId: number) => sqlite.prepare('SELECT id FROM events WHERE device_id = ? AND push_seq = ?').pluck().get(deviceId, pushId) as number;
  const settled = (deviceId: number) => sqlite.prepare('SELECT settled_up_to FROM devices WHERE id = ?').pluck().get(deviceId) as number;
  const states = () => sqlite.prepare('SELECT state FROM events ORDER BY id').pluck().all();
  return { pushes: new OutboxRows(db, durable), sqlite, device, event, eventId, settled, states };
}

t.test('when a device acks, then its pushes up to that id are delivered and delivery starts after them', async (t) => {
  const w = world(t);
  const a = w.device('A');
  const b = w.device('B');
  const [a1, b1, a2, a3] = [w.event(a), w.event(b), w.event(a), w.event(a)];
  t.equal(w.pushes.ack(a, a2!, 'T'), 2, 'two pushes of A delivered');
  t.same(w.states(), ['DELIVERED', 'PENDING', 'DELIVERED', 'PENDING'], "B's push is untouched");
  t.equal(w.settled(a), a2);
  t.same(w.pushes.pendingAfter(a, 0, 10).map((r) => r.pushId), [a3], 'from a new socket (cursor 0), only what follows the ack');
  t.same(w.pushes.pendingAfter(b, 0, 10).map((r) => r.pushId), [b1]);
  t.equal(w.pushes.ack(a, a1!, 'T'), 0, 'an older ack changes nothing');
  t.equal(w.settled(a), a2, 'and does not lower the floor');
});

t.test('when a device acks an id not yet written, then later pushes are still sent', async (t) => {
  const w = world(t);
  const a = w.device('A');
  const a1 = w.event(a);
  t.equal(w.pushes.ack(a, 1_000_000, 'T'), 1);
  t.equal(w.settled(a), a1, 'the floor stops at the last event written');
  const a2 = w.event(a);
  t.same(w.pushes.pendingAfter(a, 0, 10).map((r) => r.pushId), [a2], 'a push written after the ack is offered');
});

t.test('when pushes are committed but not yet on disk, then they are neither read nor settled until they are', async (t) => {
  let horizon = Infinity;
  const w = world(t, () => horizon);
  const a = w.device('A');
  const a1 = w.event(a);
  horizon = w.eventId(a, a1); // the next writes wait for their fdatasync (the horizon is an event id)
  const a2 = w.event(a);
  const a3 = w.event(a);
  t.same(w.pushes.pendingAfter(a, 0, 10).map((r) => r.pushId), [a1], 'a new socket gets only what the disk has');
  t.same(w.pushes.pendingAfter(a, a1, 10), [], 'and so does a connected one');
  t.equal(w.settled(a), 0, 'a first read that finds the first push pending raises no floor');
  t.equal(w.pushes.ack(a, a3, 'T'), 1, 'an ack reaching past the disk delivers only what the disk has');
  t.equal(w.settled(a), a1, 'and the floor stops there');
  t.same(w.pushes.pendingAfter(a, 0, 10), [], 'an empty read from a new socket raises the floor no further than the disk');
  t.equal(w.settled(a), a1);
  horizon = Infinity; // the sync has completed
  t.same(w.pushes.pendingAfter(a, a1, 10).map((r) => r.pushId), [a2, a3], 'then both are sent, nothing skipped');
});

t.test('when pushes were superseded or expired, then delivery and the ack-timeout lookup skip them', async (t) => {
  const w = world(t);
  const a = w.device('A');
  w.event(a, 'SUPERSEDED');
  w.event(a, 'EXPIRED');
  const p = w.event(a);
  t.same(w.pushes.pendingAfter(a, 0, 10).map((r) => r.pushId), [p]);
  t.equal(w.pushes.oldestUnacked(a, p - 1), undefined, 'nothing pending among what was sent before it');
  w.pushes.markSent([w.eventId(a, p)], '2026-01-01T00:00:05.000Z');
  t.same(w.pushes.oldestUnacked(a, p), { id: p, lastSentAt: '2026-01-01T00:00:05.000Z' });
  w.pushes.ack(a, p, 'T');
  t.equal(w.pushes.oldestUnacked(a, p), undefined, 'acked: nothing to resend');
});

t.test('when pushes were stepped over once, then the floor is past them and later reads start there', async (t) => {
  const w = world(t);
  const a = w.device('A');
  const b = w.device('B');
  w.event(a, 'EXPIRED');
  w.event(b);
  const superseded = w.event(a, 'SUPERSEDED');
  t.same(w.pushes.pendingAfter(a, 0, 10), [], 'nothing pending for A');
  t.ok(w.settled(a) >= superseded, 'the read raised the floor past what it stepped over');
  const p = w.event(a);
  t.same(w.pushes.pendingAfter(a, 0, 10).map((r) => r.pushId), [p]);
  t.equal(w.settled(a), p - 1, 'up to just below the first pending push');
  t.equal(w.settled(b), 0, "another device's floor is its own");
  w.pushes.markSent([w.eventId(a, p)], 'T');
  w.sqlite.prepare(`UPDATE events SET state = 'EXPIRED' WHERE device_id = ? AND push_seq = ?`).run(a, p);
  t.equal(w.pushes.oldestUnacked(a, p), undefined, 'sent, then expired: nothing to resend');
  t.equal(w.settled(a), p, 'and the ack-timeout lookup raised the floor to what was sent');
});

t.test('when a connected device acks and gets its next push, then delivery writes nothing more', async (t) => {
  const w = world(t);
  const a = w.device('A');
  const b = w.device('B');
  const p = w.event(a);
  w.pushes.ack(a, p, 'T');
  w.event(b); // another device's push: a gap in the event ids, none in A's pushIds
  const q = w.event(a);
  t.equal(q, p + 1);
  t.same(w.pushes.pendingAfter(a, p, 10).map((r) => r.pushId), [q], "a read from the socket's cursor");
  t.equal(w.settled(a), p, 'leaves the floor where the ack put it (no write per push delivered)');
  t.equal(w.pushes.oldestUnacked(a, p), undefined, 'nothing sent is unacked');
  t.equal(w.settled(a), p, 'and the ack-timeout lookup writes nothing either');
});

// a model of delivery: random writes, acks, reads and expiries on two devices; after every
// step, delivery offers exactly the pending pushes, and none is at or below its floor
t.test('when writes, acks, reads and expiries interleave at random, then delivery offers exactly what is pending', async (t) => {
  const step = fc.oneof(
    fc.record({ op: fc.constant('write' as const), dev: fc.integer({ min: 0, max: 1 }), state: fc.constantFrom('PENDING', 'PENDING', 'PENDING', 'SUPERSEDED', 'EXPIRED') }),
    fc.record({ op: fc.constant('ack' as const), dev: fc.integer({ min: 0, max: 1 }), back: fc.integer({ min: -3, max: 8 }) }),
    fc.record({ op: fc.constant('read' as const), dev: fc.integer({ min: 0, max: 1 }), back: fc.integer({ min: 0, max: 8 }) }),
    fc.record({ op: fc.constant('sweep' as const), dev: fc.integer({ min: 0, max: 1 }), back: fc.integer({ min: 0, max: 8 }) }),
    fc.record({ op: fc.constant('expire' as const), back: fc.integer({ min: 0, max: 8 }) }),
  );
  let runs = 0;
  fc.assert(
    fc.property(fc.array(step, { maxLength: 40 }), (steps) => {
      runs++;
      const db = openDatabase({ path: ':memory:', synchronous: 'OFF' });
      try {
        const sqlite = db.$client;
        const pushes = new OutboxRows(db);
        const ids = ['A', 'B'].map((n) => Number(sqlite.prepare(`INSERT INTO devices (name, name_key, unique_id) VALUES (?, ?, ?)`).run(n, n.toLowerCase(), `u-${n}`).lastInsertRowid));
        const version = Number(sqlite.prepare(`INSERT INTO incident_versions (incident_id, incident) VALUES (1, '{}')`).run().lastInsertRowid);
        // pushIds are per device: the device's last one, and its pending ones in order
        const last = (d: number) => sqlite.prepare('SELECT coalesce(max(push_seq), 0) FROM events WHERE device_id = ?').pluck().get(d) as number;
        const lastEvent = () => sqlite.prepare('SELECT coalesce(max(id), 0) FROM events').pluck().get() as number;
        const pending = (d: number) => sqlite.prepare(`SELECT push_seq FROM events WHERE device_id = ? AND state = 'PENDING' ORDER BY push_seq`).pluck().all(d) as number[];
        for (const s of steps) {
          const at = (d: number, back: number) => Math.max(0, last(d) - back);
          if (s.op === 'write') {
            writeEvent(sqlite, ids[s.dev]!, s.state, 'T', version);
          } else if (s.op === 'ack') {
            const upTo = last(ids[s.dev]!) - s.back;
            const before = pending(ids[1 - s.dev]!);
            pushes.ack(ids[s.dev]!, upTo, 'T');
            if (pending(ids[s.dev]!).some((id) => id <= upTo)) throw new Error(`a pending push at or below ack ${upTo} is left`);
            if (JSON.stringify(pending(ids[1 - s.dev]!)) !== JSON.stringify(before)) throw new Error("an ack touched another device's pushes");
          } else if (s.op === 'read') {
            const after = at(ids[s.dev]!, s.back);
            const got = pushes.pendingAfter(ids[s.dev]!, after, 1000).map((r) => r.pushId);
            const want = pending(ids[s.dev]!).filter((id) => id > after);
            if (JSON.stringify(got) !== JSON.stringify(want)) throw new Error(`read after ${after}: ${JSON.stringify(got)}, pending ${JSON.stringify(want)}`);
          } else if (s.op === 'sweep') {
            const sentUpTo = at(ids[s.dev]!, s.back);
            const got = pushes.oldestUnacked(ids[s.dev]!, sentUpTo)?.id;
            const want = pending(ids[s.dev]!).find((id) => id <= sentUpTo);
            if (got !== want) throw new Error(`oldest unacked up to ${sentUpTo}: ${got}, want ${want}`);
          } else {
            sqlite.prepare(`UPDATE events SET state = 'EXPIRED' WHERE state = 'PENDING' AND id <= ?`).run(Math.max(0, lastEvent() - s.back));
          }
          for (const d of ids) {
            const floor = sqlite.prepare('SELECT settled_up_to FROM devices WHERE id = ?').pluck().get(d) as number;
            if (pending(d).some((id) => id <= floor)) throw new Error(`device ${d}: a pending push at or below its floor ${floor}`);
            if (floor > last(d)) throw new Error(`device ${d}: floor ${floor} past its last push ${last(d)}`);
          }
        }
        for (const d of ids) {
          const got = pushes.pendingAfter(d, 0, 1000).map((r) => r.pushId);
          if (JSON.stringify(got) !== JSON.stringify(pending(d))) throw new Error(`from a new socket: ${JSON.stringify(got)} vs ${JSON.stringify(pending(d))}`);
        }
      } finally {
        db.$client.close();
      }
    }),
    { seed: 20261123, numRuns: 300 },
  );
  t.equal(runs, 300, '300 random sequences hold');
});

// The TTL sweep walks events by id from push_expiry's floor and stops at the first PENDING
// event younger than the cutoff (events are written in time order).
function timedWorld(t: Test) {
  const w = world(t);
  const a = w.device('A');
  /** an event written at that hour: its event id (the sweep walks event ids) */
  const at = (hour: number, state = 'PENDING') => writeEvent(w.sqlite, a, state, `2026-01-01T${String(hour).padStart(2, '0')}:00:00.000Z`).id;
  const cutoff = (hour: number, minute = 0) => `2026-01-01T${String(hour).padStart(2, '0')}:${String(minute).padStart(2, '0')}:00.000Z`;
  return { ...w, at, cutoff };
}

t.test('when the TTL sweep runs, then pending pushes older than the cutoff expire, the others stay, and the floor stops before the first younger pending one', async (t) => {
  const w = timedWorld(t);
  const [e1, , , e4] = [w.at(1), w.at(2, 'DELIVERED'), w.at(3), w.at(4), w.at(5)];
  t.same(w.pushes.expireStep(w.cutoff(3, 30)), { expired: 2, more: false });
  t.same(w.states(), ['EXPIRED', 'DELIVERED', 'EXPIRED', 'PENDING', 'PENDING'], 'the 01:00 and 03:00 pushes expire; delivered and younger ones stay');
  t.equal(w.pushes.expiryFloor(), e4! - 1, 'the floor stops just before the 04:00 push, still pending');
  t.same(w.pushes.expireStep(w.cutoff(3, 30)), { expired: 0, more: false }, 'the same cutoff again expires nothing');
  t.same(w.pushes.expireStep(w.cutoff(4, 30)), { expired: 1, more: false }, 'a later one expires the 04:00 push');
  t.equal(w.pushes.expiryFloor(), e4);
  t.ok(e1! > 0);
});

t.test('when the sweep has more ids to walk than one step, then each step covers at most that many and says so, and the floor outlives the store', async (t) => {
  const w = timedWorld(t);
  const first = w.at(1);
  for (let i = 0; i < 9; i++) w.at(1);
  t.same(w.pushes.expireStep(w.cutoff(2), 4), { expired: 4, more: true }, 'the first four ids');
  t.equal(w.pushes.expiryFloor(), first + 3);
  t.same(w.pushes.expireStep(w.cutoff(2), 4), { expired: 4, more: true }, 'the next four');
  t.same(w.pushes.expireStep(w.cutoff(2), 4), { expired: 2, more: false }, 'the last two: nothing more to walk');
  t.same(w.pushes.expireStep(w.cutoff(2), 4), { expired: 0, more: false }, 'at the last event, a step does nothing');
  t.equal(w.sqlite.prepare(`SELECT count(*) FROM events WHERE state = 'PENDING'`).pluck().get(), 0);
  const again = new OutboxRows({ $client: w.sqlite } as unknown as ConstructorParameters<typeof OutboxRows>[0]);
  t.equal(again.expiryFloor(), first + 9, 'a store opened later (a restart) starts where the sweep stopped');
  const later = w.at(3);
  t.same(again.expireStep(w.cutoff(4)), { expired: 1, more: false }, 'and walks on from there');
  t.equal(again.expiryFloor(), later);
});

t.test('when the clock stepped back between two pushes, then neither expires before its time', async (t) => {
  const w = timedWorld(t);
  const [ten, eight] = [w.at(10), w.at(8)];
  t.same(w.pushes.expireStep(w.cutoff(9)), { expired: 0, more: false }, 'the 10:00 push is younger than 09:00: the sweep stops before it');
  t.same(w.states(), ['PENDING', 'PENDING'], 'the 08:00 push after it waits for the floor (expiry delayed, never early)');
  t.equal(w.pushes.expiryFloor(), ten - 1);
  t.same(w.pushes.expireStep(w.cutoff(10, 30)), { expired: 2, more: false }, 'once the 10:00 push is past the cutoff, both expire');
  t.equal(w.pushes.expiryFloor(), eight);
});

// a model: pushes written in time order in random states, delivered at random, swept with
// rising cutoffs in random step sizes; after each sweep has walked all it can, exactly the
// pushes pending since before the cutoff are expired, and none other was
t.test('when writes, deliveries and sweeps interleave at random, then each full sweep expires exactly the pending pushes older than its cutoff', async (t) => {
  const op = fc.oneof(
    fc.record({ op: fc.constant('write' as const), gap: fc.integer({ min: 0, max: 3 }), state: fc.constantFrom('PENDING', 'PENDING', 'DELIVERED', 'SUPERSEDED') }),
    fc.record({ op: fc.constant('deliver' as const), back: fc.integer({ min: 0, max: 10 }) }),
    fc.record({ op: fc.constant('sweep' as const), age: fc.integer({ min: 0, max: 12 }), step: fc.integer({ min: 1, max: 6 }) }),
  );
  let runs = 0;
  fc.assert(
    fc.property(fc.array(op, { maxLength: 50 }), (ops) => {
      runs++;
      const db = openDatabase({ path: ':memory:', synchronous: 'OFF' });
      try {
        const sqlite = db.$client;
        const pushes = new OutboxRows(db);
        const device = Number(sqlite.prepare(`INSERT INTO devices (name, name_key, unique_id) VALUES ('A', 'a', 'u-a')`).run().lastInsertRowid);
        const time = (minute: number) => new Date(Date.UTC(2026, 0, 1, 0, minute)).toISOString();
        let now = 0; // minutes
        let lastCutoff = -1;
        const model = new Map<number, { minute: number; state: string }>();
        for (const s of ops) {
          if (s.op === 'write') {
            now += s.gap;
            const { id } = writeEvent(sqlite, device, s.state, time(now));
            model.set(id, { minute: now, state: s.state });
          } else if (s.op === 'deliver') {
            const id = model.size - s.back;
            const e = model.get(id);
            if (e?.state === 'PENDING') {
              sqlite.prepare(`UPDATE events SET state = 'DELIVERED' WHERE id = ?`).run(id);
              e.state = 'DELIVERED';
            }
          } else {
            const cutoff = Math.max(lastCutoff, now - s.age); // the clock does not go back here
            lastCutoff = cutoff;
            let steps = 0;
            while (pushes.expireStep(time(cutoff), s.step).more) if (++steps > 1000) throw new Error('the sweep does not end');
            for (const e of model.values()) if (e.state === 'PENDING' && e.minute < cutoff) e.state = 'EXPIRED';
          }
          const stored = sqlite.prepare('SELECT id, state FROM events ORDER BY id').all() as { id: number; state: string }[];
          for (const r of stored) {
            if (model.get(r.id)!.state !== r.state) throw new Error(`event ${r.id}: ${r.state}, the model says ${model.get(r.id)!.state}`);
          }
          const floor = pushes.expiryFloor();
          if (stored.some((r) => r.id <= floor && r.state === 'PENDING' && model.get(r.id)!.minute < lastCutoff)) throw new Error(`a push past the cutoff is pending at or below the floor ${floor}`);
        }
      } finally {
        db.$client.close();
      }
    }),
    { seed: 20261124, numRuns: 300 },
  );
  t.equal(runs, 300, '300 random sequences hold');
});

t.test('when the COMMIT of a sweep step fails, then the floor in memory stays where the database has it', async (t) => {
  const w = timedWorld(t);
  w.at(1);
  w.at(1);
  // a deferred foreign-key violation written inside the step makes its COMMIT itself fail
  w.sqlite.exec(`CREATE TRIGGER t_fail AFTER INSERT ON push_expiry BEGIN
    INSERT INTO user_devices (user_id, device_id) VALUES (999999, 999999); END`);
  const st = (w.pushes as unknown as { st: { lastEvent: { get: () => unknown } } }).st;
  const get = st.lastEvent.get.bind(st.lastEvent);
  st.lastEvent.get = () => {
    w.sqlite.pragma('defer_foreign_keys = ON');
    return get();
  };
  t.throws(() => w.pushes.expireStep(w.cutoff(2)), /FOREIGN KEY/, 'the step fails at its COMMIT');
  t.equal(w.pushes.expiryFloor(), 0, 'the floor in memory has not moved');
  t.same(w.states(), ['PENDING', 'PENDING'], 'nothing expired');
  w.sqlite.exec('DROP TRIGGER t_fail');
  t.same(w.pushes.expireStep(w.cutoff(2)), { expired: 2, more: false }, 'the next step expires both');
});

t.test('when more events than one slice are counted, then the pending count is exact and the event loop turns between slices', async (t) => {
  const w = world(t);
  const a = w.device('A');
  const b = w.device('B');
  const total = COUNT_SLICE * 2 + 7;
  w.sqlite.transaction(() => {
    for (let i = 0; i < total; i++) w.event(i % 2 ? a : b, i % 3 === 0 ? 'PENDING' : 'DELIVERED');
  })();
  const expected = w.sqlite.prepare(`SELECT count(*) FROM events WHERE state = 'PENDING'`).pluck().get() as number;
  // a callback of each turn of the event loop, queued first: it runs once per turn the count yields
  let immediates = 0;
  const spin = () => {
    immediates++;
    if (immediates < 10) setImmediate(spin);
  };
  setImmediate(spin);
  const counted = await w.pushes.countPending();
  t.equal(counted, expected, `${expected} pending of ${total}`);
  t.ok(immediates >= 2, 'other callbacks ran while it counted (three slices)');
  const expired = w.pushes.expireStep('2026-06-01T00:00:00.000Z', total + 10);
  t.equal(expired.expired, expected);
  t.equal(await w.pushes.countPending(), 0, 'nothing after the sweep floor');
  w.event(a);
  t.equal(await w.pushes.countPending(), 1, 'a push written after the sweep');
});

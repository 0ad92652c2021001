// The acks of one device socket (domain/ack.ts, issue 36): one write in flight, acks arriving
// meanwhile merged into the next (the highest wins), stale acks write nothing and are charged,
// and moving acks come free only up to one per push sent.
import t from 'tap';
import { SocketAcks } from '../../../src/domain/ack.js';

/** a socket that has sent pushes 1..n */
function sentUpTo(n: number): SocketAcks {
  const acks = new SocketAcks();
  for (let p = 1; p <= n; p++) acks.sent(p);
  return acks;
}

t.test('when an ack arrives with nothing in flight, then it is written at once, free', async (t) => {
  const acks = sentUpTo(3);
  t.same(acks.offer(2), { write: 2, charged: false });
  t.equal(acks.acked, 0, 'not stored until its write ends');
  t.equal(acks.settled(true), null, 'nothing merged meanwhile');
  t.equal(acks.acked, 2);
});

t.test('when acks arrive while a write is in flight, then none is written until it ends, and then one write carries the highest', async (t) => {
  const acks = sentUpTo(10);
  t.same(acks.offer(1), { write: 1, charged: false });
  t.same(acks.offer(3), { write: null, charged: false }, 'merged');
  t.same(acks.offer(7), { write: null, charged: false }, 'merged');
  t.same(acks.offer(5), { write: null, charged: false }, 'below the merged 7: stale, writes nothing (free: fewer acks than pushes sent)');
  t.equal(acks.settled(true), 7, 'the merged acks: one write, the highest');
  t.equal(acks.acked, 1);
  t.same(acks.offer(8), { write: null, charged: false }, 'merged behind the write of 7');
  t.equal(acks.settled(true), 8);
  t.equal(acks.settled(true), null);
  t.equal(acks.acked, 8);
});

t.test('when an ack does not move the position (repeated, older, or being written), then it writes nothing; past one ack frame per push sent it is charged', async (t) => {
  const acks = sentUpTo(5);
  t.same(acks.offer(4), { write: 4, charged: false });
  t.same(acks.offer(4), { write: null, charged: false }, 'the one in flight, again');
  t.same(acks.offer(2), { write: null, charged: false }, 'older than the one in flight');
  t.equal(acks.settled(true), null, 'no write waits: the stale acks merged nothing');
  t.same(acks.offer(4), { write: null, charged: false }, 'the stored one, again');
  t.same(acks.offer(3), { write: null, charged: false }, 'older than the stored one: the fifth ack frame for five pushes');
  t.same(acks.offer(4), { write: null, charged: true }, 'a sixth ack frame for five pushes');
});

t.test('when the ack timeout resends a backlog and the device acks the originals late and then every copy, then no ack is charged (review, 2026-11-29)', async (t) => {
  const acks = new SocketAcks();
  for (let p = 1; p <= 100; p++) acks.sent(p);
  for (let p = 1; p <= 100; p++) acks.sent(p); // the resend, from the oldest unacked
  let charged = 0;
  for (const round of [1, 2]) {
    for (let p = 1; p <= 100; p++) {
      const d = acks.offer(p);
      if (d.charged) charged++;
      if (d.write !== null) acks.settled(true);
    }
    t.equal(acks.acked, 100, `round ${round}: all acknowledged`);
  }
  t.equal(charged, 0, '200 ack frames for 200 push frames: none charged');
  t.same(acks.offer(100), { write: null, charged: true }, 'one more is');
});

t.test('when an ack names a push above the highest sent on the socket, then it acknowledges only up to that one', async (t) => {
  const none = new SocketAcks();
  t.same(none.offer(1_000_000_000), { write: null, charged: true }, 'nothing sent: it acknowledges nothing, and is charged');
  const acks = sentUpTo(3);
  t.same(acks.offer(1_000_000_000), { write: 3, charged: false });
  acks.settled(true);
  t.same(acks.offer(1_000_000_000), { write: null, charged: false }, 'everything sent is acknowledged: the same flood frame moves nothing (the second of three free)');
  acks.sent(2);
  t.same(acks.offer(1_000_000_000), { write: null, charged: false }, 'a resend below the highest sent moves nothing either');
  t.same(acks.offer(1_000_000_000), { write: null, charged: false }, 'the fourth ack frame for four pushes');
  t.same(acks.offer(1_000_000_000), { write: null, charged: true }, 'the fifth is charged');
});

t.test('when a device acks each push of a 10 000-push backlog, then every ack is free; moving acks past the pushes sent are charged', async (t) => {
  const acks = new SocketAcks();
  let charged = 0;
  let writes = 0;
  let inFlight = false;
  for (let p = 1; p <= 10_000; p++) {
    acks.sent(p);
    const d = acks.offer(p);
    if (d.charged) charged++;
    if (d.write !== null) {
      writes++;
      inFlight = true;
    }
    // a write ends every tenth ack: the others merge
    if (inFlight && p % 10 === 0) {
      let next = acks.settled(true);
      while (next !== null) {
        writes++;
        next = acks.settled(true);
      }
      inFlight = false;
    }
  }
  t.equal(charged, 0, 'a well-behaved device is never charged');
  t.ok(writes <= 2_000, `${writes} writes for 10 000 acks`);
  t.equal(acks.acked, 10_000);
  // one push sent at pushId 1 000 000 (the device's sequence is long): acking 1, 2, 3… below it
  // would move the position each time, but only one is free
  const long = new SocketAcks();
  long.sent(1_000_000);
  t.same(long.offer(1), { write: 1, charged: false });
  t.same(long.offer(2), { write: null, charged: true }, 'a second move with one push sent');
});

t.test('when an ack write fails, then the position falls back to what was stored, and a later ack (or the same again) writes', async (t) => {
  const acks = sentUpTo(6);
  t.same(acks.offer(2), { write: 2, charged: false });
  t.equal(acks.settled(false), null);
  t.equal(acks.acked, 0, 'nothing stored');
  t.same(acks.offer(2).write, 2, 'the same ack moves the position again');
  t.same(acks.offer(5), { write: null, charged: false }, 'merged');
  t.equal(acks.settled(false), 5, 'the merged ack covers the failed one');
  t.equal(acks.settled(true), null);
  t.equal(acks.acked, 5);
});

t.test('when a write is said to end with none in flight, then it is a bug and throws', async (t) => {
  t.throws(() => new SocketAcks().settled(true), /no ack write in flight/);
});

// The outbox port's contract (ports/outbox.ts): the pushes the incident unit of work wrote, as
// delivery reads, sends, settles and expires them, and the devices' presence rows.
import type { Test } from 'tap';
import { at, ok, world, type StorageFactory } from './world.js';

export async function outboxContract(t: Test, factory: StorageFactory): Promise<void> {
  await t.test('outbox', async (t) => {
    t.test('when devices share incidents, then each device’s pushIds run 1, 2, 3… without gaps while event ids interleave, and pages follow the cursor', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const a = await w.device('E1', cad);
      const b = await w.device('E2', cad);
      for (const [i, resources] of [['E1', 'E2'], ['E2'], ['E1', 'E2'], ['E1']].entries()) ok(t, await w.create(cad, `S-${i}`, resources));
      const pa = await w.pending(a.id);
      const pb = await w.pending(b.id);
      t.same(pa.map((r) => r.pushId), [1, 2, 3]);
      t.same(pb.map((r) => r.pushId), [1, 2, 3]);
      const eventIds = [...pa, ...pb].map((r) => r.eventId).sort((x, y) => x - y);
      t.same(eventIds, (await w.allEvents()).map((e) => e.id), 'every event is one push');
      t.ok(pa.every((r, i) => i === 0 || r.eventId > pa[i - 1]!.eventId), 'pushIds follow event ids');
      t.same((await w.outbox.pendingAfter(a.id, 1, 10)).map((r) => r.pushId), [2, 3], 'after a cursor');
      t.same((await w.outbox.pendingAfter(a.id, 1, 1)).map((r) => r.pushId), [2], 'up to a limit');
      t.same(await w.outbox.pendingAfter(a.id, 3, 10), [], 'nothing after the last');
      t.same(await w.outbox.pendingAfter(b.id + 1000, 0, 10), [], 'a device that does not exist has none');
    });

    t.test('when a device acks pushId N, then exactly its pending pushes up to N are delivered, and no other device’s', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const a = await w.device('E1', cad);
      const b = await w.device('E2', cad);
      for (let i = 0; i < 3; i++) ok(t, await w.create(cad, `A-${i}`, ['E1', 'E2']));
      const ackAt = w.now();
      t.equal(await w.outbox.ack(a.id, 2, ackAt), 2, 'two pushes settled');
      t.same(await w.pushIds(a.id), [3], 'delivery goes on after them');
      t.same(await w.pushIds(b.id), [1, 2, 3], 'the other device’s pushes 1 and 2 are untouched');
      t.same((await w.eventsOf(a.id)).map((e) => e.state), ['DELIVERED', 'DELIVERED', 'PENDING']);
      t.same((await w.eventsOf(b.id)).map((e) => e.state), ['PENDING', 'PENDING', 'PENDING']);
      t.equal(await w.outbox.ack(a.id, 2, ackAt), 0, 'an ack repeated settles nothing');
      t.equal(await w.outbox.ack(a.id, 1, ackAt), 0, 'nor an older one');
      t.equal(await w.outbox.ack(b.id, 1, ackAt), 1);
      t.same(await w.pushIds(b.id), [2, 3]);
      t.equal(await w.outbox.ack(a.id, 1000, ackAt), 1, 'an ack past the last push settles what was written');
      t.same(await w.pushIds(a.id), []);
      ok(t, await w.create(cad, 'A-9', ['E1']));
      t.same(await w.pushIds(a.id), [4], 'and not a push written after it');
      t.same((await w.eventsOf(a.id)).map((e) => e.state), ['DELIVERED', 'DELIVERED', 'DELIVERED', 'PENDING']);
    });

    t.test('when an ack meets pushes already settled otherwise, then it counts only those it delivered', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const a = await w.device('E1', cad);
      const r = ok(t, await w.create(cad, 'C-1', ['E1']));
      ok(t, await w.update(cad, { id: r.incident.id }, { originId: 'C-1', resources: [] })); // pushes 1, 2 superseded
      ok(t, await w.create(cad, 'C-2', ['E1'])); // push 3
      t.same(await w.pushIds(a.id), [3]);
      t.equal(await w.outbox.ack(a.id, 3, w.now()), 1);
      t.same((await w.eventsOf(a.id)).map((e) => e.state), ['SUPERSEDED', 'SUPERSEDED', 'DELIVERED'], 'a superseded push stays superseded');
    });

    t.test('when pushes are sent, then their attempts and last sending time show, and the oldest unacknowledged one is found', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const a = await w.device('E1', cad);
      const b = await w.device('E2', cad);
      for (let i = 0; i < 3; i++) ok(t, await w.create(cad, `O-${i}`, ['E1', 'E2']));
      const [p1, p2, p3] = await w.pending(a.id);
      t.equal(await w.outbox.oldestUnacked(a.id, 0), undefined, 'nothing sent yet');
      const first = w.now();
      await w.outbox.markSent([p1!.eventId, p2!.eventId], first);
      const second = w.now();
      await w.outbox.markSent([p1!.eventId], second);
      t.same((await w.pending(a.id)).map((r) => [r.pushId, r.lastSentAt]), [
        [1, second],
        [2, first],
        [3, null],
      ]);
      t.same((await w.eventsOf(a.id)).map((e) => e.attempts), [2, 1, 0], 'attempts counted per push');
      t.same((await w.eventsOf(b.id)).map((e) => e.attempts), [0, 0, 0], 'another device’s pushes untouched');
      t.same(await w.outbox.oldestUnacked(a.id, 2), { id: 1, lastSentAt: second });
      await w.outbox.ack(a.id, 1, w.now());
      t.same(await w.outbox.oldestUnacked(a.id, 2), { id: 2, lastSentAt: first });
      t.same(await w.outbox.oldestUnacked(a.id, 3), { id: 2, lastSentAt: first });
      await w.outbox.ack(a.id, 2, w.now());
      t.equal(await w.outbox.oldestUnacked(a.id, 2), undefined, 'everything sent is acknowledged');
      t.same(await w.outbox.oldestUnacked(a.id, 3), { id: 3, lastSentAt: null });
      t.equal(p3!.pushId, 3);
    });

    t.test('when the oldest unacknowledged push is asked for past the device’s last push, then a push written later is still delivered', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const a = await w.device('E1', cad);
      const first = ok(t, await w.create(cad, 'U-1', ['E1']));
      await w.outbox.markSent([first.events[0]!.id], w.now());
      t.equal(await w.outbox.ack(a.id, 1, w.now()), 1);
      t.equal(await w.outbox.oldestUnacked(a.id, 5), undefined, 'nothing unacknowledged');
      const later = ok(t, await w.create(cad, 'U-2', ['E1']));
      t.same((await w.pending(a.id)).map((r) => [r.pushId, r.eventId]), [[2, later.events[0]!.id]], 'a lookup settles nothing written after it');
      t.same(await w.outbox.oldestUnacked(a.id, 2), { id: 2, lastSentAt: null });
    });

    t.test('when the TTL sweep runs, then exactly the pushes pending since before the cutoff expire', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const a = await w.device('E1', cad);
      const b = await w.device('E2', cad);
      const c = await w.device('E3', cad);
      ok(t, await w.create(cad, 'T-1', ['E1', 'E2'], {}, at(10)));
      const super1 = ok(t, await w.create(cad, 'T-2', ['E3'], {}, at(11)));
      ok(t, await w.update(cad, { id: super1.incident.id }, { originId: 'T-2', resources: [] }, at(12))); // c's two pushes superseded
      t.equal(await w.outbox.ack(b.id, 1, at(13)), 1); // b's delivered
      ok(t, await w.create(cad, 'T-3', ['E1', 'E2'], {}, at(20)));
      ok(t, await w.create(cad, 'T-4', ['E1'], {}, at(30)));
      const sweep = async (cutoff: string) => {
        let expired = 0;
        for (let i = 0; i < 1000; i++) {
          const step = await w.outbox.expireStep(cutoff, 1);
          expired += step.expired;
          if (!step.more) return expired;
        }
        throw new Error('the sweep never ends');
      };
      t.equal(await sweep(at(20)), 1, 'one push pending since before the cutoff (the push at the cutoff is not older)');
      t.same((await w.eventsOf(a.id)).map((e) => e.state), ['EXPIRED', 'PENDING', 'PENDING']);
      t.same((await w.eventsOf(b.id)).map((e) => e.state), ['DELIVERED', 'PENDING'], 'a delivered push stays delivered');
      t.same((await w.eventsOf(c.id)).map((e) => e.state), ['SUPERSEDED', 'SUPERSEDED'], 'a superseded one stays superseded');
      t.same(await w.pushIds(a.id), [2, 3], 'an expired push is not sent');
      t.equal(await sweep(at(20)), 0, 'a second sweep to the same cutoff finds nothing');
      t.equal((await w.outbox.expireStep(at(20))).expired, 0, 'in one step too');
      t.equal(await sweep(at(25)), 2, 'a later cutoff takes the pushes of 20');
      t.same(await w.pushIds(a.id), [3]);
      t.same(await w.pushIds(b.id), []);
      let total = 0;
      for (let more = true, i = 0; more && i < 1000; i++) {
        const step = await w.outbox.expireStep(at(31));
        total += step.expired;
        more = step.more;
      }
      t.equal(total, 1, 'at the default step size too');
      t.same(
        (await w.allEvents()).map((e) => e.state).filter((s) => s === 'PENDING'),
        [],
        'nothing pending is left before the last cutoff',
      );
    });

    t.test('when presence rows are written, then devices show their status and last update, and a reset leaves none online', async (t) => {
      const w = await world(t, factory);
      const a = await w.device('A');
      const b = await w.device('B');
      const c = await w.device('C');
      t.equal((await w.identity.deviceById(a.id))?.status, 'unknown', 'a new device');
      await w.outbox.setStatuses([
        { deviceId: a.id, status: 'online', at: at(1) },
        { deviceId: b.id, status: 'online', at: at(1) },
        { deviceId: c.id, status: 'offline', at: null },
      ]);
      await w.outbox.setStatuses([{ deviceId: b.id, status: 'offline', at: at(2) }]);
      await w.outbox.setStatuses([]);
      const row = async (id: number) => {
        const d = (await w.identity.deviceById(id))!;
        return [d.status, d.lastUpdate];
      };
      t.same(await row(a.id), ['online', at(1)]);
      t.same(await row(b.id), ['offline', at(2)]);
      t.same(await row(c.id), ['offline', null], 'no time given: the last update is kept');
      await w.outbox.resetPresence();
      t.same(await row(a.id), ['offline', at(1)], 'reset: offline, its last update kept');
      t.same(await row(b.id), ['offline', at(2)]);
    });
  });
}

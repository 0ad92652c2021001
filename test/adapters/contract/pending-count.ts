// The outbox's count of pending pushes (OutboxPort.countPending, the metrics' gauge): exactly the
// events still PENDING, whatever settled the others (an ack, a stand-down, the TTL sweep, a new
// socket's first read raising its device's floor).
import type { Test } from 'tap';
import { at, ok, world, type StorageFactory } from './world.js';

export async function pendingCountContract(t: Test, factory: StorageFactory): Promise<void> {
  await t.test('pending count', async (t) => {
    t.test('when pushes are written, acked, superseded and expired, then the count is the events still PENDING', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const a = await w.device('E1', cad);
      const b = await w.device('E2', cad);
      await w.device('E3', cad);
      const pendingNow = async () => (await w.allEvents()).filter((e) => e.state === 'PENDING').length;
      t.equal(await w.outbox.countPending(), 0, 'none at first');
      ok(t, await w.create(cad, 'P-1', ['E1', 'E2'], {}, at(10)));
      const stood = ok(t, await w.create(cad, 'P-2', ['E3'], {}, at(11)));
      ok(t, await w.create(cad, 'P-3', ['E1'], {}, at(20)));
      t.equal(await w.outbox.countPending(), 4);
      ok(t, await w.update(cad, { id: stood.incident.id }, { originId: 'P-2', resources: [] }, at(21)));
      t.equal(await w.outbox.countPending(), 3, 'a stand-down supersedes the assignment never sent');
      t.equal(await w.outbox.ack(b.id, 1, at(22)), 1);
      t.equal(await w.outbox.countPending(), 2, 'an ack delivers');
      await w.outbox.pendingAfter(b.id, 0, 10); // a new socket's read: the floor moves past what settled
      await w.outbox.pendingAfter(a.id, 0, 10);
      t.equal(await w.outbox.countPending(), 2, 'a read settles nothing');
      for (let more = true, i = 0; more && i < 100; i++) more = (await w.outbox.expireStep(at(15))).more;
      t.equal(await w.outbox.countPending(), 1, 'the sweep expired the push older than its cutoff');
      t.equal(await w.outbox.countPending(), await pendingNow(), 'as the events say');
      ok(t, await w.create(cad, 'P-4', ['E1', 'E2'], {}, at(30)));
      t.equal(await w.outbox.countPending(), 3, 'pushes written after the sweep count');
      t.equal(await w.outbox.countPending(), await pendingNow());
    });
  });
}

// Presence is cheap (DESIGN section 5): a pong touches memory only, and the status of many
// devices connecting or leaving at once is written in one transaction, not one each (one
// fsync per pong of 2 000 devices stalled the event loop for over 100 ms every 15 s).
import t, { type Test } from 'tap';
import { createDevice } from '../fixtures/app.js';
import { connect, deviceStatus, deviceToken, listen, settle, until, type Client } from '../fixtures/sockets.js';
import { OutboxRows } from '../../src/adapters/sqlite/outbox.js';

/** counts the transactions that write presence */
function countPresenceWrites(t: Test): { writes: number; rows: number } {
  const seen = { writes: 0, rows: 0 };
  const original = OutboxRows.prototype.setStatuses;
  OutboxRows.prototype.setStatuses = function (this: OutboxRows, rows) {
    seen.writes += 1;
    seen.rows += rows.length;
    return original.call(this, rows);
  };
  t.teardown(() => void (OutboxRows.prototype.setStatuses = original));
  return seen;
}

t.test('when 40 devices connect at once, answer pings and leave at once, then presence is written in a few transactions and never per pong', async (t) => {
  const s = await listen(t, { pingIntervalMs: 50 });
  const ids: number[] = [];
  for (let i = 0; i < 40; i++) ids.push(await createDevice(s.app, { name: `P${i}`, uniqueId: `p-${i}` }));
  const tokens = await Promise.all(ids.map((id) => deviceToken(s.app, id)));
  const seen = countPresenceWrites(t);

  const clients: Client[] = await Promise.all(tokens.map((token) => connect(t, `${s.ws}/api/socket/device?token=${token}`)));
  t.ok((await Promise.all(ids.map((id) => deviceStatus(s.app, id)))).every((st) => st === 'online'), 'every device is online at once (read from memory)');
  await until('each connection written', () => seen.rows >= 40);
  await settle(100);
  t.equal(seen.rows, 40, 'each connection is written once');
  t.ok(seen.writes < 40, `in fewer transactions than devices (${seen.writes})`);

  const before = { ...seen };
  await settle(500); // about ten pings each, all answered by the clients
  t.ok(clients.every((c) => c.closed === null), 'the sockets stay open: their pongs are counted');
  t.same(seen, before, 'no presence write for a pong');

  await Promise.all(clients.map((c) => c.close()));
  await until('every device offline', async () => (await Promise.all(ids.map((id) => deviceStatus(s.app, id)))).every((st) => st === 'offline'));
  await until('each departure written', () => seen.rows - before.rows >= 40);
  await settle(100);
  t.equal(seen.rows - before.rows, 40, 'each departure is written once');
  t.ok(seen.writes - before.writes < 40, `leaving: fewer transactions than devices (${seen.writes - before.writes})`);
});

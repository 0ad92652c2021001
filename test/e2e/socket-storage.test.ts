// Delivery writes (presence, sent, acknowledged) run in socket event handlers and timers, where
// a throw would end the process: when the database refuses writes (a full disk, a read-only
// file), the hub logs and goes on, and the pushes stay pending until it can store again.
import t from 'tap';
import { events, incidentBody, send, world } from '../fixtures/incidents.js';
import { capturedLog, connect, deviceToken, listen, settle, until } from '../fixtures/sockets.js';

t.test('when the database refuses writes while a device connects and acks, then the server goes on and the push is delivered once writes work again', async (t) => {
  const { logger, lines } = capturedLog('error');
  const s = await listen(t, { ackTimeoutMs: 60_000 }, {}, { logger });
  const w = await world(s.app);
  const created = await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['A7'] }));
  t.equal(created.status, 202, 'A7 is offline: its push is queued');
  const token = await deviceToken(s.app, w.a7);

  s.db.$client.pragma('query_only = ON'); // every write now fails with SQLITE_READONLY
  const c = await connect(t, `${s.ws}/api/socket/device?token=${token}`);
  await until('the push', () => c.frames.length >= 1);
  c.ack(c.frames[0]!.pushId);
  await settle(300);
  t.equal(c.closed, null, 'the socket stays open');
  const failed = lines.filter((l) => l.msg.includes('a delivery write failed'));
  t.ok(failed.length > 0, 'the failure is logged');
  t.equal(failed.length, 1, 'once, not per write');

  s.db.$client.pragma('query_only = OFF');
  t.same((await events(s.app)).map((e: { state: string }) => e.state), ['PENDING'], 'the refused ack delivered nothing');
  c.ack(c.frames[0]!.pushId);
  await until('delivered', async () => (await events(s.app)).every((e: { state: string }) => e.state === 'DELIVERED'));
  t.pass('the next ack is stored');
});

t.test('when the database refuses writes while a device reconnects past pushes it never needs, then it is still sent what is pending', async (t) => {
  const s = await listen(t, { ackTimeoutMs: 60_000 });
  const w = await world(s.app);
  // assigned and stood down before the device connects: both SUPERSEDED, stepped over by the floor
  await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'OLD', resources: ['A7'] }));
  await send(s.app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ originId: 'OLD', resources: [] }));
  await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'NEW', resources: ['A7'] }));
  const token = await deviceToken(s.app, w.a7);
  s.db.$client.pragma('query_only = ON'); // the floor cannot be raised now
  t.teardown(() => void s.db.$client.pragma('query_only = OFF'));
  const c = await connect(t, `${s.ws}/api/socket/device?token=${token}`);
  await until('the pending push', () => c.frames.length >= 1);
  t.same(
    c.frames.map((f) => f.incident.originId),
    ['NEW'],
    'the pending push is sent though the floor could not move',
  );
});

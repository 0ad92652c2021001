// On the device socket a pushId is the device's own sequence (DESIGN section 5), and the
// frame's event carries the event's id, as GET /api/events lists it.
import t from 'tap';
import { events, incidentBody, send, world } from '../fixtures/incidents.js';
import { connect, deviceToken, listen, until } from '../fixtures/sockets.js';

t.test("when other devices' events come between a device's pushes, then its frames carry pushIds 1, 2 and the events' own ids, and its ack settles only its pushes", async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'CAD-1', resources: ['A7'] }));
  await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'CAD-2', resources: ['E1'] }));
  await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'CAD-3', resources: ['E1', 'A7'] }));
  const listed = await events(s.app, `?deviceId=${w.a7}`);
  t.equal(listed.length, 2);
  const c = await connect(t, `${s.ws}/api/socket/device?token=${await deviceToken(s.app, w.a7)}`);
  await until('two pushes', () => c.frames.length >= 2);
  t.same(c.frames.map((f) => f.pushId), [1, 2], "the device's own sequence");
  t.same(c.frames.map((f) => f.event.id), listed.map((e) => e.id), 'each event with the id the event list gives it');
  t.ok(listed[1]!.id > 2, "E1's events came in between");
  c.ack(2);
  await until('both delivered', async () => (await events(s.app, `?deviceId=${w.a7}`)).every((e) => e.state === 'DELIVERED'));
  const others = (await events(s.app)).filter((e) => e.deviceId !== w.a7);
  t.equal(others.length, 4, "E1's two devices have two events each");
  t.ok(others.every((e) => e.state === 'PENDING'), 'none of them is settled by the ack of pushId 2, lower event ids included');
});

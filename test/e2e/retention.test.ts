// Retention end to end (issue 29): a real server, a real device socket, the app's own sweeper
// (jobs.each.retention, src/jobs.ts) on a clock moved past RETENTION_DAYS. A swept event is gone from
// GET /api/events; the device, reconnecting after its pushes were swept, gets only what it has
// not had, numbered after its last pushId.
import t from 'tap';
import { FakeClock } from '../fixtures/app.js';
import { events, incidentBody, send, world } from '../fixtures/incidents.js';
import { connect, deviceToken, listen, until } from '../fixtures/sockets.js';

const DAY_MS = 86_400_000;
/** the incident's id in a create's answer (200: the incident; 202: with the statuses) */
const idOf = (r: { body: { id?: number; incident?: { id: number } } }) => r.body.incident?.id ?? r.body.id!;

t.test('when delivered pushes are older than RETENTION_DAYS, then a sweep removes them from GET /api/events, and the device reconnecting gets nothing twice and its next pushId', async (t) => {
  const clock = new FakeClock();
  const s = await listen(t, {}, { retentionDays: 30 }, { clock });
  const w = await world(s.app);
  const token = await deviceToken(s.app, w.a7);
  const first = await connect(t, `${s.ws}/api/socket/device?token=${token}`);
  const i1 = await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'OLD-1', resources: ['A7'] }));
  const i2 = await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'OLD-2', resources: ['A7'] }));
  t.equal(i1.status, 200);
  await until('two pushes', () => first.frames.length >= 2);
  t.same(first.frames.map((f) => f.pushId), [1, 2]);
  first.ack(2);
  await until('both delivered', async () => (await events(s.app, `?deviceId=${w.a7}`)).every((e) => e.state === 'DELIVERED'));
  await first.close();

  clock.advance(31 * DAY_MS);
  // written while the device is away: PENDING, and young
  const i3 = await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'NEW-3', resources: ['A7'] }));
  t.equal(i3.status, 202, 'the device is offline: queued');
  t.equal((await events(s.app, `?deviceId=${w.a7}`)).length, 3, 'before the sweep: three events');

  const removed = await s.jobs.each.retention.sweep();
  t.same(removed, { events: 2, incidentVersions: 2 }, 'the two delivered pushes and their incident versions');
  const left = await events(s.app, `?deviceId=${w.a7}`);
  t.same(left.map((e) => [e.incidentId, e.state]), [[idOf(i3), 'PENDING']], 'only the young PENDING one is listed');
  for (const r of [i1, i2]) t.same(await events(s.app, `?incidentId=${idOf(r)}`), [], 'a swept event is gone from GET /api/events');
  const incident = await send(s.app, w.cad, 'GET', `/api/incidents/${idOf(i1)}`);
  t.equal(incident.status, 200, 'the incident itself is not touched');

  const again = await connect(t, `${s.ws}/api/socket/device?token=${token}`);
  await until('the queued push', () => again.frames.length >= 1);
  again.ack(3);
  await until('it is delivered', async () => (await events(s.app, `?deviceId=${w.a7}`)).every((e) => e.state === 'DELIVERED'));
  t.same(again.frames.map((f) => f.pushId), [3], 'the next pushId, and nothing it had before');
  t.equal(again.frames[0]!.incident.originId, 'NEW-3');
  const i4 = await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'NEW-4', resources: ['A7'] }));
  t.equal(i4.status, 200, 'online again');
  await until('the next push', () => again.frames.length >= 2);
  t.same(again.frames.map((f) => f.pushId), [3, 4]);
});

// Responders answer on their socket, end to end: a real listening server, a real device socket
// sending `response` frames, a real user socket hearing the incidentResponse events. Every frame
// the service sends is checked against asyncapi.yaml (fixtures/sockets.ts), and every frame the
// device sends here is checked too, before it is sent.
import t, { type Test } from 'tap';
import { randomUUID } from 'node:crypto';
import { mintToken } from '../fixtures/app.js';
import { frameViolation } from '../fixtures/asyncapi.js';
import { events, incidentBody, send, world } from '../fixtures/incidents.js';
import { closeCode, connect, deviceToken, listen, settle, until, userEvents, type Client } from '../fixtures/sockets.js';

type Frame = { type: string; responseId?: string; accepted?: boolean; reason?: string; message?: string };

/** sends a response frame the device would send (checked against asyncapi.yaml first) */
function respond(t: Test, c: Client, frame: Record<string, unknown>): string {
  const responseId = (frame.responseId as string | undefined) ?? randomUUID();
  const full = { type: 'response', responseId, ...frame };
  t.equal(frameViolation('device', 'receive', full), null, 'the device sends what asyncapi.yaml specifies');
  c.socket.send(JSON.stringify(full));
  return responseId;
}

const results = (c: Client) => (c.frames as unknown as Frame[]).filter((f) => f.type === 'responseResult');
const resultOf = (c: Client, responseId: string) => until(`the result of ${responseId}`, () => results(c).find((f) => f.responseId === responseId));

t.test('when a device answers on its socket, then it gets responseResult frames, and users and the event list hear of it', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const user = await connect(t, `${s.ws}/api/socket?token=${await mintToken(s.app, w.cad)}`);
  const device = await connect(t, `${s.ws}/api/socket/device?token=${await deviceToken(s.app, w.a7)}`);
  const created = await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['A7'] }));
  const incidentId = (created.body.incident ?? created.body).id as number;
  await until('the push', () => device.frames.some((f) => f.type === 'push'));

  const ack = respond(t, device, { incidentId, status: 'ACKNOWLEDGED' });
  const responding = respond(t, device, { incidentId, status: 'RESPONDING', time: '2026-11-22T12:00:00Z' });
  t.same(await resultOf(device, ack), { type: 'responseResult', responseId: ack, accepted: true });
  t.same(await resultOf(device, responding), { type: 'responseResult', responseId: responding, accepted: true });
  t.same(
    results(device).map((f) => f.responseId),
    [ack, responding],
    'answered in the order sent',
  );
  const heard = await until('the user socket hears both', () => {
    const mine = userEvents(user).filter((e) => e.type === 'incidentResponse');
    return mine.length === 2 && mine;
  });
  t.same(heard.map((e) => e.deviceId), [w.a7, w.a7]);
  t.same(
    (await events(s.app, `?incidentId=${incidentId}&type=incidentResponse`)).map((e) => e.attributes.status),
    ['ACKNOWLEDGED', 'RESPONDING'],
  );

  // a repeat of a responseId, a late answer, and one for an incident the device is not on
  respond(t, device, { responseId: responding, incidentId, status: 'CLEARED' });
  const late = respond(t, device, { incidentId, status: 'ACKNOWLEDGED' });
  const elsewhere = respond(t, device, { incidentId: incidentId + 1000, status: 'RESPONDING' });
  await until('three more results', () => results(device).length === 5);
  t.same(results(device).slice(2), [
    { type: 'responseResult', responseId: responding, accepted: true },
    { type: 'responseResult', responseId: late, accepted: true },
    { type: 'responseResult', responseId: elsewhere, accepted: false, reason: 'not-assigned' },
  ]);
  await settle(100);
  t.equal(userEvents(user).filter((e) => e.type === 'incidentResponse').length, 2, 'nothing new for users');
  t.equal(device.frames.filter((f) => f.type === 'push').length, 1, 'the device is never pushed its own answers');

  // stood down: the next answer is cancelled
  await send(s.app, w.cad, 'PUT', `/api/incidents/${incidentId}`, incidentBody({ resources: [] }));
  await until('the stand-down push', () => device.frames.filter((f) => f.type === 'push').length === 2);
  const cancelled = respond(t, device, { incidentId, status: 'ON_SCENE' });
  t.same(await resultOf(device, cancelled), { type: 'responseResult', responseId: cancelled, accepted: false, reason: 'cancelled' });
  const list = await send(s.app, w.cad, 'GET', `/api/incidents/${incidentId}/responders`);
  t.same(list.body.map((r: { response: { status: string } }) => r.response.status), ['CANCELLED']);
  t.equal(device.closed, null, 'the socket stays open throughout');
});

t.test('when a device sends response frames its schema refuses, then each is an invalid frame, and too many close the socket (4003)', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const device = await connect(t, `${s.ws}/api/socket/device?token=${await deviceToken(s.app, w.a7)}`);
  const bad = { type: 'response', responseId: 'not-a-uuid', incidentId: 1, status: 'RESPONDING' };
  t.not(frameViolation('device', 'receive', bad), null, 'asyncapi.yaml refuses it too');
  device.socket.send(JSON.stringify(bad));
  await until('an error frame', () => (device.frames as unknown as Frame[]).some((f) => f.type === 'error'));
  t.match((device.frames as unknown as Frame[]).find((f) => f.type === 'error')!.message, /asyncapi/);
  for (let i = 0; i < 10; i++) device.socket.send(JSON.stringify({ ...bad, status: 'CANCELLED' }));
  t.equal(await closeCode(device), 4003);
  t.same(results(device), [], 'none of them was answered as a response');
});

// The typed device client of the README (scripts/examples/device-client.ts, typed by
// generated/frames.d.ts) against a real listening server: it handles each push once and acks it,
// answers an incident, hears the service's error frame, and is refused with a wrong token.
import t from 'tap';
import { connectDevice, respond, type DeviceClient } from '../../scripts/examples/device-client.js';
import type { PushMessage, ResponseResultMessage } from '../../generated/frames.js';
import { textFrameViolation } from '../fixtures/asyncapi.js';
import { events, incidentBody, send, world } from '../fixtures/incidents.js';
import { deviceToken, listen, until } from '../fixtures/sockets.js';

t.test('when the example device client is connected, then it gets each push once, acks it, and its answer is accepted', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const pushes: PushMessage[] = [];
  const results: ResponseResultMessage[] = [];
  const errors: string[] = [];
  const client: DeviceClient = connectDevice(`${s.ws}/api/socket/device`, await deviceToken(s.app, w.a7), {
    push: (frame) => pushes.push(frame),
    responseResult: (frame) => results.push(frame),
    error: (message) => errors.push(message),
  });
  t.teardown(() => client.socket.terminate());
  client.socket.on('message', (data) => {
    const violation = textFrameViolation('device', 'send', String(data));
    if (violation) t.fail(violation);
  });
  await until('the socket open', () => client.socket.readyState === client.socket.OPEN);

  const created = await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['A7'] }));
  t.equal(created.status, 200);
  const incidentId = (created.body as { id: number }).id;
  await until('the push', () => pushes.length === 1);
  t.same([pushes[0]!.event.type, pushes[0]!.event.attributes.callsign, pushes[0]!.incident.id], ['incidentAssigned', 'A7', incidentId]);
  await until('the push acked by the client', async () => (await events(s.app, `?deviceId=${w.a7}`)).every((e) => e.state === 'DELIVERED'));

  const responseId = respond(client, incidentId, 'RESPONDING');
  await until('the answer taken', () => results.length === 1);
  t.same(results[0], { type: 'responseResult', responseId, accepted: true });

  t.equal((await send(s.app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ status: 'CLOSED' }))).status, 200);
  await until('the stand-down', () => pushes.length === 2);
  t.same(pushes[1]!.event.attributes, { callsign: 'A7', incidentStatus: 'CLOSED' });
  t.equal(client.handled(), pushes[1]!.pushId, 'the client knows the last pushId it handled');
  await until('both acked', async () => (await events(s.app, `?deviceId=${w.a7}&type=incidentDeassigned`)).every((e) => e.state === 'DELIVERED'));

  client.socket.send('{"type":"hello"}');
  await until('the error frame', () => errors.length === 1);
  t.match(errors[0], /"type":"ack".*"type":"response"/);
  t.equal(pushes.length, 2, 'no push handled twice');
});

t.test('when the example device client starts from a pushId it handled before, then pushes up to it are acked, not handled again', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['A7'] }));
  await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'CAD-2', resources: ['A7'] }));
  const pushes: PushMessage[] = [];
  // as after a reconnect: pushId 1 was handled, its ack was lost, so it is sent again
  const client = connectDevice(`${s.ws}/api/socket/device`, await deviceToken(s.app, w.a7), { push: (frame) => pushes.push(frame) }, 1);
  t.teardown(() => client.socket.terminate());
  await until('both pushes acked', async () => (await events(s.app, `?deviceId=${w.a7}`)).every((e) => e.state === 'DELIVERED'));
  t.same(
    pushes.map((p) => [p.pushId, p.incident.originId]),
    [[2, 'CAD-2']],
  );
  t.equal(client.handled(), 2);
});

t.test('when the example device client has a wrong token, then it is told so and the socket closes', async (t) => {
  const s = await listen(t);
  const errors: string[] = [];
  const client = connectDevice(`${s.ws}/api/socket/device`, 'not-a-token', { push: () => t.fail('no push'), error: (m) => errors.push(m) });
  t.teardown(() => client.socket.terminate());
  t.equal(await client.closed, 1006);
  t.match(errors, [/401/]);
});

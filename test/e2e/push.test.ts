// Push delivery end to end: a real listening server, real WebSocket clients.
import t from 'tap';
import { adminAuth, basic, createDevice, createUser, grant, mintToken } from '../fixtures/app.js';
import { events, incidentBody, send, world } from '../fixtures/incidents.js';
import { connect, deviceStatus, deviceToken, listen, until } from '../fixtures/sockets.js';

t.test('when a multi-device callsign is assigned to online devices, then every device gets the push and the answer is 200', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const a = await connect(t, `${s.ws}/api/socket/device`, { headers: { authorization: `Bearer ${await deviceToken(s.app, w.e1a)}` } });
  const b = await connect(t, `${s.ws}/api/socket/device?token=${await deviceToken(s.app, w.e1b)}`);
  await until('both online', async () => (await deviceStatus(s.app, w.e1b)) === 'online');
  const res = await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['E1'] }));
  t.equal(res.status, 200, 'every device was online: the plain incident');
  await until('both pushes', () => a.frames.length === 1 && b.frames.length === 1);
  for (const [c, id] of [[a, w.e1a], [b, w.e1b]] as const) {
    const f = c.frames[0]!;
    t.equal(f.type, 'push');
    t.equal(f.event.type, 'incidentAssigned');
    t.equal(f.event.deviceId, id);
    t.same(f.event.attributes, { callsign: 'E1' });
    t.equal(f.incident.originId, 'CAD-1');
    t.same(f.incident.resources, ['E1']);
  }
});

t.test('when a device is offline, then the answer is 202 OFFLINE and it gets its pushes in order when it connects', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const created = await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['A7'] }));
  t.equal(created.status, 202);
  t.same(created.body.details.deviceStatuses, { A7: 'OFFLINE' });
  await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'CAD-2', resources: ['A7'] }));
  await send(s.app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ resources: ['A7'], description: 'second floor' }));
  const c = await connect(t, `${s.ws}/api/socket/device`, { headers: { authorization: `Bearer ${await deviceToken(s.app, w.a7)}` } });
  await until('two pushes', () => c.frames.length >= 2);
  const ids = c.frames.map((f) => f.pushId);
  t.same(ids, [...ids].sort((x, y) => x - y), 'pushId order');
  t.same(c.frames.map((f) => f.incident.originId), ['CAD-1', 'CAD-2']);
  t.equal(await deviceStatus(s.app, w.a7), 'online');
});

t.test('when the device acks, then pushes up to that id are DELIVERED (cumulative) and not sent again', async (t) => {
  const s = await listen(t, { ackTimeoutMs: 200 });
  const w = await world(s.app);
  for (const originId of ['X1', 'X2', 'X3']) await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ originId, resources: ['A7'] }));
  const c = await connect(t, `${s.ws}/api/socket/device?token=${await deviceToken(s.app, w.a7)}`);
  await until('three pushes', () => c.frames.length >= 3);
  const [p1, p2, p3] = c.frames.map((f) => f.pushId);
  c.ack(p2!);
  await until('two delivered', async () => (await events(s.app)).filter((e) => e.state === 'DELIVERED').length === 2);
  const evs = await events(s.app);
  t.same(evs.map((e) => e.state), ['DELIVERED', 'DELIVERED', 'PENDING']);
  await until('the unacked one resent', () => c.frames.filter((f) => f.pushId === p3).length >= 2);
  t.equal(c.frames.filter((f) => f.pushId === p1).length, 1, 'an acked push is not resent');
  c.ack(p3!);
  await until('all delivered', async () => (await events(s.app)).every((e) => e.state === 'DELIVERED'));
});

t.test('when no ack comes, then sending restarts from the oldest unacked push', async (t) => {
  const s = await listen(t, { ackTimeoutMs: 150 });
  const w = await world(s.app);
  await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'R1', resources: ['A7'] }));
  await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'R2', resources: ['A7'] }));
  const c = await connect(t, `${s.ws}/api/socket/device?token=${await deviceToken(s.app, w.a7)}`);
  await until('a resend of both', () => c.frames.length >= 4);
  const ids = c.frames.slice(0, 4).map((f) => f.pushId);
  t.same(ids, [ids[0], ids[1], ids[0], ids[1]], 'resent from the oldest, in order');
  const evs = await events(s.app);
  t.ok(evs.every((e) => e.state === 'PENDING' && (e as unknown as { attempts: number }).attempts >= 2), 'attempts counted');
});

t.test('when a push outlives its TTL undelivered, then it is EXPIRED and never sent', async (t) => {
  const s = await listen(t, { ttlMs: 50, expireIntervalMs: 20 });
  const w = await world(s.app);
  await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['A7'] }));
  await until('expired', async () => (await events(s.app))[0]?.state === 'EXPIRED');
  const c = await connect(t, `${s.ws}/api/socket/device?token=${await deviceToken(s.app, w.a7)}`);
  await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'LATER', resources: ['A7'] }));
  await until('the later push', () => c.frames.length >= 1);
  await new Promise((r) => setTimeout(r, 100));
  t.same(c.frames.map((f) => f.incident.originId), ['LATER'], 'the expired push was not sent');
});

t.test('when an assignment is stood down before the device ever got it, then both are SUPERSEDED and nothing is sent', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['A7'] }));
  await send(s.app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ resources: [] }));
  await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'KEEP', resources: ['A7'] }));
  t.same((await events(s.app)).map((e) => [e.type, e.state]), [
    ['incidentAssigned', 'SUPERSEDED'],
    ['incidentDeassigned', 'SUPERSEDED'],
    ['incidentAssigned', 'PENDING'],
  ]);
  const c = await connect(t, `${s.ws}/api/socket/device?token=${await deviceToken(s.app, w.a7)}`);
  await until('the live push', () => c.frames.length >= 1);
  await new Promise((r) => setTimeout(r, 100));
  t.same(c.frames.map((f) => f.incident.originId), ['KEEP']);
});

t.test('when a sent but unacked assignment is stood down, then the stand-down follows it', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const c = await connect(t, `${s.ws}/api/socket/device?token=${await deviceToken(s.app, w.a7)}`);
  await until('online', async () => (await deviceStatus(s.app, w.a7)) === 'online');
  await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['A7'] }));
  await until('assignment sent', () => c.frames.length === 1);
  await send(s.app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ status: 'CLOSED' }));
  await until('stand-down sent', () => c.frames.length === 2);
  t.same(c.frames.map((f) => [f.event.type, f.event.attributes.incidentStatus ?? null]), [
    ['incidentAssigned', null],
    ['incidentDeassigned', 'CLOSED'],
  ]);
});

t.test('when a device stops answering pings, then it is offline and the next incident reports OFFLINE', async (t) => {
  const s = await listen(t, { pingIntervalMs: 50 });
  const w = await world(s.app);
  await connect(t, `${s.ws}/api/socket/device?token=${await deviceToken(s.app, w.a7)}`, { autoPong: false });
  await until('online', async () => (await deviceStatus(s.app, w.a7)) === 'online');
  await until('offline after missed pongs', async () => (await deviceStatus(s.app, w.a7)) === 'offline');
  const res = await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['A7'] }));
  t.same(res.body.details.deviceStatuses, { A7: 'OFFLINE' });
});

t.test('when a new socket opens for the same device, then it replaces the old one', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const token = await deviceToken(s.app, w.a7);
  const first = await connect(t, `${s.ws}/api/socket/device?token=${token}`);
  const second = await connect(t, `${s.ws}/api/socket/device?token=${token}`);
  await until('old closed', () => first.closed);
  t.equal(first.closed!.code, 4000);
  await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['A7'] }));
  await until('push on the new socket', () => second.frames.length === 1);
  t.equal(first.frames.length, 0);
});

t.test('when the device token is wrong or revoked, then the upgrade is refused with 401', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  await t.rejects(connect(t, `${s.ws}/api/socket/device?token=not-a-token`), { message: 'HTTP 401' });
  await t.rejects(connect(t, `${s.ws}/api/socket/device`), { message: 'HTTP 401' });
  const userToken = await mintToken(s.app, adminAuth());
  await t.rejects(connect(t, `${s.ws}/api/socket/device?token=${userToken}`), { message: 'HTTP 401' }, 'a user token is not a device token');
  const token = await deviceToken(s.app, w.a7);
  const c = await connect(t, `${s.ws}/api/socket/device?token=${token}`);
  t.equal((await s.app.inject({ method: 'DELETE', url: `/api/devices/${w.a7}/token`, headers: { authorization: adminAuth() } })).statusCode, 204);
  await until('closed on revoke', () => c.closed);
  t.equal(c.closed!.code, 4001);
  await t.rejects(connect(t, `${s.ws}/api/socket/device?token=${token}`), { message: 'HTTP 401' });
});

t.test('when a user opens the live socket, then it sees events of its own devices only', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const cadToken = await mintToken(s.app, w.cad);
  const otherToken = await mintToken(s.app, w.other);
  const cadLive = await connect(t, `${s.ws}/api/socket?token=${cadToken}`);
  const otherLive = await connect(t, `${s.ws}/api/socket`, { headers: { authorization: `Bearer ${otherToken}` } });
  await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['A7'] }));
  await send(s.app, w.other, 'POST', '/api/incidents', incidentBody({ originId: 'O-1', resources: ['E1'] }));
  await until('cad event', () => cadLive.frames.length >= 1);
  await until('other event', () => otherLive.frames.length >= 1);
  await new Promise((r) => setTimeout(r, 50));
  const cadEvents = (cadLive.frames as unknown as { events: { deviceId: number }[] }[]).flatMap((f) => f.events);
  const otherEvents = (otherLive.frames as unknown as { events: { deviceId: number }[] }[]).flatMap((f) => f.events);
  t.same(cadEvents.map((e) => e.deviceId), [w.a7]);
  t.same(otherEvents.map((e) => e.deviceId), [w.otherE1]);
  await t.rejects(connect(t, `${s.ws}/api/socket?token=nope`), { message: 'HTTP 401' });
  await t.rejects(connect(t, `${s.ws}/api/socket`), { message: 'HTTP 401' });
});

t.test('when a device carries a callsign of two users, then only the caller\'s device is alerted', async (t) => {
  const s = await listen(t);
  const uid = await createUser(s.app, { name: 'U', email: 'u@example.test', password: 'u-password' });
  const mine = await createDevice(s.app, { name: 'R1', uniqueId: 'r1-mine' });
  const theirs = await createDevice(s.app, { name: 'R1', uniqueId: 'r1-theirs' });
  await grant(s.app, { userId: uid, deviceId: mine });
  const c1 = await connect(t, `${s.ws}/api/socket/device?token=${await deviceToken(s.app, mine)}`);
  const c2 = await connect(t, `${s.ws}/api/socket/device?token=${await deviceToken(s.app, theirs)}`);
  await until('online', async () => (await deviceStatus(s.app, theirs)) === 'online');
  const res = await send(s.app, basic('u@example.test', 'u-password'), 'POST', '/api/incidents', incidentBody({ resources: ['R1'] }));
  t.equal(res.status, 200);
  await until('push to mine', () => c1.frames.length === 1);
  await new Promise((r) => setTimeout(r, 100));
  t.equal(c2.frames.length, 0, 'the other user\'s device was not touched');
});

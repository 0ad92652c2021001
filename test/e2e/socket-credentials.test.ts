// A socket lives no longer than the credential that opened it (DESIGN section 5): whichever way
// the credential dies, the socket is closed with 4001 and gets nothing more; a change of
// permissions changes what a user socket receives from the next event on.
import t, { type Test } from 'tap';
import { adminAuth, basic, bearer, createUser, FakeClock, grant, json, mintToken } from '../fixtures/app.js';
import { incidentBody, send, world, type World } from '../fixtures/incidents.js';
import { cookieOf, FORM, formBody, login, putUser } from '../fixtures/session.js';
import type { FastifyInstance } from 'fastify';
import { closeCode, connect, deviceToken, listen, settle, until, userEvents, type Client } from '../fixtures/sockets.js';

const REVOKED = 4001;
const CAD = { email: 'cad@example.test', password: 'cad-password' };

let incidents = 0;
/** an incident assigning A7 (one of the CAD user's devices) */
async function alertA7(app: FastifyInstance, w: World): Promise<void> {
  const res = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: `A7-${++incidents}`, resources: ['A7'] }));
  if (res.status !== 200 && res.status !== 202) throw new Error(`incident ${res.status}`);
}

/** the socket got an event while its credential stood: it is a live, receiving socket */
async function receiving(app: FastifyInstance, w: World, c: Client): Promise<void> {
  const before = userEvents(c).length;
  await alertA7(app, w);
  await until('an event on the live socket', () => userEvents(c).length > before);
}

/** closed with 4001, and nothing arrives afterwards */
async function endsWithRevoked(t: Test, app: FastifyInstance, w: World, c: Client): Promise<void> {
  t.equal(await closeCode(c), REVOKED, 'closed with 4001');
  const seen = c.frames.length;
  await alertA7(app, w);
  await settle();
  t.equal(c.frames.length, seen, 'nothing arrives after the close');
}

t.test('when the token a user socket was opened with is revoked with POST /session/token/revoke, then the socket is closed with 4001', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const token = await mintToken(s.app, w.cad);
  const c = await connect(t, `${s.ws}/api/socket?token=${token}`);
  await receiving(s.app, w, c);
  const res = await s.app.inject({ method: 'POST', url: '/api/session/token/revoke', headers: { ...FORM, authorization: w.cad }, payload: formBody({ token }) });
  t.equal(res.statusCode, 204);
  await endsWithRevoked(t, s.app, w, c);
});

t.test('when the token a user socket was opened with is revoked with DELETE /session/tokens/{id}, then the socket is closed with 4001', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const token = await mintToken(s.app, w.cad);
  const c = await connect(t, `${s.ws}/api/socket`, { headers: { authorization: bearer(token) } });
  await receiving(s.app, w, c);
  const listed = json<{ id: number }[]>(await s.app.inject({ method: 'GET', url: '/api/session/tokens', headers: { authorization: w.cad } }));
  t.equal(listed.length, 1);
  const res = await s.app.inject({ method: 'DELETE', url: `/api/session/tokens/${listed[0]!.id}`, headers: { authorization: w.cad } });
  t.equal(res.statusCode, 204);
  await endsWithRevoked(t, s.app, w, c);
});

t.test('when the session a user socket was opened with is logged out, then the socket is closed with 4001', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const cookie = cookieOf(await login(s.app, CAD.email, CAD.password));
  const c = await connect(t, `${s.ws}/api/socket`, { headers: { cookie } });
  await receiving(s.app, w, c);
  t.equal((await s.app.inject({ method: 'DELETE', url: '/api/session', headers: { cookie } })).statusCode, 204);
  await endsWithRevoked(t, s.app, w, c);
});

t.test('when the token a user socket was opened with expires, then the socket is closed with 4001', async (t) => {
  const clock = new FakeClock();
  const s = await listen(t, {}, {}, { clock });
  const w = await world(s.app);
  const token = await mintToken(s.app, w.cad, new Date(clock.now().getTime() + 3600_000).toISOString());
  const c = await connect(t, `${s.ws}/api/socket?token=${token}`);
  await receiving(s.app, w, c);
  clock.advance(2 * 3600_000);
  await endsWithRevoked(t, s.app, w, c);
});

t.test('when the user of a socket opened with Basic credentials passes its expirationTime, then the socket is closed with 4001', async (t) => {
  const clock = new FakeClock();
  const s = await listen(t, {}, {}, { clock });
  const w = await world(s.app);
  const c = await connect(t, `${s.ws}/api/socket`, { headers: { authorization: w.cad } });
  await receiving(s.app, w, c);
  const expirationTime = new Date(clock.now().getTime() + 3600_000).toISOString();
  t.equal((await putUser(s.app, adminAuth(), w.cadId, { name: 'CAD', email: CAD.email, expirationTime })).statusCode, 200);
  await receiving(s.app, w, c);
  clock.advance(2 * 3600_000);
  t.equal(await closeCode(c), REVOKED, 'closed with 4001');
});

t.test('when the user of a socket is disabled, then the socket is closed with 4001', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const c = await connect(t, `${s.ws}/api/socket?token=${await mintToken(s.app, w.cad)}`);
  await receiving(s.app, w, c);
  t.equal((await putUser(s.app, adminAuth(), w.cadId, { name: 'CAD', email: CAD.email, disabled: true })).statusCode, 200);
  t.equal(await closeCode(c), REVOKED, 'closed with 4001');
  const seen = c.frames.length;
  await send(s.app, adminAuth(), 'POST', '/api/incidents', incidentBody({ originId: 'AFTER', resources: ['A7'] }));
  await settle();
  t.equal(c.frames.length, seen, 'nothing arrives after the close');
});

t.test('when the user of a socket is deleted, then the socket is closed with 4001', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const c = await connect(t, `${s.ws}/api/socket`, { headers: { authorization: w.cad } });
  await receiving(s.app, w, c);
  t.equal((await s.app.inject({ method: 'DELETE', url: `/api/users/${w.cadId}`, headers: { authorization: adminAuth() } })).statusCode, 204);
  t.equal(await closeCode(c), REVOKED, 'closed with 4001');
});

t.test('when the password of a socket opened with Basic credentials changes, then the socket is closed with 4001', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const c = await connect(t, `${s.ws}/api/socket`, { headers: { authorization: w.cad } });
  await receiving(s.app, w, c);
  t.equal((await putUser(s.app, adminAuth(), w.cadId, { name: 'CAD', email: CAD.email, password: 'a-new-password' })).statusCode, 200);
  t.equal(await closeCode(c), REVOKED, 'closed with 4001');
});

t.test('when the manager link that allowed an impersonation is removed, then a socket opened with that session is closed with 4001', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const managerId = await createUser(s.app, { name: 'Manager', email: 'manager@example.test', password: 'manager-password', userLimit: 5 });
  await grant(s.app, { userId: managerId, managedUserId: w.cadId });
  const opened = await s.app.inject({ method: 'GET', url: `/api/session/${w.cadId}`, headers: { authorization: basic('manager@example.test', 'manager-password') } });
  t.equal(opened.statusCode, 200);
  const c = await connect(t, `${s.ws}/api/socket`, { headers: { cookie: cookieOf(opened) } });
  await receiving(s.app, w, c);
  const removed = await s.app.inject({ method: 'DELETE', url: '/api/permissions', headers: { authorization: adminAuth() }, payload: { userId: managerId, managedUserId: w.cadId } });
  t.equal(removed.statusCode, 204);
  await endsWithRevoked(t, s.app, w, c);
});

t.test('when an administrator is demoted, then its socket stops getting events of devices it no longer reaches from the next event on', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const chiefId = await createUser(s.app, { name: 'Chief', email: 'chief@example.test', password: 'chief-password', administrator: true });
  const chief = basic('chief@example.test', 'chief-password');
  const c = await connect(t, `${s.ws}/api/socket?token=${await mintToken(s.app, chief)}`);
  await receiving(s.app, w, c);
  t.ok(userEvents(c).every((e) => e.deviceId === w.a7), 'as an administrator it saw A7');
  // demoted, still reaching E1's first tablet
  t.equal((await putUser(s.app, adminAuth(), chiefId, { name: 'Chief', email: 'chief@example.test', administrator: false })).statusCode, 200);
  await grant(s.app, { userId: chiefId, deviceId: w.e1a });
  const before = userEvents(c).length;
  const res = await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'AFTER-DEMOTION', resources: ['A7', 'E1'] }));
  t.equal(res.status, 202);
  await until('the E1 event', () => userEvents(c).some((e) => e.deviceId === w.e1a));
  await settle();
  t.same(
    userEvents(c)
      .slice(before)
      .map((e) => e.deviceId),
    [w.e1a],
    'only the device it still reaches; A7 and the other tablet of E1 are no longer its',
  );
  t.equal(c.closed, null, 'its credential still stands: the socket stays open');
});

t.test('when a device token is revoked with POST /session/token/revoke, then the device socket is closed with 4001', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const token = await deviceToken(s.app, w.a7);
  const c = await connect(t, `${s.ws}/api/socket/device?token=${token}`);
  await alertA7(s.app, w);
  await until('the push', () => c.frames.length === 1);
  const res = await s.app.inject({ method: 'POST', url: '/api/session/token/revoke', headers: { ...FORM, authorization: w.cad }, payload: formBody({ token }) });
  t.equal(res.statusCode, 204);
  t.equal(await closeCode(c), REVOKED, 'closed with 4001');
  await alertA7(s.app, w);
  await settle();
  t.equal(c.frames.length, 1, 'nothing arrives after the close');
});

t.test('when the user token a device token was minted with expires or is revoked, then the device socket is closed with 4001', async (t) => {
  const clock = new FakeClock();
  const s = await listen(t, {}, {}, { clock });
  const w = await world(s.app);
  const parents = [await mintToken(s.app, w.cad, new Date(clock.now().getTime() + 3600_000).toISOString()), await mintToken(s.app, w.cad)];
  const [expiring, revoked] = await Promise.all(
    [w.a7, w.e1a].map(async (deviceId, i) => connect(t, `${s.ws}/api/socket/device?token=${await deviceToken(s.app, deviceId, bearer(parents[i]!))}`)),
  );
  const res = await s.app.inject({ method: 'POST', url: '/api/session/token/revoke', headers: { ...FORM, authorization: w.cad }, payload: formBody({ token: parents[1]! }) });
  t.equal(res.statusCode, 204);
  t.equal(await closeCode(revoked!), REVOKED, 'the parent revoked: closed with 4001');
  await settle();
  t.equal(expiring!.closed, null, 'the other parent stands');
  clock.advance(2 * 3600_000);
  t.equal(await closeCode(expiring!), REVOKED, 'the parent expired: closed with 4001');
});

t.test('when a device is disabled or deleted, then its socket is closed with 4001 and a disabled device cannot connect', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const a7Token = await deviceToken(s.app, w.a7);
  const a7 = await connect(t, `${s.ws}/api/socket/device?token=${a7Token}`);
  const e1 = await connect(t, `${s.ws}/api/socket/device?token=${await deviceToken(s.app, w.e1a)}`);
  const put = await s.app.inject({ method: 'PUT', url: `/api/devices/${w.a7}`, headers: { authorization: adminAuth() }, payload: { name: 'A7', uniqueId: 'a7', disabled: true } });
  t.equal(put.statusCode, 200);
  t.equal(await closeCode(a7), REVOKED, 'the disabled device is closed with 4001');
  await t.rejects(connect(t, `${s.ws}/api/socket/device?token=${a7Token}`), { message: 'HTTP 401' }, 'a disabled device is refused at the upgrade');
  t.equal((await s.app.inject({ method: 'DELETE', url: `/api/devices/${w.e1a}`, headers: { authorization: adminAuth() } })).statusCode, 204);
  t.equal(await closeCode(e1), REVOKED, 'the deleted device is closed with 4001');
  await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'AFTER', resources: ['A7', 'E1'] }));
  await settle();
  t.equal(a7.frames.length + e1.frames.length, 0, 'nothing arrives after the close');
});

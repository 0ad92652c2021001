// Sessions: GET /session (who am I, by cookie, Basic, Bearer or ?token=, and the session a
// token opens). The interface's Session and Authentication sections, DESIGN sections 3 and 4.
// Split from session.test.ts (2026-11-29, issue 37).
import t from 'tap';
import { ADMIN, FakeClock, adminAuth, basic, bearer, createUser, json, makeApp, mintToken } from '../fixtures/app.js';
import {
  HOUR,
  PROBLEM_JSON,
  SECOND,
  SECRET_RE,
  cookieOf,
  cookieStatus,
  loginCookie,
  revoke,
  sessionSetCookie,
  whoami,
} from '../fixtures/session.js';

const U = { email: 'u@example.test', password: 'u-password-1' };

t.test('GET /session', async (t) => {
  t.test('when a session cookie is sent, then 200 with the session\'s user and no new cookie', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'U', ...U });
    const res = await whoami(app, { cookie: await loginCookie(app, U.email, U.password) });
    t.equal(res.statusCode, 200);
    t.has(json(res), { id, email: U.email, administrator: false });
    t.equal(sessionSetCookie(res), undefined);
  });

  t.test('when valid Basic credentials are sent, then 200 with that user', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'U', ...U });
    const res = await whoami(app, { authorization: basic(U.email, U.password) });
    t.equal(res.statusCode, 200);
    t.equal(json(res).id, id);
    t.equal(sessionSetCookie(res), undefined, 'Basic opens no session');
  });

  t.test('when a valid Bearer token is sent, then 200 with the token\'s user', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'U', ...U });
    const token = await mintToken(app, basic(U.email, U.password));
    const res = await whoami(app, { authorization: bearer(token) });
    t.equal(res.statusCode, 200);
    t.equal(json(res).id, id);
  });

  t.test('when the Authorization header does not authenticate, then 401 problem+json (not 404)', async (t) => {
    const { app } = await makeApp(t);
    const bad = {
      'wrong Basic password': basic(ADMIN.email, 'nope'),
      'unknown Basic user': basic('nobody@example.test', 'nope'),
      'unknown Bearer token': bearer('A'.repeat(43)),
      'malformed Bearer token': 'Bearer not-a-token',
      'empty Bearer': 'Bearer',
      'unsupported scheme': 'Digest username="admin"',
    };
    for (const [what, authorization] of Object.entries(bad)) {
      const res = await whoami(app, { authorization });
      t.equal(res.statusCode, 401, what);
      t.equal(res.headers['content-type'], PROBLEM_JSON, what);
      t.equal(json(res).type, 'urn:cad-incident:problem:unauthorized', what);
    }
  });

  t.test('when a bad Authorization header comes with a good cookie, then 401: the header is not ignored', async (t) => {
    const { app } = await makeApp(t);
    const cookie = await loginCookie(app, ADMIN.email, ADMIN.password);
    t.equal((await whoami(app, { cookie, authorization: basic(ADMIN.email, 'nope') })).statusCode, 401);
  });

  t.test('when nothing identifies the caller, then 404 problem+json', async (t) => {
    const { app } = await makeApp(t);
    const res = await whoami(app);
    t.equal(res.statusCode, 404);
    t.equal(res.headers['content-type'], PROBLEM_JSON);
    t.has(json(res), { type: 'urn:cad-incident:problem:not-found', status: 404 });
  });

  t.test('when the cookie is unknown or malformed, then 404', async (t) => {
    const { app } = await makeApp(t);
    t.equal(await cookieStatus(app, `JSESSIONID=${'A'.repeat(43)}`), 404, 'well-formed but unknown');
    t.equal(await cookieStatus(app, 'JSESSIONID=forged'), 404, 'malformed');
    t.equal(await cookieStatus(app, 'JSESSIONID='), 404, 'empty');
  });

  t.test('when ?token= is a valid token, then 200 with its user and a session cookie that works on its own', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'U', ...U });
    const token = await mintToken(app, basic(U.email, U.password));
    const res = await whoami(app, {}, `?token=${token}`);
    t.equal(res.statusCode, 200);
    t.equal(json(res).id, id);
    const line = sessionSetCookie(res)!;
    t.match(line, /^JSESSIONID=[A-Za-z0-9_-]{43};/);
    t.match(line, /HttpOnly/);
    t.match(line, /SameSite=Lax/);
    const me = await whoami(app, { cookie: cookieOf(res) });
    t.equal(me.statusCode, 200);
    t.equal(json(me).id, id);
  });

  t.test('when ?token= is unknown or garbage, then 401 problem+json and no cookie', async (t) => {
    const { app } = await makeApp(t);
    for (const token of ['garbage', 'A'.repeat(43)]) {
      const res = await whoami(app, {}, `?token=${token}`);
      t.equal(res.statusCode, 401, token);
      t.equal(res.headers['content-type'], PROBLEM_JSON);
      t.equal(sessionSetCookie(res), undefined);
    }
  });

  t.test('when ?token= has expired, then 401', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    const token = await mintToken(app, adminAuth(), new Date(clock.now().getTime() + HOUR).toISOString());
    t.equal((await whoami(app, {}, `?token=${token}`)).statusCode, 200, 'valid before');
    clock.advance(HOUR + SECOND);
    const res = await whoami(app, {}, `?token=${token}`);
    t.equal(res.statusCode, 401);
    t.equal(sessionSetCookie(res), undefined);
  });

  t.test('when ?token= was revoked, then 401', async (t) => {
    const { app } = await makeApp(t);
    const token = await mintToken(app, adminAuth());
    t.equal((await revoke(app, { authorization: adminAuth() }, token)).statusCode, 204);
    const res = await whoami(app, {}, `?token=${token}`);
    t.equal(res.statusCode, 401);
    t.equal(sessionSetCookie(res), undefined);
  });

  t.test('when ?token= is a device token, then 401: device tokens are not user logins', async (t) => {
    const { app } = await makeApp(t);
    const dev = await app.inject({ method: 'POST', url: '/api/devices', headers: { authorization: adminAuth() }, payload: { name: 'E1', uniqueId: 'e1' } });
    const token = (await app.inject({ method: 'POST', url: `/api/devices/${json(dev).id}/token`, headers: { authorization: adminAuth() } })).body;
    t.match(token, SECRET_RE);
    t.equal((await whoami(app, {}, `?token=${token}`)).statusCode, 401);
    t.equal((await whoami(app, { authorization: bearer(token) })).statusCode, 401);
  });

  t.test('when ?token= is empty, then 400', async (t) => {
    const { app } = await makeApp(t);
    const res = await whoami(app, {}, '?token=');
    t.equal(res.statusCode, 400);
    t.equal(json(res).errors[0].path, '/query/token');
  });

  t.test('when the token a session was opened with is revoked, then the session ends', async (t) => {
    const { app } = await makeApp(t);
    const token = await mintToken(app, adminAuth());
    const cookie = cookieOf(await whoami(app, {}, `?token=${token}`));
    t.equal(await cookieStatus(app, cookie), 200);
    await revoke(app, { authorization: adminAuth() }, token);
    t.equal(await cookieStatus(app, cookie), 404);
  });

  t.test('when the token a session was opened with expires, then the session ends with it', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    const token = await mintToken(app, adminAuth(), new Date(clock.now().getTime() + 2 * HOUR).toISOString());
    const cookie = cookieOf(await whoami(app, {}, `?token=${token}`));
    clock.advance(HOUR);
    t.equal(await cookieStatus(app, cookie), 200, 'still within the token\'s life');
    clock.advance(HOUR + SECOND);
    t.equal(await cookieStatus(app, cookie), 404, 'the session ends with its token, not after 7 idle days');
  });
});

// Sessions: GET /session/{id}, a session opened as another user (who may, and how such a session
// ends with its impersonator or its token). The interface's Session section, DESIGN section 4.
// Split from session.test.ts (2026-11-29, issue 37).
import t, { type Test } from 'tap';
import { adminAuth, basic, bearer, createUser, json, makeApp, mintToken } from '../fixtures/app.js';
import { PROBLEM_JSON, cookieOf, cookieStatus, putUser, revoke, sessionSetCookie, whoami } from '../fixtures/session.js';

t.test('GET /session/{id}', async (t) => {
  // admin (1), manager M (userLimit 5) managing plain P and sub-manager S, stranger X
  async function world(t: Test) {
    const { app } = await makeApp(t);
    const managerId = await createUser(app, { name: 'M', email: 'm@example.test', password: 'm-password-1', userLimit: 5 });
    const m = basic('m@example.test', 'm-password-1');
    const plainId = await createUser(app, { name: 'P', email: 'p@example.test', password: 'p-password-1' }, m);
    const subManagerId = await createUser(app, { name: 'S', email: 's@example.test', password: 's-password-1' }, m);
    await putUser(app, adminAuth(), subManagerId, { name: 'S', email: 's@example.test', userLimit: 1 });
    const strangerId = await createUser(app, { name: 'X', email: 'x@example.test', password: 'x-password-1' });
    return { app, managerId, m, plainId, p: basic('p@example.test', 'p-password-1'), subManagerId, strangerId };
  }
  const open = (app: Awaited<ReturnType<typeof world>>['app'], id: number, headers: Record<string, string>) =>
    app.inject({ method: 'GET', url: `/api/session/${id}`, headers });

  t.test('when an administrator opens a session as a user, then 200 with that user and the new cookie acts as that user', async (t) => {
    const w = await world(t);
    const res = await open(w.app, w.plainId, { authorization: adminAuth() });
    t.equal(res.statusCode, 200);
    t.has(json(res), { id: w.plainId, email: 'p@example.test' });
    const cookie = cookieOf(res);
    const me = await whoami(w.app, { cookie });
    t.equal(json(me).id, w.plainId, 'GET /session answers the impersonated user');
    const users = json(await w.app.inject({ method: 'GET', url: '/api/users', headers: { cookie } }));
    t.same(users.map((u: { id: number }) => u.id), [w.plainId], 'and acts with its rights, not the admin\'s');
  });

  t.test('when an administrator opens a session as another administrator, then 200', async (t) => {
    const w = await world(t);
    const other = await createUser(w.app, { name: 'A2', email: 'a2@example.test', password: 'a2-password-1', administrator: true });
    t.equal((await open(w.app, other, { authorization: adminAuth() })).statusCode, 200);
  });

  t.test('when a manager opens a session as a plain user it manages, then 200 and the cookie acts as that user', async (t) => {
    const w = await world(t);
    const res = await open(w.app, w.plainId, { authorization: w.m });
    t.equal(res.statusCode, 200);
    t.equal(json(await whoami(w.app, { cookie: cookieOf(res) })).id, w.plainId);
  });

  t.test('when a manager asks for an administrator, then 401 and no cookie', async (t) => {
    const w = await world(t);
    const res = await open(w.app, 1, { authorization: w.m });
    t.equal(res.statusCode, 401);
    t.equal(res.headers['content-type'], PROBLEM_JSON);
    t.equal(json(res).type, 'urn:cad-incident:problem:unauthorized');
    t.equal(sessionSetCookie(res), undefined);
  });

  t.test('when a manager asks for a user it does not manage, then 401', async (t) => {
    const w = await world(t);
    const res = await open(w.app, w.strangerId, { authorization: w.m });
    t.equal(res.statusCode, 401);
    t.equal(sessionSetCookie(res), undefined);
  });

  t.test('when a manager asks for a managed user who is itself a manager, then 401', async (t) => {
    const w = await world(t);
    t.equal((await open(w.app, w.subManagerId, { authorization: w.m })).statusCode, 401);
  });

  t.test('when a plain user asks for another user, then 401', async (t) => {
    const w = await world(t);
    for (const id of [w.managerId, w.strangerId, 1]) {
      const res = await open(w.app, id, { authorization: w.p });
      t.equal(res.statusCode, 401, `user ${id}`);
      t.equal(sessionSetCookie(res), undefined);
    }
  });

  t.test('when a user asks for itself, then 200 and a session as itself', async (t) => {
    const w = await world(t);
    const res = await open(w.app, w.plainId, { authorization: w.p });
    t.equal(res.statusCode, 200);
    t.equal(json(res).id, w.plainId);
    t.equal(json(await whoami(w.app, { cookie: cookieOf(res) })).id, w.plainId);
  });

  t.test('when the id is unknown, then 404 problem+json', async (t) => {
    const w = await world(t);
    const res = await open(w.app, 9999, { authorization: adminAuth() });
    t.equal(res.statusCode, 404);
    t.equal(res.headers['content-type'], PROBLEM_JSON);
    t.equal(json(res).type, 'urn:cad-incident:problem:not-found');
  });

  t.test('when nobody is logged in, then 401 with the challenge', async (t) => {
    const w = await world(t);
    const res = await open(w.app, w.plainId, {});
    t.equal(res.statusCode, 401);
    t.equal(res.headers['www-authenticate'], 'Basic realm="api", Bearer');
  });

  t.test('when the target user is disabled, then even an administrator gets 401', async (t) => {
    const w = await world(t);
    await putUser(w.app, adminAuth(), w.plainId, { name: 'P', email: 'p@example.test', disabled: true });
    const res = await open(w.app, w.plainId, { authorization: adminAuth() });
    t.equal(res.statusCode, 401);
    t.equal(sessionSetCookie(res), undefined);
  });

  t.test('when the impersonator is disabled, then the impersonation session ends', async (t) => {
    const w = await world(t);
    const cookie = cookieOf(await open(w.app, w.plainId, { authorization: w.m }));
    t.equal(await cookieStatus(w.app, cookie), 200);
    await putUser(w.app, adminAuth(), w.managerId, { name: 'M', email: 'm@example.test', disabled: true });
    t.equal(await cookieStatus(w.app, cookie), 404);
  });

  t.test('when an impersonation session opens a session as its own user, then that session still ends with the impersonator', async (t) => {
    const w = await world(t);
    const first = cookieOf(await open(w.app, w.plainId, { authorization: w.m }));
    const second = cookieOf(await open(w.app, w.plainId, { cookie: first }));
    t.equal(await cookieStatus(w.app, second), 200);
    await putUser(w.app, adminAuth(), w.managerId, { name: 'M', email: 'm@example.test', disabled: true });
    t.equal(await cookieStatus(w.app, first), 404);
    t.equal(await cookieStatus(w.app, second), 404, 'the re-opened session ends too');
  });

  t.test('when an impersonated manager opens a session as a user it manages, then that session ends with the original impersonator', async (t) => {
    const w = await world(t);
    await createUser(w.app, { name: 'A2', email: 'a2@example.test', password: 'a2-password-1', administrator: true });
    const asManager = cookieOf(await open(w.app, w.managerId, { authorization: basic('a2@example.test', 'a2-password-1') }));
    const asPlain = cookieOf(await open(w.app, w.plainId, { cookie: asManager }));
    t.equal(await cookieStatus(w.app, asPlain), 200, 'the chained session works');
    const a2 = json(await w.app.inject({ method: 'GET', url: '/api/users', headers: { authorization: adminAuth() } })).find((u: { email: string }) => u.email === 'a2@example.test');
    await putUser(w.app, adminAuth(), a2.id, { name: 'A2', email: 'a2@example.test', disabled: true });
    t.equal(await cookieStatus(w.app, asManager), 404, 'the first session ends with its impersonator');
    t.equal(await cookieStatus(w.app, asPlain), 404, 'and so does the one opened from it');
  });

  t.test('when a token holder opens a session with GET /session/{id}, then the session ends when that token is revoked', async (t) => {
    const w = await world(t);
    const token = await mintToken(w.app, adminAuth());
    const cookie = cookieOf(await open(w.app, 1, { authorization: bearer(token) }));
    t.equal(await cookieStatus(w.app, cookie), 200);
    t.equal((await revoke(w.app, { authorization: adminAuth() }, token)).statusCode, 204);
    t.equal(await cookieStatus(w.app, cookie), 404, 'the session opened with the token ends with it');
  });
});

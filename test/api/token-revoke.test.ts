// Access tokens: POST /session/token/revoke, and the token page's list and revoke-by-id
// (GET /session/tokens, DELETE /session/tokens/{id}). The interface's Session and Authentication
// sections, DESIGN section 3. Split from token.test.ts (2026-11-29, issue 37).
import t from 'tap';
import { FakeClock, adminAuth, basic, bearer, createUser, json, makeApp, mintToken } from '../fixtures/app.js';
import { FORM, PROBLEM_JSON, SECOND, bearerStatus, cookieOf, cookieStatus, mint, revoke, whoami } from '../fixtures/session.js';

const U = { email: 'u@example.test', password: 'u-password-1' };

t.test('POST /session/token/revoke', async (t) => {
  t.test('when a known token is revoked, then 204 with no body and the token is refused afterwards', async (t) => {
    const { app } = await makeApp(t);
    const token = await mintToken(app, adminAuth());
    t.equal(await bearerStatus(app, token), 200);
    const res = await revoke(app, { authorization: adminAuth() }, token);
    t.equal(res.statusCode, 204);
    t.equal(res.body, '');
    const after = await whoami(app, { authorization: bearer(token) });
    t.equal(after.statusCode, 401);
    t.equal(after.headers['content-type'], PROBLEM_JSON);
    t.equal((await mint(app, { authorization: bearer(token) })).statusCode, 401, 'it mints nothing either');
  });

  t.test('when a token revokes itself, then 204 and it is refused afterwards', async (t) => {
    const { app } = await makeApp(t);
    const token = await mintToken(app, adminAuth());
    t.equal((await revoke(app, { authorization: bearer(token) }, token)).statusCode, 204);
    t.equal(await bearerStatus(app, token), 401);
  });

  t.test('when a token is revoked again, then 204 again', async (t) => {
    const { app } = await makeApp(t);
    const token = await mintToken(app, adminAuth());
    t.equal((await revoke(app, { authorization: adminAuth() }, token)).statusCode, 204);
    t.equal((await revoke(app, { authorization: adminAuth() }, token)).statusCode, 204);
    t.equal(await bearerStatus(app, token), 401);
  });

  t.test('when one token is revoked, then the user\'s other tokens keep working', async (t) => {
    const { app } = await makeApp(t);
    const a = await mintToken(app, adminAuth());
    const b = await mintToken(app, adminAuth());
    await revoke(app, { authorization: adminAuth() }, a);
    t.equal(await bearerStatus(app, a), 401);
    t.equal(await bearerStatus(app, b), 200);
  });

  t.test('when the holder of another user\'s token revokes it, then 204: holding it proves authority', async (t) => {
    const { app } = await makeApp(t);
    await createUser(app, { name: 'U', ...U });
    const token = await mintToken(app, basic(U.email, U.password));
    t.equal((await revoke(app, { authorization: adminAuth() }, token)).statusCode, 204);
    t.equal(await bearerStatus(app, token), 401);
  });

  t.test('when the token is unknown, then 400 problem+json naming /body/token', async (t) => {
    const { app } = await makeApp(t);
    const res = await revoke(app, { authorization: adminAuth() }, 'A'.repeat(43));
    t.equal(res.statusCode, 400);
    t.equal(res.headers['content-type'], PROBLEM_JSON);
    t.has(json(res), { type: 'urn:cad-incident:problem:invalid-request', status: 400 });
    t.equal(json(res).errors[0].path, '/body/token');
  });

  t.test('when the token is malformed, then 400', async (t) => {
    const { app } = await makeApp(t);
    for (const token of ['not a token', 'x', 'A'.repeat(42), 'A'.repeat(44), 'A'.repeat(600)]) {
      const res = await revoke(app, { authorization: adminAuth() }, token);
      t.equal(res.statusCode, 400, `${token.slice(0, 12)}… (${token.length})`);
      t.equal(res.headers['content-type'], PROBLEM_JSON);
    }
  });

  t.test('when the form has no token, then 400 naming /body/token', async (t) => {
    const { app } = await makeApp(t);
    const res = await app.inject({ method: 'POST', url: '/api/session/token/revoke', headers: { ...FORM, authorization: adminAuth() }, payload: '' });
    t.equal(res.statusCode, 400);
    t.equal(res.headers['content-type'], PROBLEM_JSON);
    t.same(json(res).errors, [{ path: '/body/token', message: 'is required' }]);
  });

  t.test('when the token field is empty, then 400 naming /body/token', async (t) => {
    const { app } = await makeApp(t);
    const res = await revoke(app, { authorization: adminAuth() }, '');
    t.equal(res.statusCode, 400);
    t.equal(json(res).errors[0].path, '/body/token');
  });

  t.test('when called without credentials, then 401 and the token keeps working', async (t) => {
    const { app } = await makeApp(t);
    const token = await mintToken(app, adminAuth());
    const res = await revoke(app, {}, token);
    t.equal(res.statusCode, 401);
    t.equal(res.headers['www-authenticate'], 'Basic realm="api", Bearer');
    t.equal(await bearerStatus(app, token), 200);
  });

  t.test('when a token is revoked, then a session opened with it ends too', async (t) => {
    const { app } = await makeApp(t);
    const token = await mintToken(app, adminAuth());
    const cookie = cookieOf(await whoami(app, {}, `?token=${token}`));
    await revoke(app, { authorization: adminAuth() }, token);
    t.equal(await cookieStatus(app, cookie), 404);
  });
});

t.test('the token page: GET /session/tokens and DELETE /session/tokens/{id}', async (t) => {
  t.test('when a user lists its tokens, then only its own, newest first, without the token values', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    await createUser(app, { name: 'U', ...U });
    const u = basic(U.email, U.password);
    const older = await mintToken(app, u);
    clock.advance(SECOND);
    const newer = await mintToken(app, u, '2026-12-01T00:00:00Z');
    await mintToken(app, adminAuth());
    const res = await app.inject({ method: 'GET', url: '/api/session/tokens', headers: { authorization: u } });
    t.equal(res.statusCode, 200);
    const list = json(res);
    t.equal(list.length, 2);
    t.has(list[0], { expiresAt: '2026-12-01T00:00:00.000Z', revokedAt: null, active: true });
    t.ok(list[0].id > list[1].id, 'newest first');
    t.notOk(res.body.includes(older) || res.body.includes(newer), 'token values are never listed');
  });

  t.test('when a user revokes its own token by id, then 204, it is refused and listed inactive', async (t) => {
    const { app } = await makeApp(t);
    await createUser(app, { name: 'U', ...U });
    const u = basic(U.email, U.password);
    const token = await mintToken(app, u);
    const [info] = json(await app.inject({ method: 'GET', url: '/api/session/tokens', headers: { authorization: u } }));
    t.equal((await app.inject({ method: 'DELETE', url: `/api/session/tokens/${info.id}`, headers: { authorization: u } })).statusCode, 204);
    t.equal(await bearerStatus(app, token), 401);
    const [after] = json(await app.inject({ method: 'GET', url: '/api/session/tokens', headers: { authorization: u } }));
    t.equal(after.active, false);
    t.type(after.revokedAt, 'string');
  });

  t.test("when a user revokes another user's token by id, then 404 and the token keeps working", async (t) => {
    const { app } = await makeApp(t);
    await createUser(app, { name: 'U', ...U });
    const adminToken = await mintToken(app, adminAuth());
    const [info] = json(await app.inject({ method: 'GET', url: '/api/session/tokens', headers: { authorization: adminAuth() } }));
    const res = await app.inject({ method: 'DELETE', url: `/api/session/tokens/${info.id}`, headers: { authorization: basic(U.email, U.password) } });
    t.equal(res.statusCode, 404);
    t.equal(res.headers['content-type'], PROBLEM_JSON);
    t.equal(await bearerStatus(app, adminToken), 200);
  });
});

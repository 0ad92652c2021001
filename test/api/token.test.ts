// Access tokens: POST /session/token (minting, lifetime, the cap for token holders),
// POST /session/token/revoke, the token page's list and revoke-by-id, and the user states
// that refuse tokens. The interface's Session and Authentication sections, DESIGN section 3.
import t from 'tap';
import { ADMIN, FakeClock, adminAuth, basic, bearer, createUser, json, makeApp, mintToken } from '../fixtures/app.js';
import {
  DAY,
  FORM,
  HOUR,
  PROBLEM_JSON,
  SECOND,
  SECRET_RE,
  bearerStatus,
  cookieOf,
  cookieStatus,
  formBody,
  loginCookie,
  mint,
  putUser,
  revoke,
  whoami,
} from '../fixtures/session.js';

const U = { email: 'u@example.test', password: 'u-password-1' };
const iso = (ms: number) => new Date(ms).toISOString();


t.test('POST /session/token', async (t) => {
  t.test('when called with a session cookie, then 200 text/plain with a 43-character base64url token that works as Bearer', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'U', ...U });
    const res = await mint(app, { cookie: await loginCookie(app, U.email, U.password) });
    t.equal(res.statusCode, 200);
    t.equal(res.headers['content-type'], 'text/plain; charset=utf-8');
    t.match(res.body, SECRET_RE);
    const me = await whoami(app, { authorization: bearer(res.body) });
    t.equal(me.statusCode, 200);
    t.equal(json(me).id, id, "the token is the caller's");
  });

  t.test('when called with Basic credentials, then 200 and a token that works as Bearer', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'U', ...U });
    const res = await mint(app, { authorization: basic(U.email, U.password) });
    t.equal(res.statusCode, 200);
    t.match(res.body, SECRET_RE);
    t.equal(json(await whoami(app, { authorization: bearer(res.body) })).id, id);
  });

  t.test('when called with a Bearer token, then 200 and a new, different token that works as Bearer', async (t) => {
    const { app } = await makeApp(t);
    const first = await mintToken(app, adminAuth());
    const res = await mint(app, { authorization: bearer(first) });
    t.equal(res.statusCode, 200);
    t.match(res.body, SECRET_RE);
    t.not(res.body, first);
    t.equal(json(await whoami(app, { authorization: bearer(res.body) })).email, ADMIN.email);
  });

  t.test('when called with no body and no Content-Type, then 200: the form is optional', async (t) => {
    const { app } = await makeApp(t);
    const res = await app.inject({ method: 'POST', url: '/api/session/token', headers: { authorization: adminAuth() } });
    t.equal(res.statusCode, 200);
    t.match(res.body, SECRET_RE);
  });

  t.test('when tokens are minted repeatedly, then each is new and each works', async (t) => {
    const { app } = await makeApp(t);
    const tokens = new Set<string>();
    for (let i = 0; i < 5; i++) tokens.add(await mintToken(app, adminAuth()));
    t.equal(tokens.size, 5);
    for (const token of tokens) t.equal(await bearerStatus(app, token), 200);
  });

  t.test('when no expiration is given, then the token works at 6 days 23 hours and is refused after 7 days', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    const token = await mintToken(app, adminAuth());
    clock.advance(6 * DAY + 23 * HOUR);
    t.equal(await bearerStatus(app, token), 200);
    clock.advance(HOUR + SECOND);
    const res = await whoami(app, { authorization: bearer(token) });
    t.equal(res.statusCode, 401);
    t.equal(res.headers['content-type'], PROBLEM_JSON);
  });

  t.test('when TOKEN_DEFAULT_DAYS is 1, then a token without expiration lasts one day', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock, config: { tokenDefaultDays: 1 } });
    const token = await mintToken(app, adminAuth());
    clock.advance(DAY - SECOND);
    t.equal(await bearerStatus(app, token), 200);
    clock.advance(2 * SECOND);
    t.equal(await bearerStatus(app, token), 401);
  });

  t.test('when expiration is in the future, then the token works until that instant and not after', async (t) => {
    const clock = new FakeClock(); // 2026-11-22T12:00:00Z
    const { app } = await makeApp(t, { clock });
    const token = await mintToken(app, adminAuth(), '2026-11-22T15:00:00+02:00'); // 13:00Z
    clock.advance(HOUR - SECOND);
    t.equal(await bearerStatus(app, token), 200, 'the offset is honoured: 12:59:59Z');
    clock.advance(SECOND);
    t.equal(await bearerStatus(app, token), 401, 'refused at 13:00:00Z');
  });

  t.test('when expiration is far beyond the default, then it is honoured for a password-authenticated caller', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    const token = await mintToken(app, adminAuth(), '2027-11-22T12:00:00Z');
    clock.advance(300 * DAY);
    t.equal(await bearerStatus(app, token), 200);
  });

  t.test('when expiration is in the past, then 400 problem+json naming /body/expiration', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    for (const v of ['2020-01-01T00:00:00Z', iso(clock.now().getTime() - SECOND), iso(clock.now().getTime())]) {
      const res = await mint(app, { authorization: adminAuth() }, v);
      t.equal(res.statusCode, 400, v);
      t.equal(res.headers['content-type'], PROBLEM_JSON);
      t.has(json(res), { type: 'urn:cad-incident:problem:invalid-request', status: 400 });
      t.equal(json(res).errors[0].path, '/body/expiration', v);
    }
  });

  t.test('when expiration is not a date-time, then 400 naming /body/expiration', async (t) => {
    const { app } = await makeApp(t);
    for (const v of ['tomorrow', '2026-11-23', '2026-11-23T10:00:00', '2026-13-45T00:00:00Z', '1700000000', '']) {
      const res = await mint(app, { authorization: adminAuth() }, v);
      t.equal(res.statusCode, 400, JSON.stringify(v));
      t.equal(res.headers['content-type'], PROBLEM_JSON);
      t.equal(json(res).errors[0].path, '/body/expiration', JSON.stringify(v));
    }
  });

  t.test('when the form has a field it does not know, then 400', async (t) => {
    const { app } = await makeApp(t);
    const res = await app.inject({ method: 'POST', url: '/api/session/token', headers: { ...FORM, authorization: adminAuth() }, payload: formBody({ expires: '2027-01-01T00:00:00Z' }) });
    t.equal(res.statusCode, 400);
    t.equal(json(res).errors[0].path, '/body/expires');
  });

  t.test('when a Bearer caller asks for a later expiry, then the new token stops working when the first one expires', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    const first = await mintToken(app, adminAuth(), iso(clock.now().getTime() + HOUR));
    const res = await mint(app, { authorization: bearer(first) }, '2030-01-01T00:00:00Z');
    t.equal(res.statusCode, 200, 'asking is not an error');
    const second = res.body;
    clock.advance(HOUR - SECOND);
    t.equal(await bearerStatus(app, second), 200);
    clock.advance(2 * SECOND);
    t.equal(await bearerStatus(app, first), 401);
    t.equal(await bearerStatus(app, second), 401, 'capped at the first token\'s expiry');
  });

  t.test('when a Bearer caller gives no expiration, then the new token is capped at its own token\'s expiry', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    const first = await mintToken(app, adminAuth(), iso(clock.now().getTime() + 2 * HOUR));
    const second = await mintToken(app, bearer(first));
    clock.advance(2 * HOUR + SECOND);
    t.equal(await bearerStatus(app, second), 401);
  });

  t.test('when a Bearer caller asks for an earlier expiry, then that earlier expiry holds', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    const first = await mintToken(app, adminAuth(), iso(clock.now().getTime() + 2 * HOUR));
    const second = await mintToken(app, bearer(first), iso(clock.now().getTime() + HOUR));
    clock.advance(HOUR + SECOND);
    t.equal(await bearerStatus(app, first), 200);
    t.equal(await bearerStatus(app, second), 401);
  });

  t.test('when a session opened with ?token= asks for a later expiry, then the new token is capped too', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    const first = await mintToken(app, adminAuth(), iso(clock.now().getTime() + HOUR));
    const cookie = cookieOf(await whoami(app, {}, `?token=${first}`));
    const res = await mint(app, { cookie }, '2030-01-01T00:00:00Z');
    t.equal(res.statusCode, 200);
    clock.advance(HOUR + SECOND);
    t.equal(await bearerStatus(app, res.body), 401);
  });

  t.test('when a session opened by password login asks for a far expiry, then it is not capped', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    const cookie = await loginCookie(app, ADMIN.email, ADMIN.password);
    const token = (await mint(app, { cookie }, '2027-01-01T00:00:00Z')).body;
    clock.advance(30 * DAY);
    t.equal(await bearerStatus(app, token), 200);
  });

  t.test('when a token holder opens a session with GET /session/{id} and mints from it, then the new token is still capped', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    const first = await mintToken(app, adminAuth(), iso(clock.now().getTime() + HOUR));
    const opened = await app.inject({ method: 'GET', url: '/api/session/1', headers: { authorization: bearer(first) } });
    t.equal(opened.statusCode, 200);
    const res = await mint(app, { cookie: cookieOf(opened) }, '2030-01-01T00:00:00Z');
    t.equal(res.statusCode, 200);
    clock.advance(HOUR + SECOND);
    t.equal(await bearerStatus(app, first), 401);
    t.equal(await bearerStatus(app, res.body), 401, "capped at the first token's expiry");
  });

  t.test('when called without credentials, then 401 problem+json with WWW-Authenticate offering Basic and Bearer', async (t) => {
    const { app } = await makeApp(t);
    const res = await app.inject({ method: 'POST', url: '/api/session/token', headers: FORM, payload: '' });
    t.equal(res.statusCode, 401);
    t.equal(res.headers['content-type'], PROBLEM_JSON);
    t.equal(json(res).type, 'urn:cad-incident:problem:unauthorized');
    const challenge = String(res.headers['www-authenticate']);
    t.match(challenge, /\bBasic\b/);
    t.match(challenge, /\bBearer\b/);
    t.equal(challenge, 'Basic realm="api", Bearer');
  });

  t.test('when called with wrong credentials, then 401 and no token', async (t) => {
    const { app } = await makeApp(t);
    for (const authorization of [basic(ADMIN.email, 'wrong'), bearer('A'.repeat(43))]) {
      const res = await mint(app, { authorization });
      t.equal(res.statusCode, 401, authorization.split(' ')[0]!);
      t.equal(res.headers['content-type'], PROBLEM_JSON);
    }
    t.equal((await mint(app, { cookie: `JSESSIONID=${'A'.repeat(43)}` })).statusCode, 401, 'unknown session cookie');
  });

  t.test('when credentials are missing, then 401 comes before the body is validated', async (t) => {
    const { app } = await makeApp(t);
    t.equal((await mint(app, {}, 'not-a-date')).statusCode, 401);
  });
});

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

t.test('user state refuses tokens', async (t) => {
  t.test('when the user is disabled, then its tokens are refused (401)', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'U', ...U });
    const token = await mintToken(app, basic(U.email, U.password));
    t.equal(await bearerStatus(app, token), 200);
    t.equal((await putUser(app, adminAuth(), id, { name: 'U', email: U.email, disabled: true })).statusCode, 200);
    t.equal(await bearerStatus(app, token), 401);
    t.equal((await whoami(app, {}, `?token=${token}`)).statusCode, 401, '?token= too');
  });

  t.test('when the user is past its expirationTime, then its tokens are refused (401)', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    await createUser(app, { name: 'U', ...U, expirationTime: '2026-11-23T12:00:00Z' });
    const token = await mintToken(app, basic(U.email, U.password));
    clock.advance(DAY - SECOND);
    t.equal(await bearerStatus(app, token), 200, 'before the user expires');
    clock.advance(2 * SECOND);
    t.equal(await bearerStatus(app, token), 401, 'after, although the token itself has days left');
    t.equal((await whoami(app, {}, `?token=${token}`)).statusCode, 401, '?token= too');
  });

  t.test('when the user gets an expirationTime in the past, then its tokens are refused at once', async (t) => {
    const { app } = await makeApp(t, { clock: new FakeClock() });
    const id = await createUser(app, { name: 'U', ...U });
    const token = await mintToken(app, basic(U.email, U.password));
    t.equal(await bearerStatus(app, token), 200);
    await putUser(app, adminAuth(), id, { name: 'U', email: U.email, expirationTime: '2026-01-01T00:00:00Z' });
    t.equal(await bearerStatus(app, token), 401);
  });

  t.test('when the user is deleted, then its tokens are refused (401)', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'U', ...U });
    const token = await mintToken(app, basic(U.email, U.password));
    t.equal(await bearerStatus(app, token), 200);
    t.equal((await app.inject({ method: 'DELETE', url: `/api/users/${id}`, headers: { authorization: adminAuth() } })).statusCode, 204);
    t.equal(await bearerStatus(app, token), 401);
  });

  t.test('when a disabled user\'s token is presented to mint another, then 401', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'U', ...U });
    const token = await mintToken(app, basic(U.email, U.password));
    await putUser(app, adminAuth(), id, { name: 'U', email: U.email, disabled: true });
    t.equal((await mint(app, { authorization: bearer(token) })).statusCode, 401);
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

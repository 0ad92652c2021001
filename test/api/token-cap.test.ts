// Access tokens: POST /session/token for token holders (a new token is capped at the expiry of
// the token behind the call), its credentials, and the user states that refuse tokens. The
// interface's Session and Authentication sections, DESIGN section 3. Split from token.test.ts
// (2026-11-29, issue 37).
import t from 'tap';
import { ADMIN, FakeClock, adminAuth, basic, bearer, createUser, json, makeApp, mintToken } from '../fixtures/app.js';
import { DAY, FORM, HOUR, PROBLEM_JSON, SECOND, bearerStatus, cookieOf, loginCookie, mint, putUser, whoami } from '../fixtures/session.js';

const U = { email: 'u@example.test', password: 'u-password-1' };
const iso = (ms: number) => new Date(ms).toISOString();

t.test('POST /session/token', async (t) => {
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

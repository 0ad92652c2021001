// Sessions: POST /session (login, its cookie, refusals), DELETE /session (logout) and restarts
// (a session outlives its app). The interface's Session and Authentication sections, DESIGN
// sections 3 and 4. GET /session is in session-get.test.ts, what ends a session in
// session-state.test.ts, GET /session/{id} in session-open.test.ts (split 2026-11-29, issue 37:
// one file took longer than tap's 120 s timeout on a loaded machine).
import t from 'tap';
import { ADMIN, FakeClock, createUser, json, makeApp, sqliteOnly } from '../fixtures/app.js';
import {
  FORM,
  PROBLEM_JSON,
  cookieStatus,
  formBody,
  login,
  loginCookie,
  sessionSetCookie,
  tempDatabase,
  whoami,
} from '../fixtures/session.js';

const U = { email: 'u@example.test', password: 'u-password-1' };

t.test('POST /session', async (t) => {
  t.test('when the email and password are right, then 200 with the user and a JSESSIONID cookie (HttpOnly, SameSite=Lax, Path=/)', async (t) => {
    const { app } = await makeApp(t);
    const res = await login(app, ADMIN.email, ADMIN.password);
    t.equal(res.statusCode, 200);
    t.equal(res.headers['content-type'], 'application/json; charset=utf-8');
    t.has(json(res), { id: 1, email: ADMIN.email, administrator: true, disabled: false });
    t.notOk('password' in json(res), 'no password key');
    const line = sessionSetCookie(res)!;
    t.ok(line, 'a JSESSIONID cookie is set');
    t.match(line, /^JSESSIONID=[A-Za-z0-9_-]{43};/);
    const attrs = line.split(';').map((a) => a.trim().toLowerCase());
    t.ok(attrs.includes('httponly'), 'HttpOnly');
    t.ok(attrs.includes('samesite=lax'), 'SameSite=Lax');
    t.ok(attrs.includes('path=/'), 'Path=/');
  });

  t.test('when the request comes over plain http with the default COOKIE_SECURE, then the cookie is not Secure', async (t) => {
    const { app, config } = await makeApp(t);
    t.equal(config.cookieSecure, 'auto');
    const line = sessionSetCookie(await login(app, ADMIN.email, ADMIN.password))!;
    t.notMatch(line, /;\s*secure/i);
  });

  t.test('when COOKIE_SECURE is true, then the cookie is Secure even over http', async (t) => {
    const { app } = await makeApp(t, { config: { cookieSecure: true } });
    t.match(sessionSetCookie(await login(app, ADMIN.email, ADMIN.password))!, /;\s*Secure/);
  });

  t.test('when a trusted proxy says the request came over https, then the default cookie is Secure', async (t) => {
    const { app } = await makeApp(t, { config: { trustProxy: true } });
    const res = await login(app, ADMIN.email, ADMIN.password, { 'x-forwarded-proto': 'https' });
    t.equal(res.statusCode, 200);
    t.match(sessionSetCookie(res)!, /;\s*Secure/);
  });

  t.test('when the password is wrong, then 401 problem+json with the challenge and no cookie', async (t) => {
    const { app } = await makeApp(t);
    const res = await login(app, ADMIN.email, 'wrong-password');
    t.equal(res.statusCode, 401);
    t.equal(res.headers['content-type'], PROBLEM_JSON);
    t.has(json(res), { type: 'urn:cad-incident:problem:unauthorized', status: 401, title: 'Unauthorized' });
    t.equal(res.headers['www-authenticate'], 'Basic realm="api", Bearer');
    t.equal(sessionSetCookie(res), undefined);
  });

  t.test('when the email is unknown, then 401 problem+json and no cookie', async (t) => {
    const { app } = await makeApp(t);
    const res = await login(app, 'nobody@example.test', ADMIN.password);
    t.equal(res.statusCode, 401);
    t.equal(res.headers['content-type'], PROBLEM_JSON);
    t.equal(json(res).type, 'urn:cad-incident:problem:unauthorized');
    t.equal(sessionSetCookie(res), undefined);
  });

  t.test('when the user is disabled, then 401 even with the right password', async (t) => {
    const { app } = await makeApp(t);
    await createUser(app, { name: 'D', ...U, disabled: true });
    const res = await login(app, U.email, U.password);
    t.equal(res.statusCode, 401);
    t.equal(json(res).type, 'urn:cad-incident:problem:unauthorized');
    t.equal(sessionSetCookie(res), undefined);
  });

  t.test('when the user is past its expirationTime, then 401 even with the right password; before it, 200', async (t) => {
    const clock = new FakeClock(); // 2026-11-22T12:00:00Z
    const { app } = await makeApp(t, { clock });
    await createUser(app, { name: 'X', email: 'x@example.test', password: 'x-password-1', expirationTime: '2026-11-22T11:59:59Z' });
    await createUser(app, { name: 'Y', email: 'y@example.test', password: 'y-password-1', expirationTime: '2026-11-22T13:00:00+01:00' });
    await createUser(app, { name: 'Z', email: 'z@example.test', password: 'z-password-1', expirationTime: '2026-11-22T12:00:01Z' });
    const past = await login(app, 'x@example.test', 'x-password-1');
    t.equal(past.statusCode, 401, 'an hour-old expiry');
    t.equal(json(past).type, 'urn:cad-incident:problem:unauthorized');
    t.equal((await login(app, 'y@example.test', 'y-password-1')).statusCode, 401, '13:00+01:00 is 12:00Z: expired at this instant');
    t.equal((await login(app, 'z@example.test', 'z-password-1')).statusCode, 200, 'one second left');
  });

  t.test('when the form lacks the password, then 400 naming /body/password', async (t) => {
    const { app } = await makeApp(t);
    const res = await app.inject({ method: 'POST', url: '/api/session', headers: FORM, payload: formBody({ email: ADMIN.email }) });
    t.equal(res.statusCode, 400);
    t.equal(res.headers['content-type'], PROBLEM_JSON);
    t.same(json(res).errors.map((e: { path: string }) => e.path), ['/body/password']);
  });

  t.test('when the login body is JSON instead of a form, then 415 problem+json and no session', async (t) => {
    const { app } = await makeApp(t);
    const ok = await app.inject({ method: 'POST', url: '/api/session', headers: { 'content-type': 'application/json' }, payload: { email: ADMIN.email, password: ADMIN.password } });
    t.equal(ok.statusCode, 415, 'well-formed JSON credentials');
    t.equal(sessionSetCookie(ok), undefined, 'no session from an undeclared body type');
    const empty = await app.inject({ method: 'POST', url: '/api/session', headers: { 'content-type': 'application/json' }, payload: {} });
    t.equal(empty.statusCode, 415, 'an empty JSON object');
    const text = await app.inject({ method: 'POST', url: '/api/session', headers: { 'content-type': 'text/plain' }, payload: formBody({ email: ADMIN.email, password: ADMIN.password }) });
    t.equal(text.statusCode, 415, 'a form sent as text/plain');
    t.equal(empty.headers['content-type'], PROBLEM_JSON, 'whatever the status, a problem document');
  });

  t.test('when two logins are made, then each gets its own session cookie', async (t) => {
    const { app } = await makeApp(t);
    const a = await loginCookie(app, ADMIN.email, ADMIN.password);
    const b = await loginCookie(app, ADMIN.email, ADMIN.password);
    t.not(a, b);
    t.equal(await cookieStatus(app, a), 200);
    t.equal(await cookieStatus(app, b), 200);
  });
});

t.test('DELETE /session', async (t) => {
  t.test('when a logged-in user logs out, then 204, the cookie is cleared and the old cookie no longer works', async (t) => {
    const { app } = await makeApp(t);
    const cookie = await loginCookie(app, ADMIN.email, ADMIN.password);
    const res = await app.inject({ method: 'DELETE', url: '/api/session', headers: { cookie } });
    t.equal(res.statusCode, 204);
    t.equal(res.body, '');
    const cleared = sessionSetCookie(res)!;
    t.ok(cleared, 'a clearing Set-Cookie is sent');
    t.match(cleared, /^JSESSIONID=;/);
    t.match(cleared, /Max-Age=0|Expires=Thu, 01 Jan 1970/);
    t.equal(await cookieStatus(app, cookie), 404);
  });

  t.test('when one of two sessions logs out, then the other lives on', async (t) => {
    const { app } = await makeApp(t);
    const a = await loginCookie(app, ADMIN.email, ADMIN.password);
    const b = await loginCookie(app, ADMIN.email, ADMIN.password);
    await app.inject({ method: 'DELETE', url: '/api/session', headers: { cookie: a } });
    t.equal(await cookieStatus(app, a), 404);
    t.equal(await cookieStatus(app, b), 200);
  });

  t.test('when there is no session, then DELETE is still 204', async (t) => {
    const { app } = await makeApp(t);
    t.equal((await app.inject({ method: 'DELETE', url: '/api/session' })).statusCode, 204);
    t.equal((await app.inject({ method: 'DELETE', url: '/api/session', headers: { cookie: 'JSESSIONID=forged' } })).statusCode, 204);
  });
});

t.test('restarts', async (t) => {
  t.test('when a second app is built on the same database, then the session cookie still works', { skip: sqliteOnly }, async (t) => {
    const file = tempDatabase(t);
    const db = file.open();
    const first = await makeApp(t, { db });
    const cookie = await loginCookie(first.app, ADMIN.email, ADMIN.password);
    await first.app.close();
    const second = await makeApp(t, { db });
    const res = await whoami(second.app, { cookie });
    t.equal(res.statusCode, 200);
    t.equal(json(res).email, ADMIN.email);
  });

  t.test('when the database file is closed and reopened by a new app, then the session survives and logout still works', { skip: sqliteOnly }, async (t) => {
    const file = tempDatabase(t);
    const db1 = file.open();
    const first = await makeApp(t, { db: db1 });
    const cookie = await loginCookie(first.app, ADMIN.email, ADMIN.password);
    await first.app.close();
    db1.$client.close();
    const second = await makeApp(t, { db: file.open() });
    t.equal(await cookieStatus(second.app, cookie), 200);
    await second.app.inject({ method: 'DELETE', url: '/api/session', headers: { cookie } });
    t.equal(await cookieStatus(second.app, cookie), 404);
  });
});

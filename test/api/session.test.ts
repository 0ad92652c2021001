// Sessions: POST/GET/DELETE /session, GET /session/{id}, idle expiry, restarts, and how a
// user's state (disabled, deleted, expired, new password) ends its sessions.
// The interface's Session and Authentication sections, DESIGN sections 3 and 4.
import t, { type Test } from 'tap';
import { ADMIN, FakeClock, adminAuth, basic, bearer, createUser, json, makeApp, mintToken, sqliteOnly } from '../fixtures/app.js';
import {
  DAY,
  FORM,
  HOUR,
  PROBLEM_JSON,
  SECOND,
  SECRET_RE,
  cookieOf,
  cookieStatus,
  formBody,
  login,
  loginCookie,
  putUser,
  revoke,
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

t.test('idle expiry', async (t) => {
  t.test('when a session is left idle for 7 days, then it is gone (404)', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    const cookie = await loginCookie(app, ADMIN.email, ADMIN.password);
    clock.advance(7 * DAY + SECOND);
    t.equal(await cookieStatus(app, cookie), 404);
    t.equal(await cookieStatus(app, cookie), 404, 'and stays gone');
  });

  t.test('when a session is left idle for just under 7 days, then it still works', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    const cookie = await loginCookie(app, ADMIN.email, ADMIN.password);
    clock.advance(7 * DAY - SECOND);
    t.equal(await cookieStatus(app, cookie), 200);
  });

  t.test('when a session is used within every 7 days, then it lives on past 7 days from login', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    const cookie = await loginCookie(app, ADMIN.email, ADMIN.password);
    clock.advance(6 * DAY);
    t.equal(await cookieStatus(app, cookie), 200);
    clock.advance(6 * DAY);
    t.equal(await cookieStatus(app, cookie), 200, 'day 12: idle time counts from the last use');
    clock.advance(7 * DAY + SECOND);
    t.equal(await cookieStatus(app, cookie), 404, 'then 7 idle days end it');
  });

  t.test('when sessions idle past their expiry, then the store sweeps them and keeps fresh ones', { skip: sqliteOnly }, async (t) => {
    const clock = new FakeClock();
    const { app, db } = await makeApp(t, { clock });
    await loginCookie(app, ADMIN.email, ADMIN.password);
    const { IdentityStore } = await import('../../src/adapters/sqlite/identity.js');
    const identity = new IdentityStore(db);
    t.equal(identity.deleteSessionsIdleSince('2026-11-22T11:00:00.000Z'), 0, 'a fresh session stays');
    t.equal(identity.deleteSessionsIdleSince('2026-11-30T00:00:00.000Z'), 1, 'an idle one goes');
  });
});

t.test('user state ends sessions', async (t) => {
  t.test('when the user is disabled, then its sessions end and re-enabling does not revive them', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'U', ...U });
    const a = await loginCookie(app, U.email, U.password);
    const b = await loginCookie(app, U.email, U.password);
    t.equal((await putUser(app, adminAuth(), id, { name: 'U', email: U.email, disabled: true })).statusCode, 200);
    t.equal(await cookieStatus(app, a), 404);
    t.equal(await cookieStatus(app, b), 404);
    t.equal((await putUser(app, adminAuth(), id, { name: 'U', email: U.email, disabled: false })).statusCode, 200);
    t.equal(await cookieStatus(app, a), 404, 'still gone after re-enabling');
    t.equal((await login(app, U.email, U.password)).statusCode, 200, 'a fresh login works again');
  });

  t.test('when the user is deleted, then its sessions end', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'U', ...U });
    const cookie = await loginCookie(app, U.email, U.password);
    t.equal((await app.inject({ method: 'DELETE', url: `/api/users/${id}`, headers: { authorization: adminAuth() } })).statusCode, 204);
    t.equal(await cookieStatus(app, cookie), 404);
  });

  t.test('when the user passes its expirationTime, then its session stops working', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    await createUser(app, { name: 'U', ...U, expirationTime: '2026-11-22T13:00:00Z' });
    const cookie = await loginCookie(app, U.email, U.password);
    clock.advance(HOUR - SECOND);
    t.equal(await cookieStatus(app, cookie), 200);
    clock.advance(2 * SECOND);
    t.equal(await cookieStatus(app, cookie), 404);
  });

  t.test('when a user changes its own password in a session, then its other sessions end and that one stays', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'U', ...U });
    const mine = await loginCookie(app, U.email, U.password);
    const other = await loginCookie(app, U.email, U.password);
    const adminSession = await loginCookie(app, ADMIN.email, ADMIN.password);
    const res = await app.inject({ method: 'PUT', url: `/api/users/${id}`, headers: { cookie: mine }, payload: { name: 'U', email: U.email, password: 'new-password-1' } });
    t.equal(res.statusCode, 200);
    t.equal(await cookieStatus(app, mine), 200, 'the session that changed it stays');
    t.equal(await cookieStatus(app, other), 404, 'the other session ended');
    t.equal(await cookieStatus(app, adminSession), 200, "another user's session is untouched");
    t.equal((await login(app, U.email, U.password)).statusCode, 401, 'the old password is refused');
    t.equal((await login(app, U.email, 'new-password-1')).statusCode, 200, 'the new one works');
  });

  t.test('when an administrator changes a user\'s password, then every session of that user ends', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'U', ...U });
    const a = await loginCookie(app, U.email, U.password);
    const b = await loginCookie(app, U.email, U.password);
    t.equal((await putUser(app, adminAuth(), id, { name: 'U', email: U.email, password: 'new-password-1' })).statusCode, 200);
    t.equal(await cookieStatus(app, a), 404);
    t.equal(await cookieStatus(app, b), 404);
  });

  t.test('when a user changes its password with Basic credentials, then all its sessions end', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'U', ...U });
    const cookie = await loginCookie(app, U.email, U.password);
    t.equal((await putUser(app, basic(U.email, U.password), id, { name: 'U', email: U.email, password: 'new-password-1' })).statusCode, 200);
    t.equal(await cookieStatus(app, cookie), 404);
    t.equal((await whoami(app, { authorization: basic(U.email, U.password) })).statusCode, 401, 'the old Basic credentials are refused');
  });

  t.test('when a user changes something other than its password, then its sessions live on', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'U', ...U });
    const a = await loginCookie(app, U.email, U.password);
    const b = await loginCookie(app, U.email, U.password);
    t.equal((await app.inject({ method: 'PUT', url: `/api/users/${id}`, headers: { cookie: a }, payload: { name: 'Ulla', email: U.email, phone: '+44 1' } })).statusCode, 200);
    t.equal(await cookieStatus(app, b), 200);
  });

  t.test("when a user's email is changed, then the old email no longer logs in", async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'U', email: 'old@example.test', password: U.password });
    t.equal((await whoami(app, { authorization: basic('old@example.test', U.password) })).statusCode, 200, 'the old email works before');
    t.equal((await putUser(app, adminAuth(), id, { name: 'U', email: 'new@example.test' })).statusCode, 200);
    t.equal((await whoami(app, { authorization: basic('new@example.test', U.password) })).statusCode, 200, 'the new email works');
    t.equal((await whoami(app, { authorization: basic('old@example.test', U.password) })).statusCode, 401, 'Basic with the old email');
    t.equal((await login(app, 'old@example.test', U.password)).statusCode, 401, 'POST /session with the old email');
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

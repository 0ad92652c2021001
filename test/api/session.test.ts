// Sessions and tokens, each rule of the interface and DESIGN section 3.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ADMIN, FakeClock, adminAuth, basic, bearer, createUser, json, makeApp, mintToken } from '../fixtures/app.js';
import { openDatabase } from '../../src/store/db.js';

const form = { 'content-type': 'application/x-www-form-urlencoded' };
const loginBody = (email: string, password: string) => `email=${encodeURIComponent(email)}&password=${encodeURIComponent(password)}`;

function cookieOf(res: { headers: Record<string, unknown> }): string {
  const raw = res.headers['set-cookie'];
  const line = (Array.isArray(raw) ? raw : [raw]).find((c) => String(c).startsWith('JSESSIONID='));
  if (!line) throw new Error('no JSESSIONID cookie');
  return String(line).split(';')[0]!;
}

t.test('POST /session', async (t) => {
  t.test('when the password is right, then 200 with the user and a HttpOnly, SameSite=Lax session cookie', async (t) => {
    const { app } = await makeApp(t);
    const res = await app.inject({ method: 'POST', url: '/api/session', headers: form, payload: loginBody(ADMIN.email, ADMIN.password) });
    t.equal(res.statusCode, 200);
    t.equal(json(res).email, ADMIN.email);
    t.notOk('password' in json(res));
    const cookie = String(res.headers['set-cookie']);
    t.match(cookie, /^JSESSIONID=[A-Za-z0-9_-]{43};/);
    t.match(cookie, /HttpOnly/);
    t.match(cookie, /SameSite=Lax/);
    t.match(cookie, /Path=\//);
    t.notMatch(cookie, /Secure/, 'no Secure flag over plain http by default');
    const me = await app.inject({ method: 'GET', url: '/api/session', headers: { cookie: cookieOf(res) } });
    t.equal(me.statusCode, 200);
  });

  t.test('when COOKIE_SECURE is true, then the cookie is Secure', async (t) => {
    const { app } = await makeApp(t, { config: { cookieSecure: true } });
    const res = await app.inject({ method: 'POST', url: '/api/session', headers: form, payload: loginBody(ADMIN.email, ADMIN.password) });
    t.match(String(res.headers['set-cookie']), /Secure/);
  });

  t.test('when the credentials are wrong, unknown, disabled or expired, then 401 problem+json', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    await createUser(app, { name: 'D', email: 'd@example.test', password: 'd-password', disabled: true });
    await createUser(app, { name: 'X', email: 'x@example.test', password: 'x-password', expirationTime: '2026-11-22T11:00:00Z' });
    for (const [email, password] of [[ADMIN.email, 'wrong'], ['nobody@example.test', 'whatever'], ['d@example.test', 'd-password'], ['x@example.test', 'x-password']]) {
      const res = await app.inject({ method: 'POST', url: '/api/session', headers: form, payload: loginBody(email!, password!) });
      t.equal(res.statusCode, 401, String(email));
      t.equal(res.headers['content-type'], 'application/problem+json; charset=utf-8');
    }
  });
});

t.test('GET /session', async (t) => {
  t.test('when nothing identifies the caller, then 404; a bad Authorization header is 401; Basic and Bearer work', async (t) => {
    const { app } = await makeApp(t);
    t.equal((await app.inject({ method: 'GET', url: '/api/session' })).statusCode, 404);
    t.equal((await app.inject({ method: 'GET', url: '/api/session', headers: { authorization: basic(ADMIN.email, 'nope') } })).statusCode, 401);
    t.equal((await app.inject({ method: 'GET', url: '/api/session', headers: { authorization: 'Bearer nope' } })).statusCode, 401);
    t.equal((await app.inject({ method: 'GET', url: '/api/session', headers: { authorization: 'Digest x' } })).statusCode, 401);
    t.equal((await app.inject({ method: 'GET', url: '/api/session', headers: { authorization: adminAuth() } })).statusCode, 200);
    const token = await mintToken(app, adminAuth());
    t.equal((await app.inject({ method: 'GET', url: '/api/session', headers: { authorization: bearer(token) } })).statusCode, 200);
    t.equal((await app.inject({ method: 'GET', url: '/api/session', headers: { cookie: 'JSESSIONID=forged' } })).statusCode, 404);
  });

  t.test('when ?token= is valid, then a session is opened; invalid, expired or revoked is 401', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    const token = await mintToken(app, adminAuth());
    const res = await app.inject({ method: 'GET', url: `/api/session?token=${token}` });
    t.equal(res.statusCode, 200);
    t.equal((await app.inject({ method: 'GET', url: '/api/session', headers: { cookie: cookieOf(res) } })).statusCode, 200);
    t.equal((await app.inject({ method: 'GET', url: '/api/session?token=garbage' })).statusCode, 401);
    const revoked = await mintToken(app, adminAuth());
    await app.inject({ method: 'POST', url: '/api/session/token/revoke', headers: { ...form, authorization: adminAuth() }, payload: `token=${revoked}` });
    t.equal((await app.inject({ method: 'GET', url: `/api/session?token=${revoked}` })).statusCode, 401);
    clock.advance(8 * 86400_000);
    t.equal((await app.inject({ method: 'GET', url: `/api/session?token=${token}` })).statusCode, 401, 'expired');
    t.equal((await app.inject({ method: 'GET', url: '/api/session', headers: { cookie: cookieOf(res) } })).statusCode, 404, 'a session opened with a token ends with it');
  });

  t.test('when a session idles for 7 days, then it is gone; used within, it lives on', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    const login = await app.inject({ method: 'POST', url: '/api/session', headers: form, payload: loginBody(ADMIN.email, ADMIN.password) });
    const cookie = cookieOf(login);
    clock.advance(6 * 86400_000);
    t.equal((await app.inject({ method: 'GET', url: '/api/session', headers: { cookie } })).statusCode, 200);
    clock.advance(6 * 86400_000);
    t.equal((await app.inject({ method: 'GET', url: '/api/session', headers: { cookie } })).statusCode, 200, 'idle time counts from the last use');
    clock.advance(7 * 86400_000 + 1000);
    t.equal((await app.inject({ method: 'GET', url: '/api/session', headers: { cookie } })).statusCode, 404);
  });

  t.test('when the app restarts on the same database, then sessions survive', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'cad-session-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const db1 = openDatabase({ path: join(dir, 'db.sqlite') });
    const first = await makeApp(t, { db: db1 });
    const cookie = cookieOf(await first.app.inject({ method: 'POST', url: '/api/session', headers: form, payload: loginBody(ADMIN.email, ADMIN.password) }));
    await first.app.close();
    db1.$client.close();
    const second = await makeApp(t, { db: openDatabase({ path: join(dir, 'db.sqlite') }) });
    t.equal((await second.app.inject({ method: 'GET', url: '/api/session', headers: { cookie } })).statusCode, 200);
    t.equal((await second.app.inject({ method: 'GET', url: '/api/users', headers: { authorization: adminAuth() } })).body.match(/"administrator":true/g)?.length, 1, 'no second administrator bootstrapped');
  });
});

t.test('DELETE /session', async (t) => {
  t.test('when logging out, then 204 and the cookie no longer works', async (t) => {
    const { app } = await makeApp(t);
    const cookie = cookieOf(await app.inject({ method: 'POST', url: '/api/session', headers: form, payload: loginBody(ADMIN.email, ADMIN.password) }));
    const res = await app.inject({ method: 'DELETE', url: '/api/session', headers: { cookie } });
    t.equal(res.statusCode, 204);
    t.equal((await app.inject({ method: 'GET', url: '/api/session', headers: { cookie } })).statusCode, 404);
    t.equal((await app.inject({ method: 'DELETE', url: '/api/session' })).statusCode, 204, 'without a session too');
  });

  t.test('when a user is disabled, deleted or changes password, then its sessions end', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'U', email: 'u@example.test', password: 'u-password' });
    const login = async () => cookieOf(await app.inject({ method: 'POST', url: '/api/session', headers: form, payload: loginBody('u@example.test', 'u-password') }));
    const put = (body: Record<string, unknown>, auth = adminAuth()) =>
      app.inject({ method: 'PUT', url: `/api/users/${id}`, headers: { authorization: auth }, payload: { name: 'U', email: 'u@example.test', ...body } });
    const alive = async (cookie: string) => (await app.inject({ method: 'GET', url: '/api/session', headers: { cookie } })).statusCode === 200;

    const a = await login();
    const b = await login();
    t.equal((await app.inject({ method: 'PUT', url: `/api/users/${id}`, headers: { cookie: a }, payload: { name: 'U', email: 'u@example.test', password: 'new-password' } })).statusCode, 200);
    t.ok(await alive(a), 'the session that changed the password stays');
    t.notOk(await alive(b), 'the other session ended');

    t.equal((await put({ disabled: true })).statusCode, 200);
    t.notOk(await alive(a), 'disabled: every session ends');
    t.equal((await app.inject({ method: 'GET', url: '/api/session', headers: { authorization: basic('u@example.test', 'new-password') } })).statusCode, 401);
    await put({ disabled: false });
    const c = await (async () => cookieOf(await app.inject({ method: 'POST', url: '/api/session', headers: form, payload: loginBody('u@example.test', 'new-password') })))();
    t.equal((await app.inject({ method: 'DELETE', url: `/api/users/${id}`, headers: { authorization: adminAuth() } })).statusCode, 204);
    t.notOk(await alive(c), 'deleted: the session is gone');
  });
});

t.test('GET /session/{id}', async (t) => {
  t.test('when an admin, a manager of a plain user, or the user itself asks, then 200 and a session as that user; anyone else 401; unknown 404', async (t) => {
    const { app } = await makeApp(t);
    const managerId = await createUser(app, { name: 'M', email: 'm@example.test', password: 'm-password', userLimit: 5 });
    const m = basic('m@example.test', 'm-password');
    const plainId = await createUser(app, { name: 'P', email: 'p@example.test', password: 'p-password' }, m);
    const strangerId = await createUser(app, { name: 'S', email: 's@example.test', password: 's-password' });
    const p = basic('p@example.test', 'p-password');

    const asAdmin = await app.inject({ method: 'GET', url: `/api/session/${plainId}`, headers: { authorization: adminAuth() } });
    t.equal(asAdmin.statusCode, 200);
    t.equal(json(asAdmin).id, plainId);
    const me = await app.inject({ method: 'GET', url: '/api/session', headers: { cookie: cookieOf(asAdmin) } });
    t.equal(json(me).id, plainId, 'the new session acts as that user');

    t.equal((await app.inject({ method: 'GET', url: `/api/session/${plainId}`, headers: { authorization: m } })).statusCode, 200, 'manager of a plain user');
    t.equal((await app.inject({ method: 'GET', url: `/api/session/${strangerId}`, headers: { authorization: m } })).statusCode, 401, 'manager of somebody else');
    t.equal((await app.inject({ method: 'GET', url: '/api/session/1', headers: { authorization: m } })).statusCode, 401, 'manager for an admin');
    t.equal((await app.inject({ method: 'GET', url: `/api/session/${managerId}`, headers: { authorization: p } })).statusCode, 401, 'plain user for another');
    t.equal((await app.inject({ method: 'GET', url: `/api/session/${plainId}`, headers: { authorization: p } })).statusCode, 200, 'self');
    t.equal((await app.inject({ method: 'GET', url: '/api/session/9999', headers: { authorization: adminAuth() } })).statusCode, 404);
    t.equal((await app.inject({ method: 'GET', url: `/api/session/${plainId}` })).statusCode, 401, 'anonymous');
  });
});

t.test('POST /session/token', async (t) => {
  t.test('when minted without expiration, then it works for 7 days and no longer', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    const res = await app.inject({ method: 'POST', url: '/api/session/token', headers: { authorization: adminAuth() } });
    t.equal(res.statusCode, 200);
    t.match(res.headers['content-type'], /^text\/plain/);
    t.match(res.body, /^[A-Za-z0-9_-]{43}$/);
    clock.advance(7 * 86400_000 - 60_000);
    t.equal((await app.inject({ method: 'GET', url: '/api/session', headers: { authorization: bearer(res.body) } })).statusCode, 200);
    clock.advance(120_000);
    t.equal((await app.inject({ method: 'GET', url: '/api/session', headers: { authorization: bearer(res.body) } })).statusCode, 401);
  });

  t.test('when expiration is in the past or not a date-time, then 400 naming the field', async (t) => {
    const { app } = await makeApp(t);
    for (const v of ['2020-01-01T00:00:00Z', 'tomorrow']) {
      const res = await app.inject({ method: 'POST', url: '/api/session/token', headers: { ...form, authorization: adminAuth() }, payload: `expiration=${encodeURIComponent(v)}` });
      t.equal(res.statusCode, 400, v);
      t.equal(json(res).errors[0].path, '/body/expiration');
    }
  });

  t.test('when a token holder mints a longer-lived token, then it is capped at the holder\'s expiry', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    const short = await mintToken(app, adminAuth(), new Date(clock.now().getTime() + 3600_000).toISOString());
    const long = await mintToken(app, bearer(short), '2030-01-01T00:00:00Z');
    clock.advance(3600_000 + 1000);
    t.equal((await app.inject({ method: 'GET', url: '/api/session', headers: { authorization: bearer(long) } })).statusCode, 401);
  });

  t.test('when called without credentials, then 401 with WWW-Authenticate offering Basic and Bearer', async (t) => {
    const { app } = await makeApp(t);
    const res = await app.inject({ method: 'POST', url: '/api/session/token' });
    t.equal(res.statusCode, 401);
    t.equal(res.headers['www-authenticate'], 'Basic realm="api", Bearer');
  });

  t.test('when the user is disabled or past its expirationTime, then its tokens are refused', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    const id = await createUser(app, { name: 'U', email: 'u@example.test', password: 'u-password', expirationTime: '2026-11-23T12:00:00Z' });
    const token = await mintToken(app, basic('u@example.test', 'u-password'));
    t.equal((await app.inject({ method: 'GET', url: '/api/session', headers: { authorization: bearer(token) } })).statusCode, 200);
    clock.advance(86400_000 + 1);
    t.equal((await app.inject({ method: 'GET', url: '/api/session', headers: { authorization: bearer(token) } })).statusCode, 401, 'user expired');
    await app.inject({ method: 'PUT', url: `/api/users/${id}`, headers: { authorization: adminAuth() }, payload: { name: 'U', email: 'u@example.test', expirationTime: null, disabled: true } });
    t.equal((await app.inject({ method: 'GET', url: '/api/session', headers: { authorization: bearer(token) } })).statusCode, 401, 'user disabled');
  });
});

t.test('POST /session/token/revoke', async (t) => {
  t.test('when revoking a known token, then 204 (again 204) and it is refused; unknown or malformed is 400', async (t) => {
    const { app } = await makeApp(t);
    const token = await mintToken(app, adminAuth());
    const revoke = (v: string) => app.inject({ method: 'POST', url: '/api/session/token/revoke', headers: { ...form, authorization: adminAuth() }, payload: `token=${encodeURIComponent(v)}` });
    t.equal((await revoke(token)).statusCode, 204);
    t.equal((await app.inject({ method: 'GET', url: '/api/session', headers: { authorization: bearer(token) } })).statusCode, 401);
    t.equal((await revoke(token)).statusCode, 204, 'already revoked');
    t.equal((await revoke('A'.repeat(43))).statusCode, 400, 'unknown');
    t.equal((await revoke('not a token')).statusCode, 400, 'malformed');
    const missing = await app.inject({ method: 'POST', url: '/api/session/token/revoke', headers: { ...form, authorization: adminAuth() }, payload: '' });
    t.equal(missing.statusCode, 400);
  });

  t.test('when the token page lists and revokes by id, then only the caller\'s own tokens', async (t) => {
    const { app } = await makeApp(t);
    await createUser(app, { name: 'U', email: 'u@example.test', password: 'u-password' });
    const u = basic('u@example.test', 'u-password');
    const token = await mintToken(app, u);
    await mintToken(app, adminAuth());
    const list = json(await app.inject({ method: 'GET', url: '/api/session/tokens', headers: { authorization: u } }));
    t.equal(list.length, 1);
    t.notOk(JSON.stringify(list).includes(token), 'the token value is never listed');
    t.equal((await app.inject({ method: 'DELETE', url: '/api/session/tokens/2', headers: { authorization: u } })).statusCode, 404, "another user's token");
    t.equal((await app.inject({ method: 'DELETE', url: `/api/session/tokens/${list[0].id}`, headers: { authorization: u } })).statusCode, 204);
    t.equal((await app.inject({ method: 'GET', url: '/api/session', headers: { authorization: bearer(token) } })).statusCode, 401);
  });
});

t.test('when sessions idle past their expiry, then the store can sweep them', async (t) => {
  const clock = new FakeClock();
  const { app, db } = await makeApp(t, { clock });
  await app.inject({ method: 'POST', url: '/api/session', headers: form, payload: loginBody(ADMIN.email, ADMIN.password) });
  const { IdentityStore } = await import('../../src/store/identity.js');
  const identity = new IdentityStore(db);
  t.equal(identity.deleteSessionsIdleSince('2026-11-22T11:00:00.000Z'), 0, 'a fresh session stays');
  t.equal(identity.deleteSessionsIdleSince('2026-11-30T00:00:00.000Z'), 1, 'an idle one goes');
});

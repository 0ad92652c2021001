// Identity and access: the bootstrap administrator, the admin API for users, bodies of a type an
// operation does not take, and readonly users (DESIGN section 4). The other permission rules are in
// users-managers, users-last-admin, devices-reach and devices-limits (split 2026-11-29, issue 37:
// one file neared tap's 120 s timeout on a loaded machine; helpers in test/fixtures/access.ts).
import t from 'tap';
import type { InjectOptions } from 'fastify';
import { Writable } from 'node:stream';
import { ADMIN, adminAuth, basic, createDevice, createUser, grant, json, makeApp, sqliteOnly } from '../fixtures/app.js';
import { FORM, login, putUser, tempDatabase } from '../fixtures/session.js';
import { call, deviceNames, isProblem, userEmails } from '../fixtures/access.js';

t.test('bootstrap', async (t) => {
  t.test('when the database is empty, then the administrator from ADMIN_EMAIL / ADMIN_PASSWORD exists and can log in', async (t) => {
    const { app } = await makeApp(t);
    const res = await login(app, ADMIN.email, ADMIN.password);
    t.equal(res.statusCode, 200);
    t.has(json(res), { id: 1, email: ADMIN.email, administrator: true, disabled: false, readonly: false, userLimit: -1, deviceLimit: -1 });
  });

  t.test('when the administrator lists users, then it sees exactly itself', async (t) => {
    const { app } = await makeApp(t);
    const res = await call(app, adminAuth(), 'GET', '/api/users');
    t.equal(res.statusCode, 200);
    t.same(
      json(res).map((u: { id: number; email: string; administrator: boolean }) => [u.id, u.email, u.administrator]),
      [[1, ADMIN.email, true]],
    );
  });

  t.test('when a second app is built on the same non-empty database, then no other administrator is created', { skip: sqliteOnly }, async (t) => {
    const file = tempDatabase(t);
    const db = file.open();
    const first = await makeApp(t, { db });
    await first.app.close();
    const second = await makeApp(t, { db, config: { adminEmail: 'other-admin@example.test', adminPassword: 'other-password-1' } });
    t.same(await userEmails(second.app, adminAuth()), [ADMIN.email], 'still one user, the first administrator');
    t.equal((await login(second.app, 'other-admin@example.test', 'other-password-1')).statusCode, 401, 'the new settings created nobody');
    t.equal((await login(second.app, ADMIN.email, ADMIN.password)).statusCode, 200);
  });

  t.test('when no admin password is configured, then a random one is generated, logged once, and works', async (t) => {
    const lines: string[] = [];
    const stream = new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) });
    const { app } = await makeApp(t, { config: { adminEmail: undefined, adminPassword: undefined }, logger: { level: 'info', stream } });
    const logged = lines.filter((l) => l.includes('generated password'));
    t.equal(logged.length, 1, 'logged exactly once');
    const password = /generated password: (\S+)"/.exec(logged[0]!)![1]!;
    t.ok(password.length >= 16, 'a long random password');
    const res = await login(app, 'admin', password);
    t.equal(res.statusCode, 200);
    t.equal(json(res).administrator, true);
  });
});

t.test('users', async (t) => {
  t.test('when an administrator creates a user, then 200 with the user, the documented defaults and no password key', async (t) => {
    const { app } = await makeApp(t);
    const res = await call(app, adminAuth(), 'POST', '/api/users', { name: 'A', email: 'a@example.test', password: 'a-password-1' });
    t.equal(res.statusCode, 200);
    t.equal(res.headers['content-type'], 'application/json; charset=utf-8');
    const user = json(res);
    t.notOk('password' in user, 'no password key');
    // deviceLimit: USER_DEFAULT_DEVICE_LIMIT, 0 unless configured (DESIGN section 7)
    t.has(user, { name: 'A', email: 'a@example.test', administrator: false, readonly: false, disabled: false, deviceLimit: 0, userLimit: 0 });
    t.type(user.id, 'number');
    t.equal((await login(app, 'a@example.test', 'a-password-1')).statusCode, 200, 'the new user can log in');
    const fetched = await call(app, adminAuth(), 'GET', `/api/users/${user.id}`);
    t.same(json(fetched), user, 'GET /users/{id} returns the same user');
  });

  t.test('when an email is already taken (in any case), then 409 email-taken', async (t) => {
    const { app } = await makeApp(t);
    await createUser(app, { name: 'A', email: 'A@Example.test', password: 'a-password-1' });
    const dup = await call(app, adminAuth(), 'POST', '/api/users', { name: 'B', email: 'a@example.TEST', password: 'b-password-1' });
    isProblem(t, dup, 409, 'email-taken');
    const b = await createUser(app, { name: 'B', email: 'b@example.test', password: 'b-password-1' });
    isProblem(t, await putUser(app, adminAuth(), b, { name: 'B', email: 'a@example.test' }), 409, 'email-taken', 'PUT to a taken email:');
  });

  t.test('when the body is invalid, then 400 naming the field', async (t) => {
    const { app } = await makeApp(t);
    const short = await call(app, adminAuth(), 'POST', '/api/users', { name: 'A', email: 'a@example.test', password: 'short' });
    isProblem(t, short, 400, 'invalid-request');
    t.equal(json(short).errors[0].path, '/body/password');
    const unknown = await call(app, adminAuth(), 'POST', '/api/users', { name: 'A', email: 'a@example.test', password: 'a-password-1', passwrd: 'x' });
    t.equal(unknown.statusCode, 400);
    t.equal(json(unknown).errors[0].path, '/body/passwrd');
  });

  t.test('when a user that does not exist is fetched, changed or deleted, then 404', async (t) => {
    const { app } = await makeApp(t);
    isProblem(t, await call(app, adminAuth(), 'GET', '/api/users/999'), 404, 'not-found', 'GET');
    isProblem(t, await putUser(app, adminAuth(), 999, { name: 'N', email: 'n@example.test' }), 404, 'not-found', 'PUT');
    isProblem(t, await call(app, adminAuth(), 'DELETE', '/api/users/999'), 404, 'not-found', 'DELETE');
  });

  t.test('when a user is updated with only some settings, then the omitted ones keep their values', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'A', email: 'a@example.test', password: 'a-password-1', phone: '+44 1', deviceLimit: 3 });
    const res = await putUser(app, adminAuth(), id, { name: 'A2', email: 'a@example.test' });
    t.equal(res.statusCode, 200);
    t.has(json(res), { name: 'A2', phone: '+44 1', deviceLimit: 3 });
    t.equal((await login(app, 'a@example.test', 'a-password-1')).statusCode, 200, 'the password is kept when omitted');
  });
});

t.test('bodies of a type the operation does not take', async (t) => {
  t.test('when POST /users gets a form body, then 415 and nobody is created', async (t) => {
    const { app } = await makeApp(t);
    const res = await app.inject({ method: 'POST', url: '/api/users', headers: { ...FORM, authorization: adminAuth() }, payload: 'name=F&email=f%40example.test&password=f-password-1' });
    t.equal(res.statusCode, 415, 'a complete form');
    t.same(await userEmails(app, adminAuth()), [ADMIN.email], 'nobody created');
    const partial = await app.inject({ method: 'POST', url: '/api/users', headers: { ...FORM, authorization: adminAuth() }, payload: 'name=F' });
    t.equal(partial.statusCode, 415, 'a partial form');
    const text = await app.inject({ method: 'POST', url: '/api/users', headers: { 'content-type': 'text/plain', authorization: adminAuth() }, payload: 'hello' });
    t.equal(text.statusCode, 415, 'text/plain');
  });

  t.test('when the last administrator PUTs a form with disabled=false, then 415 and it is not disabled', async (t) => {
    const { app } = await makeApp(t);
    const res = await app.inject({
      method: 'PUT',
      url: '/api/users/1',
      headers: { ...FORM, authorization: adminAuth() },
      payload: `name=A&email=${encodeURIComponent(ADMIN.email)}&disabled=false`,
    });
    t.equal(res.statusCode, 415, 'refused');
    t.equal((await login(app, ADMIN.email, ADMIN.password)).statusCode, 200, 'the only administrator can still log in');
  });

  t.test('when POST /devices gets a form with disabled=false, then 415 and no disabled device appears', async (t) => {
    const { app } = await makeApp(t);
    const res = await app.inject({ method: 'POST', url: '/api/devices', headers: { ...FORM, authorization: adminAuth() }, payload: 'name=F&uniqueId=f&disabled=false' });
    t.equal(res.statusCode, 415, 'refused');
    t.same(await deviceNames(app, adminAuth()), [], 'no device created');
  });

  t.test('when POST /permissions gets a text/plain body, then 415', async (t) => {
    const { app } = await makeApp(t);
    const res = await app.inject({ method: 'POST', url: '/api/permissions', headers: { 'content-type': 'text/plain', authorization: adminAuth() }, payload: 'x' });
    t.equal(res.statusCode, 415, 'refused');
  });

  t.test('when POST /users gets a type nothing parses (XML), then 415 unsupported-media-type', async (t) => {
    const { app } = await makeApp(t);
    const res = await app.inject({ method: 'POST', url: '/api/users', headers: { 'content-type': 'application/xml', authorization: adminAuth() }, payload: '<user/>' });
    isProblem(t, res, 415, 'unsupported-media-type');
  });
});

t.test('readonly users', async (t) => {
  const { app } = await makeApp(t);
  const roId = await createUser(app, { name: 'RO', email: 'ro@example.test', password: 'ro-password-1', readonly: true, userLimit: 5 });
  const ro = basic('ro@example.test', 'ro-password-1');
  const dev = await createDevice(app, { name: 'D', uniqueId: 'd' });
  await grant(app, { userId: roId, deviceId: dev });
  const writes: [InjectOptions['method'], string, unknown?][] = [
    ['POST', '/api/devices', { name: 'X', uniqueId: 'x' }],
    ['POST', '/api/users', { name: 'X', email: 'x@example.test', password: 'x-password-1' }],
    ['PUT', `/api/users/${roId}`, { name: 'RO2', email: 'ro@example.test' }],
    ['DELETE', `/api/users/${roId}`],
    ['POST', '/api/permissions', { userId: roId, deviceId: dev }],
    ['DELETE', '/api/permissions', { userId: roId, deviceId: dev }],
    ['PUT', `/api/devices/${dev}`, { name: 'D2', uniqueId: 'd' }],
    ['DELETE', `/api/devices/${dev}`],
    ['POST', `/api/devices/${dev}/token`],
  ];
  for (const [method, url, payload] of writes) {
    t.test(`when a readonly user calls ${method} ${url.replace(/\d+/g, '{id}')}, then 403 readonly-user and nothing changes`, async (t) => {
      isProblem(t, await call(app, ro, method, url, payload), 403, 'readonly-user');
    });
  }

  t.test('when the readonly user reads, then 200: it still sees its user and device', async (t) => {
    t.equal((await call(app, ro, 'GET', `/api/devices/${dev}`)).statusCode, 200);
    t.same(await deviceNames(app, ro), ['D'], 'its device is still there and linked');
    t.same(await userEmails(app, ro), ['ro@example.test'], 'no user was created');
    t.equal(json(await call(app, ro, 'GET', `/api/users/${roId}`)).name, 'RO', 'its name is unchanged');
  });

  t.test('when a readonly user names an unknown user or object, then 404 (precedence 404 before 403)', async (t) => {
    t.equal((await putUser(app, ro, 9999, { name: 'N', email: 'n@example.test' })).statusCode, 404, 'PUT /users/{unknown}');
    t.equal((await call(app, ro, 'DELETE', '/api/users/9999')).statusCode, 404, 'DELETE /users/{unknown}');
    t.equal((await call(app, ro, 'POST', '/api/permissions', { userId: 9999, deviceId: dev })).statusCode, 404, 'POST /permissions, unknown user');
    t.equal((await call(app, ro, 'PUT', '/api/devices/9999', { name: 'N', uniqueId: 'n' })).statusCode, 404, 'PUT /devices/{unknown}');
    t.equal((await call(app, ro, 'POST', '/api/devices/9999/token')).statusCode, 404, 'POST /devices/{unknown}/token');
  });
});

// Identity and access: the bootstrap administrator, the admin API for users and devices, and
// every permission rule of DESIGN section 4 (administrator, manager, readonly, reach).
import t, { type Test } from 'tap';
import type { FastifyInstance, InjectOptions } from 'fastify';
import { Writable } from 'node:stream';
import { ADMIN, adminAuth, basic, createDevice, createUser, grant, json, makeApp, sqliteOnly } from '../fixtures/app.js';
import { FORM, PROBLEM_JSON, SECRET_RE, login, putUser, tempDatabase } from '../fixtures/session.js';

// Spec precedence is 401 → 400 → 404 → 403 → 409 ("Error precedence" in openapi.yaml).


type Auth = string;

function call(app: FastifyInstance, auth: Auth, method: InjectOptions['method'], url: string, payload?: unknown) {
  return app.inject({ method, url, headers: { authorization: auth }, ...(payload === undefined ? {} : { payload: payload as InjectOptions['payload'] }) });
}

async function deviceNames(app: FastifyInstance, auth: Auth): Promise<string[]> {
  const res = await call(app, auth, 'GET', '/api/devices');
  if (res.statusCode !== 200) throw new Error(`GET /devices ${res.statusCode}`);
  return json(res).map((d: { name: string }) => d.name);
}

async function userEmails(app: FastifyInstance, auth: Auth): Promise<string[]> {
  const res = await call(app, auth, 'GET', '/api/users');
  if (res.statusCode !== 200) throw new Error(`GET /users ${res.statusCode}`);
  return json(res).map((u: { email: string }) => u.email).sort();
}

function isProblem(t: Test, res: { statusCode: number; headers: Record<string, unknown>; body: string }, status: number, kind: string, what = '') {
  t.equal(res.statusCode, status, `${what} status`.trim());
  t.equal(res.headers['content-type'], PROBLEM_JSON, `${what} problem+json`.trim());
  t.equal(json(res as never).type, `urn:cad-incident:problem:${kind}`, `${what} type`.trim());
}

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

t.test('managers', async (t) => {
  async function world(t: Test) {
    const { app } = await makeApp(t);
    const mId = await createUser(app, { name: 'M', email: 'm@example.test', password: 'm-password-1', userLimit: 2 });
    const m = basic('m@example.test', 'm-password-1');
    return { app, mId, m };
  }

  t.test('when a manager creates ordinary users, then they are managed and listed in its GET /users', async (t) => {
    const { app, m } = await world(t);
    const u1 = await call(app, m, 'POST', '/api/users', { name: 'U1', email: 'u1@example.test', password: 'u1-password-1' });
    t.equal(u1.statusCode, 200);
    t.has(json(u1), { administrator: false, userLimit: 0 });
    await createUser(app, { name: 'U2', email: 'u2@example.test', password: 'u2-password-1' }, m);
    await createUser(app, { name: 'Other', email: 'other@example.test', password: 'o-password-1' });
    t.same(await userEmails(app, m), ['m@example.test', 'u1@example.test', 'u2@example.test'], 'itself and its users, not the admin or others');
    t.equal((await call(app, m, 'GET', `/api/users/${json(u1).id}`)).statusCode, 200, 'it may fetch its user');
  });

  t.test('when a manager is at its userLimit, then creating another user is 403 and nobody is created', async (t) => {
    const { app, m } = await world(t);
    await createUser(app, { name: 'U1', email: 'u1@example.test', password: 'u1-password-1' }, m);
    await createUser(app, { name: 'U2', email: 'u2@example.test', password: 'u2-password-1' }, m);
    isProblem(t, await call(app, m, 'POST', '/api/users', { name: 'U3', email: 'u3@example.test', password: 'u3-password-1' }), 403, 'forbidden');
    t.equal((await login(app, 'u3@example.test', 'u3-password-1')).statusCode, 401, 'u3 does not exist');
  });

  t.test('when a manager deletes one of its users at the limit, then it may create one again', async (t) => {
    const { app, m } = await world(t);
    const u1 = await createUser(app, { name: 'U1', email: 'u1@example.test', password: 'u1-password-1' }, m);
    await createUser(app, { name: 'U2', email: 'u2@example.test', password: 'u2-password-1' }, m);
    t.equal((await call(app, m, 'DELETE', `/api/users/${u1}`)).statusCode, 204);
    t.equal((await call(app, m, 'POST', '/api/users', { name: 'U3', email: 'u3@example.test', password: 'u3-password-1' })).statusCode, 200);
  });

  t.test('when a manager creates an administrator, then 403', async (t) => {
    const { app, m } = await world(t);
    isProblem(t, await call(app, m, 'POST', '/api/users', { name: 'A', email: 'a@example.test', password: 'a-password-1', administrator: true }), 403, 'forbidden');
    t.equal((await login(app, 'a@example.test', 'a-password-1')).statusCode, 401, 'nobody was created');
  });

  t.test('when a manager creates a user with a userLimit, then 403', async (t) => {
    const { app, m } = await world(t);
    isProblem(t, await call(app, m, 'POST', '/api/users', { name: 'S', email: 's@example.test', password: 's-password-1', userLimit: 1 }), 403, 'forbidden');
  });

  t.test('when a manager changes administrator or userLimit of its user, then 403 and the user is unchanged', async (t) => {
    const { app, m } = await world(t);
    const u = await createUser(app, { name: 'U', email: 'u@example.test', password: 'u-password-1' }, m);
    isProblem(t, await putUser(app, m, u, { name: 'U', email: 'u@example.test', administrator: true }), 403, 'forbidden', 'administrator:');
    isProblem(t, await putUser(app, m, u, { name: 'U', email: 'u@example.test', userLimit: 10 }), 403, 'forbidden', 'userLimit:');
    t.has(json(await call(app, adminAuth(), 'GET', `/api/users/${u}`)), { administrator: false, userLimit: 0 });
  });

  t.test('when a manager changes other settings of its user (readonly, disabled, name), then 200', async (t) => {
    const { app, m } = await world(t);
    const u = await createUser(app, { name: 'U', email: 'u@example.test', password: 'u-password-1' }, m);
    const res = await putUser(app, m, u, { name: 'U2', email: 'u@example.test', readonly: true, disabled: true });
    t.equal(res.statusCode, 200);
    t.has(json(res), { name: 'U2', readonly: true, disabled: true });
  });

  t.test('when a manager touches a user it does not manage, then 403 for GET, PUT and DELETE', async (t) => {
    const { app, m } = await world(t);
    const other = await createUser(app, { name: 'O', email: 'o@example.test', password: 'o-password-1' });
    isProblem(t, await call(app, m, 'GET', `/api/users/${other}`), 403, 'forbidden', 'GET');
    isProblem(t, await putUser(app, m, other, { name: 'O2', email: 'o@example.test' }), 403, 'forbidden', 'PUT');
    isProblem(t, await call(app, m, 'DELETE', `/api/users/${other}`), 403, 'forbidden', 'DELETE');
    isProblem(t, await call(app, m, 'GET', '/api/users/1'), 403, 'forbidden', 'GET the admin');
  });

  t.test('when a manager changes its own userLimit, then 403', async (t) => {
    const { app, mId, m } = await world(t);
    isProblem(t, await putUser(app, m, mId, { name: 'M', email: 'm@example.test', userLimit: 100 }), 403, 'forbidden');
  });
});

t.test('plain users', async (t) => {
  async function world(t: Test) {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'P', email: 'p@example.test', password: 'p-password-1' });
    return { app, id, p: basic('p@example.test', 'p-password-1') };
  }

  t.test('when a plain user sets its own administrator flag, then 403 and it stays a plain user', async (t) => {
    const { app, id, p } = await world(t);
    isProblem(t, await putUser(app, p, id, { name: 'P', email: 'p@example.test', administrator: true }), 403, 'forbidden');
    t.equal(json(await call(app, p, 'GET', `/api/users/${id}`)).administrator, false);
  });

  t.test('when a plain user raises its own limits or lifts readonly-type flags, then 403', async (t) => {
    const { app, id, p } = await world(t);
    for (const change of [{ userLimit: 5 }, { deviceLimit: 5 }, { readonly: true }, { expirationTime: '2030-01-01T00:00:00Z' }]) {
      t.equal((await putUser(app, p, id, { name: 'P', email: 'p@example.test', ...change })).statusCode, 403, JSON.stringify(change));
    }
  });

  t.test('when a plain user restates its current privileges unchanged, then 200', async (t) => {
    const { app, id, p } = await world(t);
    t.equal((await putUser(app, p, id, { name: 'P', email: 'p@example.test', administrator: false, userLimit: 0 })).statusCode, 200);
  });

  t.test('when a plain user changes its own name, phone and password, then 200', async (t) => {
    const { app, id, p } = await world(t);
    const res = await putUser(app, p, id, { name: 'Pat', email: 'p@example.test', phone: '+44 1', password: 'p-password-2' });
    t.equal(res.statusCode, 200);
    t.has(json(res), { name: 'Pat', phone: '+44 1' });
    t.equal((await login(app, 'p@example.test', 'p-password-2')).statusCode, 200);
  });

  t.test('when a plain user creates a user or touches another, then 403', async (t) => {
    const { app, p } = await world(t);
    const other = await createUser(app, { name: 'O', email: 'o@example.test', password: 'o-password-1' });
    isProblem(t, await call(app, p, 'POST', '/api/users', { name: 'X', email: 'x@example.test', password: 'x-password-1' }), 403, 'forbidden', 'POST');
    isProblem(t, await call(app, p, 'GET', `/api/users/${other}`), 403, 'forbidden', 'GET');
    isProblem(t, await putUser(app, p, other, { name: 'O', email: 'o@example.test' }), 403, 'forbidden', 'PUT');
    isProblem(t, await call(app, p, 'DELETE', `/api/users/${other}`), 403, 'forbidden', 'DELETE');
  });

  t.test('when a plain user lists users, then it sees only itself', async (t) => {
    const { app, p } = await world(t);
    await createUser(app, { name: 'O', email: 'o@example.test', password: 'o-password-1' });
    t.same(await userEmails(app, p), ['p@example.test']);
  });
});

t.test('the last administrator', async (t) => {
  t.test('when the last administrator would be demoted, then 409 last-administrator and it stays an administrator', async (t) => {
    const { app } = await makeApp(t);
    isProblem(t, await putUser(app, adminAuth(), 1, { name: 'A', email: ADMIN.email, administrator: false }), 409, 'last-administrator');
    t.equal(json(await call(app, adminAuth(), 'GET', '/api/users/1')).administrator, true);
  });

  t.test('when the last administrator would be disabled, then 409 and it can still log in', async (t) => {
    const { app } = await makeApp(t);
    isProblem(t, await putUser(app, adminAuth(), 1, { name: 'A', email: ADMIN.email, disabled: true }), 409, 'last-administrator');
    t.equal((await login(app, ADMIN.email, ADMIN.password)).statusCode, 200);
  });

  t.test('when the last administrator would be deleted, then 409 and it still exists', async (t) => {
    const { app } = await makeApp(t);
    isProblem(t, await call(app, adminAuth(), 'DELETE', '/api/users/1'), 409, 'last-administrator');
    t.equal((await call(app, adminAuth(), 'GET', '/api/users/1')).statusCode, 200);
  });

  t.test('when the only other administrator is disabled, then the enabled one is still the last (409)', async (t) => {
    const { app } = await makeApp(t);
    await createUser(app, { name: 'A2', email: 'a2@example.test', password: 'a2-password-1', administrator: true, disabled: true });
    t.equal((await call(app, adminAuth(), 'DELETE', '/api/users/1')).statusCode, 409);
    t.equal((await putUser(app, adminAuth(), 1, { name: 'A', email: ADMIN.email, administrator: false })).statusCode, 409);
  });

  t.test('when another enabled administrator exists, then the first may be demoted or deleted', async (t) => {
    const { app } = await makeApp(t);
    await createUser(app, { name: 'A2', email: 'a2@example.test', password: 'a2-password-1', administrator: true });
    const a2 = basic('a2@example.test', 'a2-password-1');
    t.equal((await putUser(app, a2, 1, { name: 'A', email: ADMIN.email, administrator: false })).statusCode, 200);
    t.equal((await call(app, a2, 'DELETE', '/api/users/1')).statusCode, 204);
    isProblem(t, await call(app, a2, 'DELETE', '/api/users/2'), 409, 'last-administrator', 'now a2 is the last:');
  });

  t.test('when the last administrator would be made readonly or given a past expirationTime, then 409: either locks every administrator out', async (t) => {
    const { app } = await makeApp(t);
    t.equal((await putUser(app, adminAuth(), 1, { name: 'A', email: ADMIN.email, readonly: true })).statusCode, 409, 'readonly');
    // a fresh app, so the second case starts from a usable administrator
    const { app: app2 } = await makeApp(t);
    t.equal((await putUser(app2, adminAuth(), 1, { name: 'A', email: ADMIN.email, expirationTime: '2020-01-01T00:00:00Z' })).statusCode, 409, 'expirationTime in the past');
    t.equal((await login(app2, ADMIN.email, ADMIN.password)).statusCode, 200, 'the administrator can still log in');
  });

  t.test('when the last administrator would be given a future expirationTime, then 409 (it would lock everyone out later); with a second administrator, 200', async (t) => {
    const { app } = await makeApp(t);
    const later = new Date(Date.now() + 60_000).toISOString();
    isProblem(t, await putUser(app, adminAuth(), 1, { name: 'A', email: ADMIN.email, expirationTime: later }), 409, 'last-administrator', 'alone:');
    t.equal((await putUser(app, adminAuth(), 1, { name: 'Renamed', email: ADMIN.email })).statusCode, 200, 'other changes still go through');
    await createUser(app, { name: 'A2', email: 'a2@example.test', password: 'a2-password-1', administrator: true });
    t.equal((await putUser(app, adminAuth(), 1, { name: 'A', email: ADMIN.email, expirationTime: later })).statusCode, 200, 'with another working administrator');
  });
});

t.test('devices and reach', async (t) => {
  // admin; manager M (userLimit 5) managing U; stranger S. D1 linked to U, D2 to M, D3 to S, D4 to nobody.
  async function world(t: Test) {
    const { app } = await makeApp(t);
    const mId = await createUser(app, { name: 'M', email: 'm@example.test', password: 'm-password-1', userLimit: 5 });
    const m = basic('m@example.test', 'm-password-1');
    const uId = await createUser(app, { name: 'U', email: 'u@example.test', password: 'u-password-1' }, m);
    const sId = await createUser(app, { name: 'S', email: 's@example.test', password: 's-password-1' });
    const d1 = await createDevice(app, { name: 'D1', uniqueId: 'd1' });
    const d2 = await createDevice(app, { name: 'D2', uniqueId: 'd2' });
    const d3 = await createDevice(app, { name: 'D3', uniqueId: 'd3' });
    const d4 = await createDevice(app, { name: 'D4', uniqueId: 'd4' });
    await grant(app, { userId: uId, deviceId: d1 });
    await grant(app, { userId: mId, deviceId: d2 });
    await grant(app, { userId: sId, deviceId: d3 });
    return { app, mId, m, uId, u: basic('u@example.test', 'u-password-1'), sId, s: basic('s@example.test', 's-password-1'), d1, d2, d3, d4 };
  }

  t.test('when users list devices, then each sees only the devices linked to it or to users it manages; the admin sees all', async (t) => {
    const w = await world(t);
    t.same(await deviceNames(w.app, w.u), ['D1']);
    t.same(await deviceNames(w.app, w.m), ['D1', 'D2'], "the manager reaches its own and its user's devices");
    t.same(await deviceNames(w.app, w.s), ['D3']);
    t.same(await deviceNames(w.app, adminAuth()), ['D1', 'D2', 'D3', 'D4']);
  });

  t.test("when a user fetches another's device, then 403 forbidden", async (t) => {
    const w = await world(t);
    isProblem(t, await call(w.app, w.u, 'GET', `/api/devices/${w.d2}`), 403, 'forbidden', "the manager's device:");
    isProblem(t, await call(w.app, w.u, 'GET', `/api/devices/${w.d3}`), 403, 'forbidden', "a stranger's device:");
    isProblem(t, await call(w.app, w.m, 'GET', `/api/devices/${w.d4}`), 403, 'forbidden', 'an unlinked device:');
    t.equal((await call(w.app, w.m, 'GET', `/api/devices/${w.d1}`)).statusCode, 200, "the manager fetches its user's device");
  });

  t.test('when a device does not exist, then 404 for GET, PUT, DELETE and the token', async (t) => {
    const w = await world(t);
    isProblem(t, await call(w.app, w.u, 'GET', '/api/devices/999'), 404, 'not-found', 'GET');
    isProblem(t, await call(w.app, w.u, 'PUT', '/api/devices/999', { name: 'X', uniqueId: 'x' }), 404, 'not-found', 'PUT');
    isProblem(t, await call(w.app, w.u, 'DELETE', '/api/devices/999'), 404, 'not-found', 'DELETE');
    isProblem(t, await call(w.app, adminAuth(), 'POST', '/api/devices/999/token'), 404, 'not-found', 'token');
  });

  t.test('when a user changes or deletes a device it does not reach, then 403 and the device is unchanged', async (t) => {
    const w = await world(t);
    isProblem(t, await call(w.app, w.u, 'PUT', `/api/devices/${w.d3}`, { name: 'Mine', uniqueId: 'd3' }), 403, 'forbidden', 'PUT');
    isProblem(t, await call(w.app, w.u, 'DELETE', `/api/devices/${w.d3}`), 403, 'forbidden', 'DELETE');
    t.same(await deviceNames(w.app, w.s), ['D3']);
  });

  t.test('when a non-admin links itself to a device it does not reach, then 403 and it still cannot see it', async (t) => {
    const w = await world(t);
    isProblem(t, await call(w.app, w.u, 'POST', '/api/permissions', { userId: w.uId, deviceId: w.d3 }), 403, 'forbidden');
    t.same(await deviceNames(w.app, w.u), ['D1']);
  });

  t.test('when a non-admin links a device to a user it does not manage, then 403', async (t) => {
    const w = await world(t);
    isProblem(t, await call(w.app, w.u, 'POST', '/api/permissions', { userId: w.sId, deviceId: w.d1 }), 403, 'forbidden', 'plain user:');
    isProblem(t, await call(w.app, w.m, 'POST', '/api/permissions', { userId: w.sId, deviceId: w.d2 }), 403, 'forbidden', 'manager:');
    t.same(await deviceNames(w.app, w.s), ['D3']);
  });

  t.test('when a manager shares its device with its user, then 204 and the user sees it', async (t) => {
    const w = await world(t);
    const res = await call(w.app, w.m, 'POST', '/api/permissions', { userId: w.uId, deviceId: w.d2 });
    t.equal(res.statusCode, 204);
    t.equal(res.body, '');
    t.same(await deviceNames(w.app, w.u), ['D1', 'D2']);
    t.equal((await call(w.app, w.m, 'POST', '/api/permissions', { userId: w.uId, deviceId: w.d2 })).statusCode, 204, 'linking twice is harmless');
  });

  t.test('when a link is deleted, then the user loses the device (list and fetch)', async (t) => {
    const w = await world(t);
    t.equal((await call(w.app, w.u, 'GET', `/api/devices/${w.d1}`)).statusCode, 200, 'reachable before');
    t.equal((await call(w.app, adminAuth(), 'DELETE', '/api/permissions', { userId: w.uId, deviceId: w.d1 })).statusCode, 204);
    t.same(await deviceNames(w.app, w.u), []);
    t.equal((await call(w.app, w.u, 'GET', `/api/devices/${w.d1}`)).statusCode, 403);
    t.same(await deviceNames(w.app, w.m), ['D2'], 'the manager no longer reaches it through its user');
    t.equal((await call(w.app, adminAuth(), 'DELETE', '/api/permissions', { userId: w.uId, deviceId: w.d1 })).statusCode, 204, 'deleting a missing link is harmless');
  });

  t.test('when a manager stops managing a user, then it no longer reaches that user\'s devices', async (t) => {
    const w = await world(t);
    t.equal((await call(w.app, adminAuth(), 'DELETE', '/api/permissions', { userId: w.mId, managedUserId: w.uId })).statusCode, 204);
    t.same(await deviceNames(w.app, w.m), ['D2']);
    t.equal((await call(w.app, w.m, 'GET', `/api/devices/${w.d1}`)).statusCode, 403);
  });

  t.test('when a permission names an unknown user or device, then 404', async (t) => {
    const w = await world(t);
    isProblem(t, await call(w.app, adminAuth(), 'POST', '/api/permissions', { userId: 999, deviceId: w.d1 }), 404, 'not-found', 'user:');
    isProblem(t, await call(w.app, adminAuth(), 'POST', '/api/permissions', { userId: w.uId, deviceId: 999 }), 404, 'not-found', 'device:');
  });

  t.test('when a permission body names two links or none, then 400', async (t) => {
    const w = await world(t);
    isProblem(t, await call(w.app, adminAuth(), 'POST', '/api/permissions', { userId: w.uId, deviceId: w.d1, managedUserId: w.sId }), 400, 'invalid-request', 'two:');
    isProblem(t, await call(w.app, adminAuth(), 'POST', '/api/permissions', { userId: w.uId }), 400, 'invalid-request', 'none:');
  });

  t.test('when a device is created with a uniqueId already in use, then 409 unique-id-taken (create and update)', async (t) => {
    const w = await world(t);
    isProblem(t, await call(w.app, adminAuth(), 'POST', '/api/devices', { name: 'X', uniqueId: 'd1' }), 409, 'unique-id-taken', 'POST:');
    isProblem(t, await call(w.app, adminAuth(), 'PUT', `/api/devices/${w.d2}`, { name: 'D2', uniqueId: 'd1' }), 409, 'unique-id-taken', 'PUT:');
    t.same(await deviceNames(w.app, adminAuth()), ['D1', 'D2', 'D3', 'D4'], 'nothing added');
  });

  t.test('when a user creates a device, then it is linked to it and server-owned fields are ignored', async (t) => {
    const w = await world(t);
    // new users create no devices unless given a deviceLimit (USER_DEFAULT_DEVICE_LIMIT is 0)
    await putUser(w.app, adminAuth(), w.sId, { name: 'S', email: 's@example.test', deviceLimit: -1 });
    const res = await call(w.app, w.s, 'POST', '/api/devices', { name: 'S2', uniqueId: 's2', status: 'online', lastUpdate: '2020-01-01T00:00:00Z', id: 77 });
    t.equal(res.statusCode, 200);
    t.has(json(res), { name: 'S2', uniqueId: 's2', status: 'unknown', lastUpdate: null, disabled: false });
    t.not(json(res).id, 77);
    t.same(await deviceNames(w.app, w.s), ['D3', 'S2']);
  });

  t.test('when a user is at its deviceLimit, then creating a device is 403 and nothing is created', async (t) => {
    const { app } = await makeApp(t);
    await createUser(app, { name: 'L', email: 'l@example.test', password: 'l-password-1', deviceLimit: 1 });
    const l = basic('l@example.test', 'l-password-1');
    t.equal((await call(app, l, 'POST', '/api/devices', { name: 'E1', uniqueId: 'e1' })).statusCode, 200);
    isProblem(t, await call(app, l, 'POST', '/api/devices', { name: 'E2', uniqueId: 'e2' }), 403, 'forbidden');
    t.same(await deviceNames(app, adminAuth()), ['E1']);
  });

  t.test('when a user has deviceLimit 0, then it may create no device', async (t) => {
    const { app } = await makeApp(t);
    await createUser(app, { name: 'Z', email: 'z@example.test', password: 'z-password-1', deviceLimit: 0 });
    t.equal((await call(app, basic('z@example.test', 'z-password-1'), 'POST', '/api/devices', { name: 'E', uniqueId: 'e' })).statusCode, 403);
  });

  t.test('when a deviceReadonly user creates or changes a device, then 403', async (t) => {
    const w = await world(t);
    await putUser(w.app, adminAuth(), w.sId, { name: 'S', email: 's@example.test', deviceReadonly: true });
    isProblem(t, await call(w.app, w.s, 'POST', '/api/devices', { name: 'X', uniqueId: 'x' }), 403, 'forbidden', 'POST:');
    isProblem(t, await call(w.app, w.s, 'PUT', `/api/devices/${w.d3}`, { name: 'X', uniqueId: 'd3' }), 403, 'forbidden', 'PUT:');
  });
});

t.test('device tokens', async (t) => {
  t.test('when an administrator mints a device token, then 200 text/plain with a 43-character token, new each time', async (t) => {
    const { app } = await makeApp(t);
    const dev = await createDevice(app, { name: 'D', uniqueId: 'd' });
    const a = await call(app, adminAuth(), 'POST', `/api/devices/${dev}/token`);
    t.equal(a.statusCode, 200);
    t.equal(a.headers['content-type'], 'text/plain; charset=utf-8');
    t.match(a.body, SECRET_RE);
    const b = await call(app, adminAuth(), 'POST', `/api/devices/${dev}/token`);
    t.not(b.body, a.body);
  });

  t.test('when a user who reaches the device mints a token, then 200', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'U', email: 'u@example.test', password: 'u-password-1' });
    const dev = await createDevice(app, { name: 'D', uniqueId: 'd' });
    await grant(app, { userId: id, deviceId: dev });
    const res = await call(app, basic('u@example.test', 'u-password-1'), 'POST', `/api/devices/${dev}/token`);
    t.equal(res.statusCode, 200);
    t.match(res.body, SECRET_RE);
  });

  t.test('when a readonly user who reaches the device mints a token, then 403', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'RO', email: 'ro@example.test', password: 'ro-password-1', readonly: true });
    const dev = await createDevice(app, { name: 'D', uniqueId: 'd' });
    await grant(app, { userId: id, deviceId: dev });
    isProblem(t, await call(app, basic('ro@example.test', 'ro-password-1'), 'POST', `/api/devices/${dev}/token`), 403, 'readonly-user');
  });

  t.test('when a user who does not reach the device mints a token, then 403', async (t) => {
    const { app } = await makeApp(t);
    await createUser(app, { name: 'U', email: 'u@example.test', password: 'u-password-1' });
    const dev = await createDevice(app, { name: 'D', uniqueId: 'd' });
    isProblem(t, await call(app, basic('u@example.test', 'u-password-1'), 'POST', `/api/devices/${dev}/token`), 403, 'forbidden');
  });

  t.test('when nobody is logged in, then minting a device token is 401', async (t) => {
    const { app } = await makeApp(t);
    const dev = await createDevice(app, { name: 'D', uniqueId: 'd' });
    const res = await app.inject({ method: 'POST', url: `/api/devices/${dev}/token` });
    t.equal(res.statusCode, 401);
    t.equal(res.headers['www-authenticate'], 'Basic realm="api", Bearer');
  });
});

// Identity and access: bootstrap, the admin API, and every permission rule of DESIGN section 4.
import t from 'tap';
import { ADMIN, adminAuth, basic, createDevice, createUser, grant, json, makeApp } from '../fixtures/app.js';
import { Writable } from 'node:stream';

const ro = basic('ro@example.test', 'ro-password');

t.test('when the database is empty, then the administrator is created once from ADMIN_EMAIL / ADMIN_PASSWORD', async (t) => {
  const { app } = await makeApp(t);
  const users = json(await app.inject({ method: 'GET', url: '/api/users', headers: { authorization: adminAuth() } }));
  t.same(users.map((u: { email: string; administrator: boolean }) => [u.email, u.administrator]), [[ADMIN.email, true]]);
});

t.test('when no admin password is configured, then a random one is generated and logged once', async (t) => {
  const lines: string[] = [];
  const stream = new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) });
  const { app } = await makeApp(t, { config: { adminEmail: undefined, adminPassword: undefined }, logger: { level: 'info', stream } });
  const line = lines.find((l) => l.includes('generated password'));
  t.ok(line, 'the password is in the log');
  const password = /generated password: (\S+)"/.exec(line!)![1]!;
  t.equal((await app.inject({ method: 'GET', url: '/api/session', headers: { authorization: basic('admin', password) } })).statusCode, 200);
});

t.test('users', async (t) => {
  t.test('when an admin creates a user, then 200 without any password; a duplicate email is 409', async (t) => {
    const { app } = await makeApp(t);
    const res = await app.inject({ method: 'POST', url: '/api/users', headers: { authorization: adminAuth() }, payload: { name: 'A', email: 'A@Example.test', password: 'a-password' } });
    t.equal(res.statusCode, 200);
    t.notMatch(res.body, /password|scrypt/i);
    const dup = await app.inject({ method: 'POST', url: '/api/users', headers: { authorization: adminAuth() }, payload: { name: 'B', email: 'a@example.TEST', password: 'b-password' } });
    t.equal(dup.statusCode, 409);
    t.equal(json(dup).type, 'urn:cad-incident:problem:email-taken');
  });

  t.test('when a readonly user tries to change anything, then 403', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'RO', email: 'ro@example.test', password: 'ro-password', readonly: true });
    const dev = await createDevice(app, { name: 'D', uniqueId: 'd' });
    await grant(app, { userId: id, deviceId: dev });
    const tries = [
      { method: 'POST' as const, url: '/api/devices', payload: { name: 'X', uniqueId: 'x' } },
      { method: 'POST' as const, url: '/api/users', payload: { name: 'X', email: 'x@example.test', password: 'x-password' } },
      { method: 'PUT' as const, url: `/api/users/${id}`, payload: { name: 'RO2', email: 'ro@example.test' } },
      { method: 'PUT' as const, url: `/api/devices/${dev}`, payload: { name: 'D2', uniqueId: 'd' } },
      { method: 'POST' as const, url: `/api/devices/${dev}/token` },
      { method: 'POST' as const, url: '/api/permissions', payload: { userId: id, deviceId: dev } },
    ];
    for (const req of tries) t.equal((await app.inject({ ...req, headers: { authorization: ro } })).statusCode, 403, `${req.method} ${req.url}`);
    t.equal((await app.inject({ method: 'GET', url: `/api/devices/${dev}`, headers: { authorization: ro } })).statusCode, 200, 'reading is fine');
  });

  t.test('when a manager creates users, then they are managed, limited by userLimit, and ordinary', async (t) => {
    const { app } = await makeApp(t);
    await createUser(app, { name: 'M', email: 'm@example.test', password: 'm-password', userLimit: 2 });
    const m = basic('m@example.test', 'm-password');
    const u1 = await createUser(app, { name: 'U1', email: 'u1@example.test', password: 'u1-password' }, m);
    await createUser(app, { name: 'U2', email: 'u2@example.test', password: 'u2-password' }, m);
    const third = await app.inject({ method: 'POST', url: '/api/users', headers: { authorization: m }, payload: { name: 'U3', email: 'u3@example.test', password: 'u3-password' } });
    t.equal(third.statusCode, 403, 'userLimit reached');
    const mine = json(await app.inject({ method: 'GET', url: '/api/users', headers: { authorization: m } }));
    t.same(mine.map((u: { email: string }) => u.email).sort(), ['m@example.test', 'u1@example.test', 'u2@example.test']);
    const admin = await app.inject({ method: 'POST', url: '/api/users', headers: { authorization: m }, payload: { name: 'A', email: 'a@example.test', password: 'a-password', administrator: true } });
    t.equal(admin.statusCode, 403, 'no administrators from managers');
    const promote = await app.inject({ method: 'PUT', url: `/api/users/${u1}`, headers: { authorization: m }, payload: { name: 'U1', email: 'u1@example.test', userLimit: 10 } });
    t.equal(promote.statusCode, 403, 'a manager cannot hand out userLimit');
    const ok = await app.inject({ method: 'PUT', url: `/api/users/${u1}`, headers: { authorization: m }, payload: { name: 'U1', email: 'u1@example.test', readonly: true } });
    t.equal(ok.statusCode, 200, 'but may make its user readonly');
    t.equal((await app.inject({ method: 'GET', url: '/api/users/1', headers: { authorization: m } })).statusCode, 403, 'not the admin');
  });

  t.test('when a plain user edits itself, then it may not grant itself privileges', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'P', email: 'p@example.test', password: 'p-password' });
    const p = basic('p@example.test', 'p-password');
    const res = await app.inject({ method: 'PUT', url: `/api/users/${id}`, headers: { authorization: p }, payload: { name: 'P', email: 'p@example.test', administrator: true } });
    t.equal(res.statusCode, 403);
    const fine = await app.inject({ method: 'PUT', url: `/api/users/${id}`, headers: { authorization: p }, payload: { name: 'Pat', email: 'p@example.test', phone: '+44 1' } });
    t.equal(fine.statusCode, 200);
    t.equal(json(fine).phone, '+44 1');
  });

  t.test('when the last administrator would be demoted, disabled or deleted, then 409', async (t) => {
    const { app } = await makeApp(t);
    for (const payload of [{ administrator: false }, { disabled: true }]) {
      const res = await app.inject({ method: 'PUT', url: '/api/users/1', headers: { authorization: adminAuth() }, payload: { name: 'A', email: ADMIN.email, ...payload } });
      t.equal(res.statusCode, 409);
      t.equal(json(res).type, 'urn:cad-incident:problem:last-administrator');
    }
    t.equal((await app.inject({ method: 'DELETE', url: '/api/users/1', headers: { authorization: adminAuth() } })).statusCode, 409);
    await createUser(app, { name: 'A2', email: 'a2@example.test', password: 'a2-password', administrator: true });
    t.equal((await app.inject({ method: 'DELETE', url: '/api/users/1', headers: { authorization: basic('a2@example.test', 'a2-password') } })).statusCode, 204, 'with another admin it is fine');
  });
});

t.test('devices and permissions', async (t) => {
  t.test('when users list devices, then each sees only the devices linked to it or to users it manages', async (t) => {
    const { app } = await makeApp(t);
    const mId = await createUser(app, { name: 'M', email: 'm@example.test', password: 'm-password', userLimit: 5 });
    const m = basic('m@example.test', 'm-password');
    const uId = await createUser(app, { name: 'U', email: 'u@example.test', password: 'u-password' }, m);
    const u = basic('u@example.test', 'u-password');
    const d1 = await createDevice(app, { name: 'D1', uniqueId: 'd1' });
    const d2 = await createDevice(app, { name: 'D2', uniqueId: 'd2' });
    await createDevice(app, { name: 'D3', uniqueId: 'd3' });
    await grant(app, { userId: uId, deviceId: d1 });
    await grant(app, { userId: mId, deviceId: d2 });
    const names = async (auth: string) => json(await app.inject({ method: 'GET', url: '/api/devices', headers: { authorization: auth } })).map((d: { name: string }) => d.name);
    t.same(await names(u), ['D1']);
    t.same(await names(m), ['D1', 'D2'], "the manager reaches its users' devices");
    t.same(await names(adminAuth()), ['D1', 'D2', 'D3']);
    t.equal((await app.inject({ method: 'GET', url: `/api/devices/${d2}`, headers: { authorization: u } })).statusCode, 403);
    t.equal((await app.inject({ method: 'GET', url: '/api/devices/999', headers: { authorization: u } })).statusCode, 404);
    const steal = await app.inject({ method: 'POST', url: '/api/permissions', headers: { authorization: u }, payload: { userId: uId, deviceId: d2 } });
    t.equal(steal.statusCode, 403, 'cannot link a device it does not reach');
    const share = await app.inject({ method: 'POST', url: '/api/permissions', headers: { authorization: m }, payload: { userId: uId, deviceId: d2 } });
    t.equal(share.statusCode, 204, 'a manager shares its device with its user');
    t.same(await names(u), ['D1', 'D2']);
    t.equal((await app.inject({ method: 'DELETE', url: '/api/permissions', headers: { authorization: adminAuth() }, payload: { userId: uId, deviceId: d1 } })).statusCode, 204);
    t.same(await names(u), ['D2']);
    t.equal((await app.inject({ method: 'POST', url: '/api/permissions', headers: { authorization: adminAuth() }, payload: { userId: 999, deviceId: d1 } })).statusCode, 404);
    t.equal((await app.inject({ method: 'POST', url: '/api/permissions', headers: { authorization: adminAuth() }, payload: { userId: uId, deviceId: d1, incidentId: 1 } })).statusCode, 400, 'exactly one link');
  });

  t.test('when a device is created, then uniqueId is unique (409), deviceLimit holds (403) and server-owned fields are ignored', async (t) => {
    const { app } = await makeApp(t);
    await createUser(app, { name: 'L', email: 'l@example.test', password: 'l-password', deviceLimit: 1 });
    const l = basic('l@example.test', 'l-password');
    const first = await app.inject({ method: 'POST', url: '/api/devices', headers: { authorization: l }, payload: { name: 'E1', uniqueId: 'u-1', status: 'online', lastUpdate: '2020-01-01T00:00:00Z', id: 77 } });
    t.equal(first.statusCode, 200);
    t.match(json(first), { status: 'unknown', lastUpdate: null });
    t.not(json(first).id, 77);
    t.equal((await app.inject({ method: 'POST', url: '/api/devices', headers: { authorization: l }, payload: { name: 'E2', uniqueId: 'u-2' } })).statusCode, 403, 'deviceLimit');
    const dup = await app.inject({ method: 'POST', url: '/api/devices', headers: { authorization: adminAuth() }, payload: { name: 'E3', uniqueId: 'u-1' } });
    t.equal(dup.statusCode, 409);
    t.equal(json(dup).type, 'urn:cad-incident:problem:unique-id-taken');
  });
});

t.test('when every endpoint with a body is called, then no response carries a password, a hash or a stack', async (t) => {
  const { app } = await makeApp(t);
  const uid = await createUser(app, { name: 'S', email: 's@example.test', password: 'secret-password-1' });
  const dev = await createDevice(app, { name: 'D', uniqueId: 'd' });
  const calls = [
    { method: 'GET' as const, url: '/api/users' },
    { method: 'GET' as const, url: `/api/users/${uid}` },
    { method: 'PUT' as const, url: `/api/users/${uid}`, payload: { name: 'S', email: 's@example.test', password: 'secret-password-2' } },
    { method: 'GET' as const, url: '/api/session' },
    { method: 'GET' as const, url: `/api/session/${uid}` },
    { method: 'GET' as const, url: '/api/devices' },
    { method: 'GET' as const, url: `/api/devices/${dev}` },
    { method: 'GET' as const, url: '/api/session/tokens' },
    { method: 'POST' as const, url: '/api/users', payload: { name: 'S', email: 's@example.test', password: 'secret-password-3' } },
    { method: 'POST' as const, url: '/api/users', payload: { name: 'S', email: 'bad', password: 'x' } },
  ];
  for (const c of calls) {
    const res = await app.inject({ ...c, headers: { authorization: adminAuth() } });
    const text = res.body + JSON.stringify(res.headers);
    t.notMatch(text, /scrypt\$|secret-password|admin-password/i, `${c.method} ${c.url}: no password value or hash`);
    if (res.statusCode < 300) t.notMatch(res.body, /"password"/, `${c.method} ${c.url}: no password field`);
    t.notMatch(text, /\n\s+at /, 'no stack trace');
  }
  const login = await app.inject({ method: 'POST', url: '/api/session', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'email=s%40example.test&password=secret-password-2' });
  t.equal(login.statusCode, 200);
  t.notMatch(login.body, /password|scrypt/i);
});

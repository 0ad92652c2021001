// Identity and access: permission bodies, device creation (uniqueId, server-owned fields,
// deviceLimit, deviceReadonly) and who may mint a device token (DESIGN section 4). Split from
// users-permissions.test.ts (2026-11-29, issue 37); the first part of its 'devices and reach'
// group is in devices-reach.test.ts.
import t from 'tap';
import { adminAuth, basic, createDevice, createUser, grant, json, makeApp } from '../fixtures/app.js';
import { SECRET_RE, putUser } from '../fixtures/session.js';
import { call, deviceNames, isProblem, reachWorld as world } from '../fixtures/access.js';

t.test('devices and reach', async (t) => {

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

// Identity and access: which devices a user reaches (linked to it or to users it manages), and
// linking them with POST/DELETE /permissions (DESIGN section 4). Split from
// users-permissions.test.ts (2026-11-29, issue 37); the rest of its 'devices and reach' group is in
// devices-limits.test.ts.
import t from 'tap';
import { adminAuth } from '../fixtures/app.js';
import { call, deviceNames, isProblem, reachWorld as world } from '../fixtures/access.js';

t.test('devices and reach', async (t) => {

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
});

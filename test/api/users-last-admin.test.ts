// Identity and access: the last enabled administrator cannot be demoted, disabled, deleted, made
// readonly or given an expiry (DESIGN section 4). Split from users-permissions.test.ts
// (2026-11-29, issue 37).
import t from 'tap';
import { ADMIN, adminAuth, basic, createUser, json, makeApp } from '../fixtures/app.js';
import { login, putUser } from '../fixtures/session.js';
import { call, isProblem } from '../fixtures/access.js';

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

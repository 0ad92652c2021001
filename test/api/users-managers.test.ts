// Identity and access: what managers and plain users may do to users (DESIGN section 4).
// Split from users-permissions.test.ts (2026-11-29, issue 37).
import t, { type Test } from 'tap';
import { adminAuth, basic, createUser, json, makeApp } from '../fixtures/app.js';
import { login, putUser } from '../fixtures/session.js';
import { call, isProblem, userEmails } from '../fixtures/access.js';

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

// Sessions: what ends one: 7 idle days, and the user's state (disabled, deleted, expired, a new
// password, a new email). The interface's Session section, DESIGN sections 3 and 4.
// Split from session.test.ts (2026-11-29, issue 37).
import t from 'tap';
import { ADMIN, FakeClock, adminAuth, basic, createUser, makeApp, sqliteOnly } from '../fixtures/app.js';
import { DAY, HOUR, SECOND, cookieStatus, login, loginCookie, putUser, whoami } from '../fixtures/session.js';

const U = { email: 'u@example.test', password: 'u-password-1' };

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
    const { IdentityRows } = await import('../../src/adapters/sqlite/identity-rows.js');
    const identity = new IdentityRows(db);
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

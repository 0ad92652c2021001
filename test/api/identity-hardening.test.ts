// Identity rules that hold under concurrency and attack (DESIGN sections 4 and 7): limits
// decided inside the transaction that writes, tokens that die with the token they were minted
// with, impersonation that ends with the manager link, a password change that revokes tokens,
// new users that create no devices unless allowed, nothing handed out that was not stored,
// fixedEmail, and emails that only look like another.
import { setPasswordCheckLimits } from '../../src/services/secrets.js';
import t, { type Test } from 'tap';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { ADMIN, FakeClock, adminAuth, basic, bearer, createDevice, createUser, identityPort, json, makeApp, mintToken, sqliteOnly } from '../fixtures/app.js';
import { FORM, PROBLEM_JSON, bearerStatus, cookieOf, cookieStatus, login, putUser, revoke, tempDatabase } from '../fixtures/session.js';
import { IdentityRows } from '../../src/adapters/sqlite/identity-rows.js';
import { Authenticator } from '../../src/services/authenticator.js';
import { Refused } from '../../src/domain/refusal.js';
import { problemOf } from '../../src/http/problem.js';
import { isStorageError } from '../../src/adapters/sqlite/errors.js';

function call(app: FastifyInstance, auth: string, method: InjectOptions['method'], url: string, payload?: unknown) {
  return app.inject({ method, url, headers: { authorization: auth }, ...(payload === undefined ? {} : { payload: payload as InjectOptions['payload'] }) });
}

function isProblem(t: Test, res: LightMyRequestResponse, status: number, kind: string, what = '') {
  t.equal(res.statusCode, status, `${what} status`.trim());
  t.equal(res.headers['content-type'], PROBLEM_JSON, `${what} problem+json`.trim());
  t.equal(json(res).type, `urn:cad-incident:problem:${kind}`, `${what} type`.trim());
}

function statuses(responses: LightMyRequestResponse[]): Record<number, number> {
  const out: Record<number, number> = {};
  for (const r of responses) out[r.statusCode] = (out[r.statusCode] ?? 0) + 1;
  return out;
}

t.test('limits under concurrency (item 4)', async (t) => {
  t.test('when a manager with userLimit 1 sends 20 parallel POST /users, then exactly one is created and 19 are 403', async (t) => {
    // the caller's share of the password-hashing queue is not what is tested here (it would
    // answer some of the 20 with 503 busy before the limit is looked at)
    const before = setPasswordCheckLimits({ shareMax: 100, queueMax: 100, maxWaitMs: Infinity });
    t.teardown(() => void setPasswordCheckLimits(before));
    const { app } = await makeApp(t);
    await createUser(app, { name: 'M', email: 'm@example.test', password: 'm-password-1', userLimit: 1 });
    const m = bearer(await mintToken(app, basic('m@example.test', 'm-password-1')));
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => call(app, m, 'POST', '/api/users', { name: `U${i}`, email: `u${i}@example.test`, password: 'u-password-1' })),
    );
    t.same(statuses(results), { 200: 1, 403: 19 });
    const managed = json(await call(app, adminAuth(), 'GET', '/api/users?userId=2'));
    t.equal(managed.length, 1, 'the manager manages one user');
    t.equal(json(await call(app, adminAuth(), 'GET', '/api/users')).length, 3, 'admin, manager and one user exist');
  });

  t.test('when a user with deviceLimit 1 sends 20 parallel POST /devices, then exactly one device is created and 19 are 403', async (t) => {
    const { app } = await makeApp(t);
    await createUser(app, { name: 'L', email: 'l@example.test', password: 'l-password-1', deviceLimit: 1 });
    const l = bearer(await mintToken(app, basic('l@example.test', 'l-password-1')));
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => call(app, l, 'POST', '/api/devices', { name: `E${i}`, uniqueId: `e${i}` })));
    t.same(statuses(results), { 200: 1, 403: 19 });
    t.equal(json(await call(app, adminAuth(), 'GET', '/api/devices')).length, 1);
  });

  t.test('when a deviceLimit is lowered to 0 while the user\'s POST /devices is authenticating, then the device is refused', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'L', email: 'l@example.test', password: 'l-password-1', deviceLimit: 5 });
    const admin = bearer(await mintToken(app, adminAuth()));
    // Basic credentials not yet verified: the request waits for the password hash, the limit changes meanwhile
    const create = call(app, basic('l@example.test', 'l-password-1'), 'POST', '/api/devices', { name: 'E1', uniqueId: 'e1' });
    const lower = putUser(app, admin, id, { name: 'L', email: 'l@example.test', deviceLimit: 0 });
    const [created, lowered] = await Promise.all([create, lower]);
    t.equal(lowered.statusCode, 200, 'the limit was lowered first (no password hash to wait for)');
    isProblem(t, created, 403, 'forbidden', 'the create decided on the limit as it is when it writes:');
    t.equal(json(await call(app, admin, 'GET', '/api/devices')).length, 0);
  });

  t.test('when the last two administrators demote and delete each other in parallel, then one working administrator remains', { skip: sqliteOnly }, async (t) => {
    const { app, db } = await makeApp(t);
    const b = await createUser(app, { name: 'B', email: 'b@example.test', password: 'b-password-1', administrator: true });
    const aAuth = bearer(await mintToken(app, adminAuth()));
    const bAuth = bearer(await mintToken(app, basic('b@example.test', 'b-password-1')));
    const results = await Promise.all([
      putUser(app, aAuth, b, { name: 'B', email: 'b@example.test', administrator: false }),
      call(app, bAuth, 'DELETE', '/api/users/1'),
      putUser(app, bAuth, 1, { name: 'Administrator', email: ADMIN.email, disabled: true }),
      call(app, aAuth, 'DELETE', `/api/users/${b}`),
    ]);
    for (const r of results) t.ok([200, 204, 401, 404, 409].includes(r.statusCode), `answered ${r.statusCode}`);
    const working = new IdentityRows(db).countWorkingAdministrators(new Date().toISOString(), -1);
    t.equal(working, 1, 'exactly one working administrator is left');
  });
});

t.test('credentials that end together (item 7)', async (t) => {
  t.test('when a token is revoked, then the tokens minted with it, with their children and sessions opened from them, stop working', { skip: sqliteOnly }, async (t) => {
    const { app, db } = await makeApp(t);
    const auth = new Authenticator(identityPort(db), new FakeClock(Date.now()), 7);
    const parent = await mintToken(app, adminAuth());
    const child = await mintToken(app, bearer(parent));
    const grandchild = await mintToken(app, bearer(child));
    const device = await createDevice(app, { name: 'E1', uniqueId: 'e1' });
    const mintDevice = (auth: string) => app.inject({ method: 'POST', url: `/api/devices/${device}/token`, headers: { authorization: auth } }).then((r) => r.body);
    const deviceChild = await mintDevice(bearer(child));
    const deviceOwn = await mintDevice(adminAuth());
    t.equal(await auth.deviceForToken(deviceChild), device, 'a device token minted with the child works before');
    // a session opened from the child, and a token minted through that session
    const fromChild = cookieOf(await app.inject({ method: 'GET', url: `/api/session?token=${child}` }));
    const viaSession = (await app.inject({ method: 'POST', url: '/api/session/token', headers: { ...FORM, cookie: fromChild }, payload: '' })).body;
    const unrelated = await mintToken(app, adminAuth());
    for (const tk of [parent, child, grandchild, viaSession, unrelated]) t.equal(await bearerStatus(app, tk), 200, 'works before');

    t.equal((await revoke(app, { authorization: adminAuth() }, parent)).statusCode, 204);
    t.equal(await bearerStatus(app, parent), 401, 'the parent');
    t.equal(await bearerStatus(app, child), 401, 'its child');
    t.equal(await bearerStatus(app, grandchild), 401, 'its grandchild');
    t.equal(await bearerStatus(app, viaSession), 401, 'a token minted through a session opened from the child');
    t.equal(await cookieStatus(app, fromChild), 404, 'the session opened from the child');
    t.equal(await bearerStatus(app, unrelated), 200, 'a token minted with the password is not touched');
    t.equal(await auth.deviceForToken(deviceChild), null, 'a device token minted with the child');
    t.equal(await auth.deviceForToken(deviceOwn), device, 'a device token minted with the password is not touched');
    const listed = json(await call(app, adminAuth(), 'GET', '/api/session/tokens'));
    t.equal(listed.filter((x: { active: boolean }) => x.active).length, 1, 'the token list shows the descendants revoked');
  });

  t.test('when a token is revoked after it authenticated a request that mints a child, then the mint is refused and no child is stored', { skip: sqliteOnly }, async (t) => {
    const { app, db } = await makeApp(t);
    const identity = new IdentityRows(db);
    const clock = new FakeClock();
    const auth = new Authenticator(identityPort(db), clock, 7);
    const parent = await mintToken(app, adminAuth());
    const principal = await auth.bearer(parent);
    if (!principal) return t.fail('the parent authenticates');
    // between authentication (a hook) and the handler, another request revokes the parent
    t.equal(await auth.revoke(parent), 'revoked');
    const tokens = () => identity.listUserTokens(1).length;
    const before = tokens();
    let refused: unknown;
    try {
      await auth.mintUserToken(principal, undefined);
    } catch (err) {
      refused = err;
    }
    // a service's refusal, answered as the HTTP layer's refusal table says
    t.equal(refused instanceof Refused ? problemOf(refused).status : undefined, 401, 'refused 401');
    t.equal(tokens(), before, 'no child was stored');
  });

  t.test('when the manager link that allowed an impersonation is removed, then the impersonation session ends', async (t) => {
    const { app } = await makeApp(t);
    const managerId = await createUser(app, { name: 'M', email: 'm@example.test', password: 'm-password-1', userLimit: 5 });
    const m = basic('m@example.test', 'm-password-1');
    const plainId = await createUser(app, { name: 'P', email: 'p@example.test', password: 'p-password-1' }, m);
    const cookie = cookieOf(await app.inject({ method: 'GET', url: `/api/session/${plainId}`, headers: { authorization: m } }));
    // and a session the impersonated user opens as itself keeps the impersonator
    const again = cookieOf(await app.inject({ method: 'GET', url: `/api/session/${plainId}`, headers: { cookie } }));
    t.equal(await cookieStatus(app, cookie), 200, 'works before');
    t.equal(await cookieStatus(app, again), 200, 'works before');
    const removed = await app.inject({ method: 'DELETE', url: '/api/permissions', headers: { authorization: adminAuth() }, payload: { userId: managerId, managedUserId: plainId } });
    t.equal(removed.statusCode, 204);
    t.equal(await cookieStatus(app, cookie), 404, 'the impersonation session ends');
    t.equal(await cookieStatus(app, again), 404, 'and the one opened from it');
    t.equal((await login(app, 'p@example.test', 'p-password-1')).statusCode, 200, 'the user itself still logs in');
  });

  t.test('when an administrator who impersonated a user is demoted, then the impersonation session ends', async (t) => {
    const { app } = await makeApp(t);
    const a2 = await createUser(app, { name: 'A2', email: 'a2@example.test', password: 'a2-password-1', administrator: true });
    const plainId = await createUser(app, { name: 'P', email: 'p@example.test', password: 'p-password-1' });
    const cookie = cookieOf(await app.inject({ method: 'GET', url: `/api/session/${plainId}`, headers: { authorization: basic('a2@example.test', 'a2-password-1') } }));
    t.equal(await cookieStatus(app, cookie), 200, 'works before');
    t.equal((await putUser(app, adminAuth(), a2, { name: 'A2', email: 'a2@example.test', administrator: false })).statusCode, 200);
    t.equal(await cookieStatus(app, cookie), 404);
  });

  t.test('when a user\'s password is changed, then its tokens are revoked and its other sessions end', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'U', email: 'u@example.test', password: 'u-password-1' });
    const u = basic('u@example.test', 'u-password-1');
    const token = await mintToken(app, u);
    const other = cookieOf(await login(app, 'u@example.test', 'u-password-1'));
    const mine = cookieOf(await login(app, 'u@example.test', 'u-password-1'));
    const res = await app.inject({ method: 'PUT', url: `/api/users/${id}`, headers: { cookie: mine }, payload: { name: 'U', email: 'u@example.test', password: 'u-password-2' } });
    t.equal(res.statusCode, 200);
    t.equal(await bearerStatus(app, token), 401, 'the token is revoked');
    t.equal(await cookieStatus(app, other), 404, 'the other session ends');
    t.equal(await cookieStatus(app, mine), 200, 'the session that changed it stays');

    // an administrator changing it revokes the tokens too, and ends every session
    const token2 = await mintToken(app, basic('u@example.test', 'u-password-2'));
    t.equal((await putUser(app, adminAuth(), id, { name: 'U', email: 'u@example.test', password: 'u-password-3' })).statusCode, 200);
    t.equal(await bearerStatus(app, token2), 401);
    t.equal(await cookieStatus(app, mine), 404);
  });

  t.test('when access is withdrawn, then identity.generation moves (credential checks of open sockets rely on it)', { skip: sqliteOnly }, async (t) => {
    const { app, db } = await makeApp(t);
    const managerId = await createUser(app, { name: 'M', email: 'm@example.test', password: 'm-password-1', userLimit: 5 });
    const plainId = await createUser(app, { name: 'P', email: 'p@example.test', password: 'p-password-1' }, basic('m@example.test', 'm-password-1'));
    const identity = new IdentityRows(db);
    const moves = (what: string, change: () => void) => {
      const before = identity.generation;
      change();
      t.ok(identity.generation > before, what);
    };
    const token = identity.insertToken({ hash: 'a'.repeat(64), userId: plainId, createdAt: '2026-01-01T00:00:00.000Z', expiresAt: null });
    moves('revoking a token', () => identity.revokeToken(token.id, '2026-01-02T00:00:00.000Z'));
    moves('revoking a user\'s tokens', () => identity.revokeUserTokens(plainId, '2026-01-02T00:00:00.000Z'));
    moves('updating a user', () => identity.updateUser(plainId, { name: 'P2' }));
    moves('removing a manager link', () => identity.unlinkManagedUser(managerId, plainId));
    moves('ending sessions', () => identity.deleteSessionsOf(plainId));
    moves('deleting a user', () => identity.deleteUser(plainId));
  });
});

t.test('who may create devices (item 9)', async (t) => {
  t.test('when an administrator creates a user without deviceLimit, then it gets USER_DEFAULT_DEVICE_LIMIT (0 by default) and creates no device', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'U', email: 'u@example.test', password: 'u-password-1' });
    t.equal(json(await call(app, adminAuth(), 'GET', `/api/users/${id}`)).deviceLimit, 0);
    isProblem(t, await call(app, basic('u@example.test', 'u-password-1'), 'POST', '/api/devices', { name: 'E1', uniqueId: 'e1' }), 403, 'forbidden');
    t.equal(json(await call(app, adminAuth(), 'GET', '/api/devices')).length, 0, 'no device named like a callsign exists');
  });

  t.test('when USER_DEFAULT_DEVICE_LIMIT is 2, then a new user gets deviceLimit 2; a limit the creator sets wins', async (t) => {
    const { app } = await makeApp(t, { config: { userDefaultDeviceLimit: 2 } });
    const id = await createUser(app, { name: 'U', email: 'u@example.test', password: 'u-password-1' });
    t.equal(json(await call(app, adminAuth(), 'GET', `/api/users/${id}`)).deviceLimit, 2);
    const other = await createUser(app, { name: 'V', email: 'v@example.test', password: 'v-password-1', deviceLimit: -1 });
    t.equal(json(await call(app, adminAuth(), 'GET', `/api/users/${other}`)).deviceLimit, -1);
  });

  t.test('when a manager is created without deviceLimit, then it may create devices', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'M', email: 'm@example.test', password: 'm-password-1', userLimit: 2 });
    t.equal(json(await call(app, adminAuth(), 'GET', `/api/users/${id}`)).deviceLimit, -1);
    t.equal((await call(app, basic('m@example.test', 'm-password-1'), 'POST', '/api/devices', { name: 'E1', uniqueId: 'e1' })).statusCode, 200);
  });

  t.test('when a manager gives a user more devices than it may create itself, then 403', async (t) => {
    const { app } = await makeApp(t);
    await createUser(app, { name: 'M', email: 'm@example.test', password: 'm-password-1', userLimit: 5, deviceLimit: 2 });
    const m = basic('m@example.test', 'm-password-1');
    isProblem(t, await call(app, m, 'POST', '/api/users', { name: 'A', email: 'a@example.test', password: 'a-password-1', deviceLimit: -1 }), 403, 'forbidden', 'unlimited:');
    isProblem(t, await call(app, m, 'POST', '/api/users', { name: 'B', email: 'b@example.test', password: 'b-password-1', deviceLimit: 3 }), 403, 'forbidden', 'three:');
    const c = await createUser(app, { name: 'C', email: 'c@example.test', password: 'c-password-1', deviceLimit: 2 }, m);
    isProblem(t, await putUser(app, m, c, { name: 'C', email: 'c@example.test', deviceLimit: 5 }), 403, 'forbidden', 'raised by update:');
    t.equal((await putUser(app, m, c, { name: 'C', email: 'c@example.test', deviceLimit: 1 })).statusCode, 200, 'lowered by update');
  });
});

t.test('nothing handed out that was not stored (identity half of item 8)', async (t) => {
  t.test('isStorageError knows a full disk, an I/O error and a read-only database from other errors', async (t) => {
    const err = (code: string) => Object.assign(new Error(code), { code });
    for (const code of ['SQLITE_FULL', 'SQLITE_IOERR', 'SQLITE_IOERR_WRITE', 'SQLITE_IOERR_FSYNC', 'SQLITE_READONLY', 'SQLITE_READONLY_DBMOVED']) t.ok(isStorageError(err(code)), code);
    for (const code of ['SQLITE_CONSTRAINT_UNIQUE', 'SQLITE_BUSY', 'ENOENT']) t.notOk(isStorageError(err(code)), code);
    t.notOk(isStorageError(new Error('x')));
    t.notOk(isStorageError(undefined));
  });

  // The database may grow only a few pages: the inserts that fit succeed, the first that needs a
  // page it may not have fails. Each credential answered 200 must work, and the first refusal is
  // a 503 storage-unavailable that leaves nothing behind.
  t.test('when the database is full, then minting a token, logging in and minting a device token answer 503 storage-unavailable, and what was answered works', { skip: sqliteOnly }, async (t) => {
    const file = tempDatabase(t);
    const db = file.open();
    const { app } = await makeApp(t, { db });
    const device = await createDevice(app, { name: 'E1', uniqueId: 'e1' });
    const admin = bearer(await mintToken(app, adminAuth()));
    const pages = db.$client.pragma('page_count', { simple: true }) as number;
    db.$client.pragma(`max_page_count = ${pages + 2}`);
    const count = (table: string) => (db.$client.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;

    async function untilRefused(
      what: string,
      table: string,
      send: () => Promise<LightMyRequestResponse>,
      works: (res: LightMyRequestResponse) => Promise<boolean>,
      someFit = true,
    ) {
      let answered = 0;
      for (let i = 0; i < 5000; i++) {
        const before = count(table);
        const res = await send();
        if (res.statusCode === 200) {
          answered++;
          if (count(table) !== before + 1) return t.fail(`${what}: a 200 stored ${count(table) - before} rows`);
          if (i % 50 === 0 && !(await works(res))) return t.fail(`${what}: a credential answered 200 does not work`);
          continue;
        }
        isProblem(t, res, 503, 'storage-unavailable', `${what}:`);
        t.ok(Number(res.headers['retry-after']) > 0, `${what}: Retry-After`);
        t.equal(count(table), before, `${what}: nothing stored`);
        t.equal(res.headers['set-cookie'], undefined, `${what}: no cookie`);
        if (someFit) t.ok(answered > 0, `${what}: some fitted before the database was full`);
        return;
      }
      t.fail(`${what}: never refused`);
    }

    await untilRefused('POST /session/token', 'tokens', () => app.inject({ method: 'POST', url: '/api/session/token', headers: { ...FORM, authorization: admin }, payload: '' }), async (res) => (await bearerStatus(app, res.body)) === 200);
    await untilRefused('POST /session', 'sessions', () => login(app, ADMIN.email, ADMIN.password), async (res) => (await cookieStatus(app, cookieOf(res))) === 200);
    await untilRefused('POST /devices/{id}/token', 'tokens', () => app.inject({ method: 'POST', url: `/api/devices/${device}/token`, headers: { authorization: admin } }), async () => true, false);
    t.equal((await call(app, admin, 'GET', '/api/users')).statusCode, 200, 'reads keep working');
    const created = await call(app, admin, 'POST', '/api/users', { name: 'X'.repeat(128), email: 'x@example.test', password: 'x-password-1', attributes: Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`k${i}`, 'v'.repeat(200)])) });
    isProblem(t, created, 503, 'storage-unavailable', 'POST /users:');
  });
});

t.test('emails (low items)', async (t) => {
  t.test('when a user with fixedEmail changes its own email or clears fixedEmail, then 403; an administrator may', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'F', email: 'f@example.test', password: 'f-password-1', fixedEmail: true });
    const f = basic('f@example.test', 'f-password-1');
    isProblem(t, await putUser(app, f, id, { name: 'F', email: 'other@example.test' }), 403, 'forbidden', 'email:');
    isProblem(t, await putUser(app, f, id, { name: 'F', email: 'f@example.test', fixedEmail: false }), 403, 'forbidden', 'fixedEmail:');
    t.equal((await putUser(app, f, id, { name: 'F2', email: 'f@example.test' })).statusCode, 200, 'other settings may change');
    t.equal((await putUser(app, f, id, { name: 'F2', email: 'F@example.test', fixedEmail: true })).statusCode, 200, 'the same email, as any case');
    const byAdmin = await putUser(app, adminAuth(), id, { name: 'F', email: 'new@example.test', fixedEmail: false });
    t.equal(byAdmin.statusCode, 200);
    t.has(json(byAdmin), { email: 'new@example.test', fixedEmail: false });
  });

  t.test('when an email holds invisible, format or control characters or surrounding space, then 400 on create and update', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'U', email: 'u@example.test', password: 'u-password-1' });
    const lookAlikes = [
      `${ADMIN.email}\u200b`,
      `\u200e${ADMIN.email}`,
      'ad\u00admin@example.test',
      'ad\u2060min@example.test',
      'admin@example.test\ufeff',
      'ad\u0000min@example.test',
      'admin@example.test\u007f',
      'ad\u0085min@example.test',
      'admin@ex\u202eample.test',
      ` ${ADMIN.email}`,
      `${ADMIN.email}\u00a0`,
      `${ADMIN.email}\u3000`,
    ];
    for (const email of lookAlikes) {
      const label = JSON.stringify(email);
      const created = await call(app, adminAuth(), 'POST', '/api/users', { name: 'X', email, password: 'x-password-1' });
      isProblem(t, created, 400, 'invalid-request', `create ${label}:`);
      t.same(json(created).errors?.map((e: { path: string }) => e.path), ['/body/email'], `create ${label}: names the field`);
      isProblem(t, await putUser(app, adminAuth(), id, { name: 'U', email }), 400, 'invalid-request', `update ${label}:`);
    }
    t.equal(json(await call(app, adminAuth(), 'GET', '/api/users')).length, 2, 'no look-alike user exists');
    t.equal((await call(app, adminAuth(), 'POST', '/api/users', { name: 'Ü', email: 'ülrich@exämple.test', password: 'x-password-1' })).statusCode, 200, 'letters of any script are fine');
  });
});

// Hostile callers (DESIGN sections 3, 4 and 7): failed logins are throttled per address and
// per (account, address) without locking the account out elsewhere; expired, revoked and
// disabled credentials are refused; one user never reads, changes, deletes or matches another
// user's incidents and devices; the session cookie carries its flags; oversize `resources`
// are refused; callsigns that look like SQL, LIKE patterns or other Unicode spellings are
// stored and matched literally.
import t, { type Test } from 'tap';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { ADMIN, adminAuth, basic, bearer, createDevice, createUser, FakeClock, grant, json, makeApp, mintToken, sqliteOnly } from '../fixtures/app.js';
import { events, incidentBody, send, world } from '../fixtures/incidents.js';
import type { ThrottleOptions } from '../../src/ports/login-throttle.js';

const PROBLEM_JSON = 'application/problem+json; charset=utf-8';
const CHALLENGE = 'Basic realm="api", Bearer';
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const form = (fields: Record<string, string>) =>
  Object.entries(fields)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
    .join('&');

function login(app: FastifyInstance, email: string, password: string, remoteAddress = '127.0.0.1', headers: Record<string, string> = {}) {
  return app.inject({ method: 'POST', url: '/api/session', headers: { ...FORM, ...headers }, payload: form({ email, password }), remoteAddress });
}

/** the attributes of the JSESSIONID Set-Cookie line, lower-cased, without the value */
function cookieAttributes(res: LightMyRequestResponse): string[] {
  const raw = res.headers['set-cookie'];
  const line = (Array.isArray(raw) ? raw : raw === undefined ? [] : [raw]).map(String).find((c) => c.startsWith('JSESSIONID='));
  if (!line) throw new Error(`no JSESSIONID cookie: ${res.statusCode} ${res.body.slice(0, 200)}`);
  return line
    .split(';')
    .slice(1)
    .map((a) => a.trim().toLowerCase());
}

function assertProblem(t: Test, res: LightMyRequestResponse, status: number, kind: string) {
  t.equal(res.statusCode, status, `${status}`);
  t.equal(res.headers['content-type'], PROBLEM_JSON, 'problem+json');
  t.equal(json(res).type, `urn:cad-incident:problem:${kind}`, kind);
}

/** the app's own login throttle (in the database on PostgreSQL) with these limits, on a clock the test moves */
function throttled(opts: { freeFailures?: number; addressFailures?: number } = {}) {
  const clock = new FakeClock();
  const throttleOptions: ThrottleOptions = { freeFailures: opts.freeFailures ?? 5, windowMs: 15 * MINUTE, addressFailures: opts.addressFailures ?? 50, now: () => clock.now().getTime() };
  return { clock, throttleOptions };
}

t.test('login throttling', async (t) => {
  t.test('when one address keeps sending a wrong password, then it gets 429 problem+json with an integer Retry-After', async (t) => {
    const { clock, throttleOptions } = throttled({ freeFailures: 5 });
    const { app } = await makeApp(t, { clock, throttleOptions });
    const statuses: number[] = [];
    let blocked: LightMyRequestResponse | undefined;
    for (let i = 0; i < 20 && !blocked; i++) {
      const res = await login(app, ADMIN.email, 'wrong-password', '10.0.0.1');
      statuses.push(res.statusCode);
      if (res.statusCode === 429) blocked = res;
    }
    t.same(statuses, [401, 401, 401, 401, 401, 429], 'five free failures, then 429');
    assertProblem(t, blocked!, 429, 'too-many-requests');
    t.match(blocked!.headers['retry-after'], /^[1-9]\d*$/, 'Retry-After is whole seconds');
    t.equal(json(blocked!).status, 429);
    t.equal(blocked!.headers['set-cookie'], undefined, 'no session');
    t.equal((await login(app, ADMIN.email, ADMIN.password, '10.0.0.1')).statusCode, 429, 'the right password waits too, at that address');
  });

  t.test('when an account is throttled at one address, then a correct login for it from another address, and for another account from a third, succeeds', async (t) => {
    const { clock, throttleOptions } = throttled({ freeFailures: 3 });
    const { app } = await makeApp(t, { clock, throttleOptions });
    await createUser(app, { name: 'Other', email: 'other@example.test', password: 'other-password' });
    for (let i = 0; i < 3; i++) await login(app, ADMIN.email, 'wrong-password', '10.0.0.1');
    t.equal((await login(app, ADMIN.email, 'wrong-password', '10.0.0.1')).statusCode, 429, 'throttled at 10.0.0.1');
    const elsewhere = await login(app, ADMIN.email, ADMIN.password, '10.0.0.2');
    t.equal(elsewhere.statusCode, 200, 'the same account from 10.0.0.2 logs in');
    t.equal(json(elsewhere).email, ADMIN.email);
    t.equal((await login(app, 'other@example.test', 'other-password', '10.0.0.3')).statusCode, 200, 'another account from 10.0.0.3 logs in');
    t.equal((await login(app, 'other@example.test', 'other-password', '10.0.0.1')).statusCode, 200, 'another account from the throttled address logs in too: only the admin account is throttled there');
  });

  t.test('when Retry-After has passed, then the right password works again; further failures double the wait', async (t) => {
    const { clock, throttleOptions } = throttled({ freeFailures: 2 });
    const { app } = await makeApp(t, { clock, throttleOptions });
    for (let i = 0; i < 2; i++) await login(app, ADMIN.email, 'wrong', '10.0.0.9');
    const first = await login(app, ADMIN.email, 'wrong', '10.0.0.9');
    t.equal(first.statusCode, 429);
    const wait1 = Number(first.headers['retry-after']);
    clock.advance(wait1 * 1000);
    t.equal((await login(app, ADMIN.email, 'wrong', '10.0.0.9')).statusCode, 401, 'after the wait, one more try is let through');
    const second = await login(app, ADMIN.email, 'wrong', '10.0.0.9');
    t.equal(second.statusCode, 429);
    t.ok(Number(second.headers['retry-after']) > wait1, `the wait grows (${wait1} s, then ${second.headers['retry-after']} s)`);
    clock.advance(Number(second.headers['retry-after']) * 1000);
    t.equal((await login(app, ADMIN.email, ADMIN.password, '10.0.0.9')).statusCode, 200, 'the right password after the wait');
    t.equal((await login(app, ADMIN.email, 'wrong', '10.0.0.9')).statusCode, 401, 'a success forgives the account\'s failures at that address');
  });

  t.test('when one address sprays many accounts, then that address is throttled for every account but no account is throttled elsewhere', async (t) => {
    const { clock, throttleOptions } = throttled({ freeFailures: 5, addressFailures: 6 });
    const { app } = await makeApp(t, { clock, throttleOptions });
    for (let i = 0; i < 6; i++) t.equal((await login(app, `user${i}@example.test`, 'guess', '10.6.6.6')).statusCode, 401, `spray ${i}`);
    t.equal((await login(app, 'user9@example.test', 'guess', '10.6.6.6')).statusCode, 429, 'the address is throttled');
    t.equal((await login(app, ADMIN.email, ADMIN.password, '10.6.6.6')).statusCode, 429, 'for every account, at that address');
    t.equal((await login(app, ADMIN.email, ADMIN.password, '10.1.1.1')).statusCode, 200, 'the accounts log in from elsewhere');
  });

  t.test('when TRUST_PROXY is off, then X-Forwarded-For does not change whose failures count', async (t) => {
    const { clock, throttleOptions } = throttled({ freeFailures: 3 });
    const { app } = await makeApp(t, { clock, throttleOptions });
    for (let i = 0; i < 3; i++) await login(app, ADMIN.email, 'wrong', '10.0.0.5', { 'x-forwarded-for': `198.51.100.${i}` });
    t.equal((await login(app, ADMIN.email, 'wrong', '10.0.0.5', { 'x-forwarded-for': '198.51.100.77' })).statusCode, 429, 'a forged X-Forwarded-For is ignored');
  });

  t.test('when TRUST_PROXY is on, then the forwarded client address is the one throttled', async (t) => {
    const { clock, throttleOptions } = throttled({ freeFailures: 3 });
    const { app } = await makeApp(t, { clock, throttleOptions, config: { trustProxy: true } });
    for (let i = 0; i < 3; i++) await login(app, ADMIN.email, 'wrong', '10.0.0.5', { 'x-forwarded-for': '198.51.100.1' });
    t.equal((await login(app, ADMIN.email, 'wrong', '10.0.0.5', { 'x-forwarded-for': '198.51.100.1' })).statusCode, 429, 'the client behind the proxy is throttled');
    t.equal((await login(app, ADMIN.email, ADMIN.password, '10.0.0.5', { 'x-forwarded-for': '198.51.100.2' })).statusCode, 200, 'another client behind the same proxy is not');
  });

  t.test('when Basic credentials fail repeatedly, then they are throttled like logins, with the same answer', async (t) => {
    const { clock, throttleOptions } = throttled({ freeFailures: 2 });
    const { app } = await makeApp(t, { clock, throttleOptions });
    const get = (password: string, remoteAddress: string) => app.inject({ method: 'GET', url: '/api/incidents', headers: { authorization: basic(ADMIN.email, password) }, remoteAddress });
    t.equal((await get('wrong', '10.0.0.7')).statusCode, 401);
    t.equal((await get('wrong', '10.0.0.7')).statusCode, 401);
    const blocked = await get(ADMIN.password, '10.0.0.7');
    assertProblem(t, blocked, 429, 'too-many-requests');
    t.match(blocked.headers['retry-after'], /^[1-9]\d*$/);
    t.equal((await get(ADMIN.password, '10.0.0.8')).statusCode, 200, 'another address is not blocked');
    t.equal((await login(app, ADMIN.email, ADMIN.password, '10.0.0.7')).statusCode, 429, 'POST /session shares the count');
    clock.advance(Number(blocked.headers['retry-after']) * 1000);
    t.equal((await get(ADMIN.password, '10.0.0.7')).statusCode, 200, 'after Retry-After');
  });
});

t.test('credentials that must no longer work', async (t) => {
  /** GET /incidents with this Authorization header: 401 problem+json with the challenge, or not */
  async function refused(t: Test, app: FastifyInstance, authorization: string, label: string) {
    const res = await app.inject({ method: 'GET', url: '/api/incidents', headers: { authorization } });
    t.equal(res.statusCode, 401, `${label}: 401`);
    t.equal(res.headers['content-type'], PROBLEM_JSON, `${label}: problem+json`);
    t.equal(res.headers['www-authenticate'], CHALLENGE, `${label}: the challenge`);
  }
  const works = async (app: FastifyInstance, authorization: string) => (await app.inject({ method: 'GET', url: '/api/incidents', headers: { authorization } })).statusCode;

  t.test('when a token has expired, then it is refused everywhere', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    const token = await mintToken(app, adminAuth(), new Date(clock.now().getTime() + HOUR).toISOString());
    t.equal(await works(app, bearer(token)), 200, 'before expiry');
    clock.advance(HOUR - 1);
    t.equal(await works(app, bearer(token)), 200, 'a millisecond before expiry');
    clock.advance(1);
    await refused(t, app, bearer(token), 'at expiry');
    t.equal((await app.inject({ method: 'GET', url: '/api/session', headers: { authorization: bearer(token) } })).statusCode, 401, 'GET /session with it');
    t.equal((await app.inject({ method: 'GET', url: `/api/session?token=${token}` })).statusCode, 401, 'GET /session?token= with it');
  });

  t.test('when a token is revoked, by value or by id, then it is refused', async (t) => {
    const { app } = await makeApp(t);
    const byValue = await mintToken(app, adminAuth());
    const byId = await mintToken(app, adminAuth());
    t.equal(await works(app, bearer(byValue)), 200);
    const revoked = await app.inject({ method: 'POST', url: '/api/session/token/revoke', headers: { ...FORM, authorization: adminAuth() }, payload: form({ token: byValue }) });
    t.equal(revoked.statusCode, 204);
    await refused(t, app, bearer(byValue), 'revoked by value');
    const list = json(await app.inject({ method: 'GET', url: '/api/session/tokens', headers: { authorization: bearer(byId) } })) as { id: number; active: boolean }[];
    const active = list.filter((x) => x.active);
    t.equal(active.length, 1, 'one token left active');
    t.equal((await app.inject({ method: 'DELETE', url: `/api/session/tokens/${active[0]!.id}`, headers: { authorization: adminAuth() } })).statusCode, 204);
    await refused(t, app, bearer(byId), 'revoked by id');
  });

  t.test('when a user is disabled, then its token, its password and its session are refused', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'D', email: 'd@example.test', password: 'd-password' });
    const token = await mintToken(app, basic('d@example.test', 'd-password'));
    const cookie = (await login(app, 'd@example.test', 'd-password')).headers['set-cookie'];
    const session = String(Array.isArray(cookie) ? cookie[0] : cookie).split(';')[0]!;
    t.equal(await works(app, bearer(token)), 200, 'before');
    t.equal((await app.inject({ method: 'PUT', url: `/api/users/${id}`, headers: { authorization: adminAuth() }, payload: { name: 'D', email: 'd@example.test', disabled: true } })).statusCode, 200);
    await refused(t, app, bearer(token), 'its token');
    await refused(t, app, basic('d@example.test', 'd-password'), 'its password');
    const viaCookie = await app.inject({ method: 'GET', url: '/api/incidents', headers: { cookie: session } });
    t.equal(viaCookie.statusCode, 401, 'its session cookie');
    t.equal((await login(app, 'd@example.test', 'd-password')).statusCode, 401, 'a new login');
  });

  t.test('when a user passes its expirationTime, then its token, its password and its session are refused', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    await createUser(app, { name: 'E', email: 'e@example.test', password: 'e-password', expirationTime: new Date(clock.now().getTime() + DAY).toISOString() });
    const token = await mintToken(app, basic('e@example.test', 'e-password'));
    const session = String((await login(app, 'e@example.test', 'e-password')).headers['set-cookie']).split(';')[0]!;
    t.equal(await works(app, bearer(token)), 200, 'before expirationTime');
    clock.advance(DAY);
    await refused(t, app, bearer(token), 'its token (minted for 7 days)');
    await refused(t, app, basic('e@example.test', 'e-password'), 'its password');
    t.equal((await app.inject({ method: 'GET', url: '/api/incidents', headers: { cookie: session } })).statusCode, 401, 'its session cookie');
    t.equal((await login(app, 'e@example.test', 'e-password')).statusCode, 401, 'a new login');
  });
});

t.test('isolation between users', async (t) => {
  t.test('when user B owns an incident and devices, then user A can neither read, change, delete, link nor match them', async (t) => {
    const { app } = await makeApp(t);
    const w = await world(app); // A = cad, B = other
    const onlyB = await createDevice(app, { name: 'B9', uniqueId: 'b9-only' });
    await grant(app, { userId: w.otherId, deviceId: onlyB });
    const created = await send(app, w.other, 'POST', '/api/incidents', incidentBody({ originId: 'B-1', resources: ['E1'] }));
    t.equal(created.status, 202);
    const id = created.body.incident.id as number;
    const bEventsBefore = await events(app, `?deviceId=${w.otherE1}`);
    t.equal(bEventsBefore.length, 1, 'B\'s own E1 was alerted');

    // reading
    t.equal((await send(app, w.cad, 'GET', `/api/incidents/${id}`)).status, 404, 'GET /incidents/{id} is 404, as for no incident');
    t.same((await send(app, w.cad, 'GET', '/api/incidents')).body, [], 'not in GET /incidents');
    t.same((await send(app, w.cad, 'GET', '/api/incidents?all=true')).body, [], 'not in GET /incidents?all=true');
    t.same((await send(app, w.cad, 'GET', '/api/incidents?originId=B-1&all=true')).body, [], 'not found by originId');
    t.equal((await send(app, w.cad, 'GET', `/api/incidents?userId=${w.otherId}`)).status, 403, 'not listable by userId');
    t.same(await events(app, '', w.cad), [], 'no event in GET /events');
    t.same(await events(app, `?incidentId=${id}`, w.cad), [], 'none by incidentId');
    t.same(await events(app, `?deviceId=${w.otherE1}`, w.cad), [], 'none by deviceId');
    t.equal((await send(app, w.cad, 'GET', `/api/devices/${onlyB}`)).status, 403, 'GET /devices/{id} of B\'s device is 403');
    t.equal((await send(app, w.cad, 'GET', `/api/devices/${w.otherE1}`)).status, 403);
    const listed = ((await send(app, w.cad, 'GET', '/api/devices')).body as { id: number }[]).map((d) => d.id);
    t.notOk(listed.includes(onlyB) || listed.includes(w.otherE1), 'B\'s devices are not in A\'s GET /devices');
    t.equal((await send(app, w.cad, 'GET', `/api/devices?userId=${w.otherId}`)).status, 403, 'nor listable by userId');
    t.equal((await send(app, w.cad, 'GET', `/api/users/${w.otherId}`)).status, 403, 'B is not visible');

    // changing and deleting
    t.equal((await send(app, w.cad, 'PUT', `/api/incidents/${id}`, incidentBody({ originId: 'B-1', resources: [] }))).status, 404, 'PUT /incidents/{id} is 404');
    t.equal((await send(app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ originId: 'B-1', status: 'CLOSED' }))).status, 404, 'PUT /incidents/update is 404');
    t.equal((await send(app, w.cad, 'DELETE', `/api/incidents/${id}`)).status, 404, 'DELETE is 404');
    t.equal((await send(app, w.cad, 'PUT', `/api/devices/${onlyB}`, { name: 'MINE', uniqueId: 'b9-only' })).status, 403, 'PUT /devices/{id} is 403');
    t.equal((await send(app, w.cad, 'DELETE', `/api/devices/${onlyB}`)).status, 403, 'DELETE /devices/{id} is 403');
    t.equal((await app.inject({ method: 'POST', url: `/api/devices/${onlyB}/token`, headers: { authorization: w.cad } })).statusCode, 403, 'no push token for B\'s device');
    t.equal((await send(app, w.cad, 'POST', '/api/permissions', { userId: w.cadId, incidentId: id })).status, 404, 'A cannot link itself to B\'s incident (404, as for no incident)');
    t.equal((await send(app, w.cad, 'POST', '/api/permissions', { userId: w.cadId, deviceId: onlyB })).status, 403, 'nor to B\'s device');
    const clash = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'B-1' }));
    t.equal(clash.status, 409, 'B\'s originId is taken');
    t.notOk('incidentId' in clash.body, 'but A does not learn B\'s incident id');

    // matching
    const mine = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'A-1', resources: ['B9', 'E1'] }));
    t.equal(mine.status, 202);
    t.same(mine.body.details.deviceStatuses, { B9: 'NOT_FOUND', E1: 'OFFLINE' }, 'a callsign naming only B\'s device is NOT_FOUND for A');
    t.same(await events(app, `?deviceId=${onlyB}`), [], 'B\'s B9 got no event');
    t.same(await events(app, `?deviceId=${w.otherE1}`), bEventsBefore, 'B\'s E1 got nothing from A\'s E1');
    const aHits = (await events(app, `?incidentId=${mine.body.incident.id}`)).map((e) => e.deviceId).sort((a, b) => a - b);
    t.same(aHits, [w.e1a, w.e1b], 'A\'s E1 matched only A\'s devices');

    // B's incident is as B left it
    const after = await send(app, w.other, 'GET', `/api/incidents/${id}`);
    t.same(after.body, created.body.incident, 'B\'s incident is unchanged');
  });
});

t.test('session cookie', async (t) => {
  async function cookies(app: FastifyInstance) {
    const fromLogin = await login(app, ADMIN.email, ADMIN.password);
    const token = await mintToken(app, adminAuth());
    const fromToken = await app.inject({ method: 'GET', url: `/api/session?token=${token}` });
    const uid = await createUser(app, { name: 'I', email: 'i@example.test', password: 'i-password' });
    const fromImpersonation = await app.inject({ method: 'GET', url: `/api/session/${uid}`, headers: { authorization: adminAuth() } });
    return { 'POST /session': fromLogin, 'GET /session?token=': fromToken, 'GET /session/{id}': fromImpersonation };
  }

  t.test('when a session is opened over http with the default COOKIE_SECURE, then the cookie is HttpOnly, SameSite=Lax, Path=/ and not Secure', async (t) => {
    const { app, config } = await makeApp(t);
    t.equal(config.cookieSecure, 'auto');
    for (const [label, res] of Object.entries(await cookies(app))) {
      t.equal(res.statusCode, 200, label);
      const attrs = cookieAttributes(res);
      t.ok(attrs.includes('httponly'), `${label}: HttpOnly`);
      t.ok(attrs.includes('samesite=lax'), `${label}: SameSite=Lax`);
      t.ok(attrs.includes('path=/'), `${label}: Path=/`);
      t.notOk(attrs.includes('secure'), `${label}: not Secure over http`);
    }
  });

  t.test('when COOKIE_SECURE is true, then every session cookie is also Secure', async (t) => {
    const { app } = await makeApp(t, { config: { cookieSecure: true } });
    for (const [label, res] of Object.entries(await cookies(app))) {
      const attrs = cookieAttributes(res);
      t.ok(attrs.includes('secure'), `${label}: Secure`);
      t.ok(attrs.includes('httponly') && attrs.includes('samesite=lax') && attrs.includes('path=/'), `${label}: HttpOnly, SameSite=Lax, Path=/`);
    }
  });

  t.test('when COOKIE_SECURE is false, then the cookie is not Secure even behind a TLS proxy', async (t) => {
    const { app } = await makeApp(t, { config: { cookieSecure: false, trustProxy: true } });
    const res = await login(app, ADMIN.email, ADMIN.password, '127.0.0.1', { 'x-forwarded-proto': 'https' });
    t.notOk(cookieAttributes(res).includes('secure'));
  });
});

t.test('when resources has 501 callsigns, then 400 naming /body/resources and nothing is stored; 500 are accepted', async (t) => {
  const { app } = await makeApp(t);
  const w = await world(app);
  const many = (n: number) => Array.from({ length: n }, (_, i) => `C${i}`);
  const res = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: many(501) }));
  t.equal(res.status, 400);
  t.equal(res.headers['content-type'], PROBLEM_JSON);
  t.ok(
    res.body.errors.some((e: { path: string }) => e.path === '/body/resources'),
    `errors name /body/resources: ${JSON.stringify(res.body.errors)}`,
  );
  t.same((await send(app, adminAuth(), 'GET', '/api/incidents?all=true')).body, [], 'nothing stored');
  const upd = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'OK-500', resources: many(500) }));
  t.equal(upd.status, 202, '500 callsigns are fine');
  t.equal(upd.body.incident.resources.length, 500);
  const tooMany = await send(app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ originId: 'OK-500', resources: many(501) }));
  t.equal(tooMany.status, 400, 'an update with 501 is refused too');
  t.equal((await send(app, w.cad, 'GET', `/api/incidents/${upd.body.incident.id}`)).body.resources.length, 500, 'and changed nothing');
});

t.test('when callsigns look like SQL, LIKE patterns or other Unicode spellings, then they are stored and matched literally', { skip: sqliteOnly }, async (t) => {
  const { app, db } = await makeApp(t);
  const uid = await createUser(app, { name: 'C', email: 'c@example.test', password: 'c-password' });
  const c = basic('c@example.test', 'c-password');
  const SQL = "E1'; DROP TABLE devices;--";
  const NFD = 'A\u03081'; // "Ä1" decomposed
  const NFC = '\u00c41'; // "Ä1" composed
  const names = [SQL, NFD, '%', '_', 'E 1', 'E11'];
  const ids: Record<string, number> = {};
  for (const [i, name] of names.entries()) {
    ids[name] = await createDevice(app, { name, uniqueId: `literal-${i}` });
    await grant(app, { userId: uid, deviceId: ids[name]! });
  }
  const stored = json(await app.inject({ method: 'GET', url: `/api/devices/${ids[NFD]}`, headers: { authorization: c } })) as { name: string };
  t.equal(stored.name, NFD, 'a device name is stored as sent (NFD kept)');

  const resources = [SQL, NFC, '%', '_', 'E 1', 'E1%', 'E1_', 'E1'];
  const res = await send(app, c, 'POST', '/api/incidents', incidentBody({ originId: 'LIT-1', resources }));
  t.equal(res.status, 202);
  t.same(res.body.incident.resources, resources, 'stored as sent');
  t.same((await send(app, c, 'GET', `/api/incidents/${res.body.incident.id}`)).body.resources, resources, 'and read back as sent');
  t.same(
    res.body.details.deviceStatuses,
    { [SQL]: 'OFFLINE', [NFC]: 'OFFLINE', '%': 'OFFLINE', _: 'OFFLINE', 'E 1': 'OFFLINE', 'E1%': 'NOT_FOUND', 'E1_': 'NOT_FOUND', E1: 'NOT_FOUND' },
    'each literal callsign finds its device; E1%, E1_ and E1 find none',
  );
  const hits = (await events(app, `?incidentId=${res.body.incident.id}`)).map((e) => [e.deviceId, e.attributes.callsign]);
  t.same(
    hits.sort((a, b) => Number(a[0]) - Number(b[0])),
    [
      [ids[SQL], SQL],
      [ids[NFD], NFC],
      [ids['%'], '%'],
      [ids._, '_'],
      [ids['E 1'], 'E 1'],
    ],
    'one event per matched device: "%" and "_" match only themselves, "Ä1" (NFC) matches the NFD device, E11 matches nothing',
  );

  const other = await send(app, c, 'POST', '/api/incidents', incidentBody({ originId: 'LIT-2', resources: ['E11'] }));
  t.equal(other.status, 202);
  const byCallsign = async (callsign: string) =>
    ((await send(app, c, 'GET', `/api/incidents?callsign=${encodeURIComponent(callsign)}`)).body as { originId: string }[]).map((i) => i.originId);
  t.same(await byCallsign('E1%'), ['LIT-1'], 'GET /incidents?callsign=E1% is literal');
  t.same(await byCallsign('E1_'), ['LIT-1'], 'GET /incidents?callsign=E1_ is literal');
  t.same(await byCallsign('%'), ['LIT-1'], 'GET /incidents?callsign=% is literal');
  t.same(await byCallsign('E11'), ['LIT-2']);
  t.same(await byCallsign(NFD), ['LIT-1'], 'the NFD spelling finds the NFC callsign');

  t.equal((db.$client.prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'devices'").get() as { n: number }).n, 1, 'the devices table is still there');
  t.equal((db.$client.prepare('SELECT count(*) AS n FROM devices').get() as { n: number }).n, names.length, 'with every device');
});

t.test('when requests carry credentials, then none of them reaches the log', async (t) => {
  const { Writable } = await import('node:stream');
  const { loggerOptions } = await import('../../src/app.js');
  const lines: string[] = [];
  const stream = new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) });
  const { app } = await makeApp(t, { logger: { ...(loggerOptions('info') as object), stream } });
  await app.inject({ method: 'GET', url: '/api/session?token=SECRET-QUERY-TOKEN', headers: { cookie: 'JSESSIONID=SECRET-COOKIE' } });
  await app.inject({ method: 'GET', url: '/api/incidents', headers: { authorization: 'Bearer SECRET-BEARER' } });
  await app.inject({ method: 'GET', url: '/api/incidents', headers: { authorization: basic(ADMIN.email, 'SECRET-BASIC-PASSWORD') } });
  await login(app, ADMIN.email, 'SECRET-PASSWORD');
  const log = lines.join('');
  t.match(log, /incoming request/, 'requests are logged');
  t.notMatch(log, /SECRET/, 'no token, cookie, bearer, Basic or form password in the log');
});

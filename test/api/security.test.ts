// Hostile callers: login throttling, credentials that must no longer work, isolation between
// users, and callsigns that look like SQL or patterns.
import t from 'tap';
import { ADMIN, adminAuth, basic, createDevice, createUser, grant, json, makeApp } from '../fixtures/app.js';
import { events, incidentBody, send, world } from '../fixtures/incidents.js';
import { LoginThrottle } from '../../src/auth/throttle.js';

const form = { 'content-type': 'application/x-www-form-urlencoded' };
const login = (email: string, password: string) => `email=${encodeURIComponent(email)}&password=${encodeURIComponent(password)}`;

t.test('when logins fail repeatedly from one address, then 429 with Retry-After; others are not blocked', async (t) => {
  let now = 1_000_000;
  const throttle = new LoginThrottle({ freeFailures: 3, windowMs: 15 * 60_000, addressFailures: 20, now: () => now });
  const { app } = await makeApp(t, { throttle });
  const attempt = (password: string, remoteAddress: string, email = ADMIN.email) =>
    app.inject({ method: 'POST', url: '/api/session', headers: form, payload: login(email, password), remoteAddress });
  for (let i = 0; i < 3; i++) t.equal((await attempt('wrong', '10.0.0.1')).statusCode, 401);
  const blocked = await attempt('wrong', '10.0.0.1');
  t.equal(blocked.statusCode, 429);
  t.equal(blocked.headers['content-type'], 'application/problem+json; charset=utf-8');
  t.match(blocked.headers['retry-after'], /^\d+$/);
  t.equal((await attempt(ADMIN.password, '10.0.0.1')).statusCode, 429, 'even the right password waits at the throttled address');
  t.equal((await attempt(ADMIN.password, '10.0.0.2')).statusCode, 200, 'the same account from another address is not blocked');
  now += Number(blocked.headers['retry-after']) * 1000 + 1;
  t.equal((await attempt(ADMIN.password, '10.0.0.1')).statusCode, 200, 'after Retry-After the right password works');
});

t.test('when one address sprays many accounts, then the address is throttled but not the accounts elsewhere', async (t) => {
  let now = 1_000_000;
  const throttle = new LoginThrottle({ freeFailures: 5, windowMs: 15 * 60_000, addressFailures: 4, now: () => now });
  const { app } = await makeApp(t, { throttle });
  for (let i = 0; i < 4; i++) {
    await app.inject({ method: 'POST', url: '/api/session', headers: form, payload: login(`user${i}@example.test`, 'x'), remoteAddress: '10.9.9.9' });
  }
  t.equal((await app.inject({ method: 'POST', url: '/api/session', headers: form, payload: login('user9@example.test', 'x'), remoteAddress: '10.9.9.9' })).statusCode, 429);
  t.equal((await app.inject({ method: 'POST', url: '/api/session', headers: form, payload: login(ADMIN.email, ADMIN.password), remoteAddress: '10.1.1.1' })).statusCode, 200);
  now += 1;
});

t.test('when users share a server, then none reads, changes or matches another\'s incidents and devices', async (t) => {
  const { app } = await makeApp(t);
  const w = await world(app);
  const created = await send(app, w.other, 'POST', '/api/incidents', incidentBody({ originId: 'OTHER-1', resources: ['E1'] }));
  const id = created.body.incident.id;
  t.equal((await send(app, w.cad, 'GET', `/api/incidents/${id}`)).status, 403);
  t.equal((await send(app, w.cad, 'PUT', `/api/incidents/${id}`, incidentBody({ originId: 'OTHER-1' }))).status, 403);
  t.equal((await send(app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ originId: 'OTHER-1' }))).status, 403);
  t.equal((await send(app, w.cad, 'DELETE', `/api/incidents/${id}`)).status, 403);
  t.same((await send(app, w.cad, 'GET', '/api/incidents?all=true')).body, [], 'not listed');
  t.same(await events(app, '', w.cad), [], "no events of the other's device");
  t.equal((await send(app, w.cad, 'GET', `/api/devices/${w.otherE1}`)).status, 403);
  t.equal((await send(app, w.cad, 'GET', `/api/events?deviceId=${w.otherE1}`)).body.length, 0);
  const mine = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'MINE', resources: ['E1'] }));
  const touched = (await events(app, `?incidentId=${mine.body.incident.id}`)).map((e) => e.deviceId);
  t.notOk(touched.includes(w.otherE1), "the other user's E1 is never matched");
});

t.test('when callsigns look like SQL, patterns or other spellings, then they are stored and matched literally', async (t) => {
  const { app } = await makeApp(t);
  const uid = await createUser(app, { name: 'C', email: 'c@example.test', password: 'c-password' });
  const names = ["E1'; DROP TABLE devices;--", 'A\u0308RZT', '%', 'E_1', 'E11'];
  const ids: Record<string, number> = {};
  for (const [i, name] of names.entries()) {
    ids[name] = await createDevice(app, { name, uniqueId: `lit-${i}` });
    await grant(app, { userId: uid, deviceId: ids[name]! });
  }
  const c = basic('c@example.test', 'c-password');
  const res = await send(app, c, 'POST', '/api/incidents', incidentBody({ resources: ["E1'; DROP TABLE devices;--", '\u00c4rzt', '%', 'E1%', 'E1_', 'E_1'] }));
  t.equal(res.status, 202);
  t.same(res.body.incident.resources, ["E1'; DROP TABLE devices;--", '\u00c4rzt', '%', 'E1%', 'E1_', 'E_1'], 'stored as sent');
  t.same(res.body.details.deviceStatuses, {
    "E1'; DROP TABLE devices;--": 'OFFLINE',
    '\u00c4rzt': 'OFFLINE',
    '%': 'OFFLINE',
    'E1%': 'NOT_FOUND',
    'E1_': 'NOT_FOUND',
    E_1: 'OFFLINE',
  });
  const hit = (await events(app)).map((e) => e.deviceId).sort((a, b) => a - b);
  t.same(hit, [ids["E1'; DROP TABLE devices;--"], ids['A\u0308RZT'], ids['%'], ids['E_1']].sort((a, b) => a! - b!), 'E11 is matched by neither E1% nor E1_');
  t.equal(json(await app.inject({ method: 'GET', url: '/api/devices', headers: { authorization: adminAuth() } })).length, 5, 'the devices table is still there');
});

t.test('when Basic credentials fail repeatedly, then they are throttled like logins', async (t) => {
  let now = 1_000_000;
  const throttle = new LoginThrottle({ freeFailures: 2, windowMs: 15 * 60_000, addressFailures: 20, now: () => now });
  const { app } = await makeApp(t, { throttle });
  const get = (password: string, remoteAddress: string) =>
    app.inject({ method: 'GET', url: '/api/incidents', headers: { authorization: basic(ADMIN.email, password) }, remoteAddress });
  t.equal((await get('wrong', '10.0.0.7')).statusCode, 401);
  t.equal((await get('wrong', '10.0.0.7')).statusCode, 401);
  const blocked = await get(ADMIN.password, '10.0.0.7');
  t.equal(blocked.statusCode, 429);
  t.match(blocked.headers['retry-after'], /^\d+$/);
  t.equal((await get(ADMIN.password, '10.0.0.8')).statusCode, 200, 'another address is not blocked');
  now += 60_000;
  t.equal((await get(ADMIN.password, '10.0.0.7')).statusCode, 200);
});

t.test('when requests carry credentials, then none of them reaches the log', async (t) => {
  const { Writable } = await import('node:stream');
  const { loggerOptions } = await import('../../src/app.js');
  const lines: string[] = [];
  const stream = new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) });
  const { app } = await makeApp(t, { logger: { ...(loggerOptions('info') as object), stream } });
  await app.inject({ method: 'GET', url: '/api/session?token=SECRET-QUERY-TOKEN', headers: { cookie: 'JSESSIONID=SECRET-COOKIE' } });
  await app.inject({ method: 'GET', url: '/api/incidents', headers: { authorization: 'Bearer SECRET-BEARER' } });
  await app.inject({ method: 'POST', url: '/api/session', headers: form, payload: login(ADMIN.email, 'SECRET-PASSWORD') });
  const log = lines.join('');
  t.match(log, /incoming request/, 'requests are logged');
  t.notMatch(log, /SECRET/, 'no token, cookie, bearer or password in the log');
});

// Property-based fuzzing of every operation in openapi.yaml, with requests generated from the
// spec's own schemas (test/fixtures/arbitraries.ts): valid bodies, query and path parameters,
// and invalid variants of each. Every operation gets its own app, started from the same
// seeded database (test/fixtures/fuzz-world.ts). Properties, for every response:
//   - never 5xx;
//   - every 4xx is application/problem+json whose `status` is the HTTP status; a 400 lists
//     `errors`; a 401 carries the WWW-Authenticate challenge; a 429 an integer Retry-After;
//   - the response matches the spec (the makeApp inject wrapper throws ContractError if not);
//   - a protected operation called without credentials is 401 (authentication first);
//   - a well-formed JSON body that breaks its schema is 400 (strict bodies);
//   - a valid request is not 400 (the server accepts what the spec promises to accept);
//   - a valid POST /incidents is 200/202 (409 only when its originId is taken); a valid update
//     of an existing incident is 200/202/409.
// After each operation's run, the database is checked: every event is a push in a known state, no resource,
// assignment or permission row without its incident, foreign keys hold, closed incidents are
// empty and stamped, every assignment belongs to a callsign still on its incident.
//
// Deterministic: fixed seed (FUZZ_SEED to change, printed), a fake clock that never moves, a
// login throttle on that clock. FUZZ_RUNS sets the cases per operation.
//
// The run is split by group of operations, one file each (test/api/fuzz-<group>.test.ts,
// test/fixtures/fuzz-run.ts; 2026-11-29, issue 37): this file checks the generator and that the
// groups take in every operation, and keeps the fuzz's findings as plain reproductions.
import t from 'tap';
import fc from 'fast-check';
import { makeApp, sqliteOnly } from '../fixtures/app.js';
import { ContractError } from '../fixtures/contract.js';
import { DATE_TIME_EDGES, invalid, valid, type Schema } from '../fixtures/arbitraries.js';
import { FUZZ_GROUPS, SEED, ajv, hintsFor, inGroup, operations, schemaCheck, type FuzzGroup } from '../fixtures/fuzz-cases.js';

t.test('when values are generated from the spec, then valid ones pass their schema and invalid ones fail it', async (t) => {
  const schemas = new Map<string, Schema>();
  for (const op of operations) {
    if (op.body) schemas.set(`${op.id} body`, op.body.schema);
    for (const p of op.params) schemas.set(`${op.id} ${p.in} ${p.name}`, p.schema);
  }
  // the same hints as the fuzz, over a stand-in world: a hint that breaks a schema shows here
  const hints = hintsFor({ adminId: 1, adminToken: 'x', adminTokenId: 1, userIds: [2, 3], deviceIds: [1, 2], deviceNames: ['E1', '%'], incidentIds: [1], originIds: ['O-1'], spareTokenIds: [2], spareToken: 'y'.repeat(43), deviceToken: 'z'.repeat(43) });
  let checked = 0;
  for (const [label, schema] of schemas) {
    const check = schemaCheck(schema);
    const goodOnes = [...fc.sample(valid(schema), { seed: SEED, numRuns: 100 }), ...fc.sample(valid(schema, hints), { seed: SEED, numRuns: 100 })];
    const rejected = goodOnes.filter((v) => !check(v));
    t.same(rejected.slice(0, 3), [], `${label}: every generated valid value passes`);
    const bad = invalid(schema);
    if (bad) {
      const badOnes = fc.sample(bad, { seed: SEED, numRuns: 100 });
      const accepted = badOnes.filter((v) => check(v));
      t.same(accepted.slice(0, 3), [], `${label}: every generated invalid value fails`);
    }
    checked++;
  }
  t.ok(checked >= operations.length, `${checked} schemas checked`);
  t.ok(DATE_TIME_EDGES.every((d) => ajv.validate({ type: 'string', format: 'date-time' }, d)), 'the date-time edge cases are valid RFC 3339');
});

t.test('when the fuzz is split into groups, then every operation of the spec is in exactly one', async (t) => {
  const groups = Object.keys(FUZZ_GROUPS) as FuzzGroup[];
  const strays = operations.filter((op) => groups.filter((g) => inGroup(op.path, g)).length !== 1).map((op) => `${op.method} ${op.path}`);
  t.same(strays, [], 'an operation in no group is fuzzed by no file: add its path to FUZZ_GROUPS (test/fixtures/fuzz-cases.ts)');
  t.ok(operations.length > 0, `${operations.length} operations in ${groups.length} groups`);
});

// ---------------------------------------------------------------------------------------------
// the fuzz's findings, as plain reproductions

/** runs a request through the contract-checked inject; a ContractError becomes a value */
async function attempt(run: () => Promise<{ statusCode: number; body: string }>): Promise<{ status: number | null; violation: string | null }> {
  try {
    const res = await run();
    return { status: res.statusCode, violation: null };
  } catch (err) {
    if (err instanceof ContractError) return { status: null, violation: err.message };
    throw err;
  }
}

t.test('when a date-time is a leap second, then it is refused (400) or stored, never a 500', async (t) => {
  const { app } = await makeApp(t);
  const { adminAuth } = await import('../fixtures/app.js');
  const auth = { authorization: adminAuth() };
  const leap = '2016-12-31T23:59:60Z';
  const calls: [string, () => Promise<{ statusCode: number; body: string }>][] = [
    ['POST /incidents timeOfOrigin', () => app.inject({ method: 'POST', url: '/api/incidents', headers: auth, payload: { originId: 'LEAP', type: 'FIRE', latitude: 0, longitude: 0, priority: 1, timeOfOrigin: leap } })],
    ['GET /incidents?updatedSince', () => app.inject({ method: 'GET', url: `/api/incidents?updatedSince=${encodeURIComponent(leap)}`, headers: auth })],
    ['GET /events?from', () => app.inject({ method: 'GET', url: `/api/events?from=${encodeURIComponent(leap)}`, headers: auth })],
    ['POST /users expirationTime', () => app.inject({ method: 'POST', url: '/api/users', headers: auth, payload: { name: 'L', email: 'leap@example.test', password: 'leap-password', expirationTime: leap } })],
  ];
  for (const [label, call] of calls) {
    const r = await attempt(call);
    t.ok(r.status !== null && r.status < 500, `${label} = ${leap}: not a 5xx (got ${r.status})`);
  }
});

t.test('when a date-time with an offset crosses year 0000 or 9999 in UTC, then it is refused or returned in the spec\'s format', async (t) => {
  const { app } = await makeApp(t);
  const { adminAuth } = await import('../fixtures/app.js');
  const auth = { authorization: adminAuth() };
  for (const [i, when] of ['0000-01-01T00:00:00+01:00', '9999-12-31T23:59:59-01:00'].entries()) {
    const r = await attempt(() => app.inject({ method: 'POST', url: '/api/incidents', headers: auth, payload: { originId: `EDGE-${i}`, type: 'FIRE', latitude: 0, longitude: 0, priority: 1, timeOfOrigin: when } }));
    t.equal(r.violation, null, `POST /incidents timeOfOrigin ${when}: the answer matches the spec`);
  }
  const tokenAt = (when: string) =>
    attempt(() =>
      app.inject({ method: 'POST', url: '/api/session/token', headers: { ...auth, 'content-type': 'application/x-www-form-urlencoded' }, payload: `expiration=${encodeURIComponent(when)}` }),
    );
  t.equal((await tokenAt('9999-12-31T23:59:59-01:00')).status, 400, 'a token expiration past year 9999 in UTC is refused');
  t.equal((await tokenAt('9999-12-31T23:59:59Z')).status, 200, 'the last second of 9999 is accepted');
  const listed = await attempt(() => app.inject({ method: 'GET', url: '/api/session/tokens', headers: auth }));
  t.equal(listed.violation, null, 'GET /session/tokens then still matches the spec');
});

t.test('when a body comes in a media type the operation does not declare, then 415 and nothing is stored', { skip: sqliteOnly }, async (t) => {
  const { app, db } = await makeApp(t);
  const { adminAuth } = await import('../fixtures/app.js');
  const form = { authorization: adminAuth(), 'content-type': 'application/x-www-form-urlencoded' };
  const text = { authorization: adminAuth(), 'content-type': 'text/plain' };
  const users = () => (db.$client.prepare('SELECT count(*) AS n FROM users').get() as { n: number }).n;
  const before = users();
  const cases: [string, () => Promise<{ statusCode: number; body: string }>][] = [
    ['POST /users form-encoded', () => app.inject({ method: 'POST', url: '/api/users', headers: form, payload: 'name=&email=has%20space&password=1' })],
    ['POST /devices form-encoded', () => app.inject({ method: 'POST', url: '/api/devices', headers: form, payload: 'name=&uniqueId=a%20b' })],
    ['POST /incidents form-encoded', () => app.inject({ method: 'POST', url: '/api/incidents', headers: form, payload: 'originId=F1&type=FIRE' })],
    ['POST /incidents text/plain', () => app.inject({ method: 'POST', url: '/api/incidents', headers: text, payload: 'originId=F1' })],
    ['POST /session text/plain', () => app.inject({ method: 'POST', url: '/api/session', headers: { 'content-type': 'text/plain' }, payload: 'x' })],
    ['POST /session JSON', () => app.inject({ method: 'POST', url: '/api/session', headers: { 'content-type': 'application/json' }, payload: '{"email":"a","password":"b"}' })],
  ];
  for (const [label, call] of cases) {
    const r = await attempt(call);
    t.equal(r.status, 415, `${label}: 415`);
  }
  t.equal(users(), before, 'no user was created from an unvalidated body');
});

t.test('when a public operation gets a wrong Basic header repeatedly, then it still answers what it declares', async (t) => {
  const { app } = await makeApp(t);
  const { basic } = await import('../fixtures/app.js');
  const wrong = { authorization: basic('admin@example.test', 'not-the-password') };
  const health: (number | null)[] = [];
  const logout: (number | null)[] = [];
  for (let i = 0; i < 8; i++) {
    health.push((await attempt(() => app.inject({ method: 'GET', url: '/api/health', headers: wrong }))).status);
    logout.push((await attempt(() => app.inject({ method: 'DELETE', url: '/api/session', headers: wrong }))).status);
  }
  t.same(health, Array(8).fill(200), 'GET /health stays 200');
  t.same(logout, Array(8).fill(204), 'DELETE /session stays 204');
});

t.test('when the declared media type is spelt with parameters or in upper case, then the body is still validated', { skip: sqliteOnly }, async (t) => {
  const { app, db } = await makeApp(t);
  const { adminAuth } = await import('../fixtures/app.js');
  const users = () => (db.$client.prepare('SELECT count(*) AS n FROM users').get() as { n: number }).n;
  const before = users();
  const bad = JSON.stringify({ name: '', email: 'not an email', password: 'p' });
  for (const type of ['application/json; charset=utf-8', 'Application/JSON', 'APPLICATION/JSON;charset=UTF-8']) {
    const r = await attempt(() => app.inject({ method: 'POST', url: '/api/users', headers: { authorization: adminAuth(), 'content-type': type }, payload: bad }));
    t.equal(r.status, 400, `${type}: an invalid body is 400`);
  }
  for (const type of ['application/json-patch+json', 'application/problem+json', 'text/json']) {
    const r = await attempt(() => app.inject({ method: 'POST', url: '/api/users', headers: { authorization: adminAuth(), 'content-type': type }, payload: bad }));
    t.equal(r.status, 415, `${type}: 415`);
  }
  t.equal(users(), before, 'nobody was created');
});

t.test('when an operation that takes no body is sent one anyway, then the body is ignored', async (t) => {
  const { app } = await makeApp(t);
  const { adminAuth } = await import('../fixtures/app.js');
  const auth = adminAuth();
  const create = async (originId: string) =>
    JSON.parse((await app.inject({ method: 'POST', url: '/api/incidents', headers: { authorization: auth }, payload: { originId, type: 'FIRE', latitude: 0, longitude: 0, priority: 1 } })).body) as { id: number };
  const cases: [string, Record<string, string>, string | undefined][] = [
    ['Content-Type: application/json and no body', { 'content-type': 'application/json' }, undefined],
    ['an empty JSON body', { 'content-type': 'application/json' }, ''],
    ['{}', { 'content-type': 'application/json' }, '{}'],
    ['an XML body', { 'content-type': 'application/xml' }, '<x/>'],
    ['a body with no Content-Type', {}, 'junk'],
  ];
  for (const [i, [label, headers, payload]] of cases.entries()) {
    const { id } = await create(`NOBODY-${i}`);
    const r = await attempt(() => app.inject({ method: 'DELETE', url: `/api/incidents/${id}`, headers: { authorization: auth, ...headers }, ...(payload !== undefined ? { payload } : {}) }));
    t.equal(r.status, 204, `DELETE /incidents/{id} with ${label}: 204`);
    const logout = await attempt(() => app.inject({ method: 'DELETE', url: '/api/session', headers, ...(payload !== undefined ? { payload } : {}) }));
    t.equal(logout.status, 204, `DELETE /session with ${label}: 204`);
  }
});

// Idempotency-Key on the incident writes (DESIGN section 12, issue 28): a retry with the same key
// and request gets the first answer and writes and pushes nothing; another request with the key
// is 422; a repeat while the first is in flight is 409; a malformed key is 400; keys are per
// user and kept IDEMPOTENCY_TTL_H hours. Runs on both adapters (TEST_ADAPTER=postgres).
import t, { type Test } from 'tap';
import type { FastifyInstance } from 'fastify';
import { basic, bearer, createUser, FakeClock, json, makeApp, mintToken, type TestAppOptions } from '../fixtures/app.js';
import { events, incidentBody, world } from '../fixtures/incidents.js';
import { MemoryBus } from '../../src/adapters/memory/bus.js';
import type { Storage } from '../../src/ports/storage.js';

interface Sent {
  status: number;
  body: any;
  headers: Record<string, unknown>;
  raw: string;
}

/** a request with the given Idempotency-Key / If-Match; `payload` as an object, or as raw JSON text */
async function call(
  app: FastifyInstance,
  auth: string,
  method: 'POST' | 'PUT' | 'DELETE' | 'GET',
  url: string,
  opts: { key?: string; ifMatch?: string; payload?: object | string } = {},
): Promise<Sent> {
  const headers: Record<string, string> = { authorization: auth };
  if (opts.key !== undefined) headers['idempotency-key'] = opts.key;
  if (opts.ifMatch !== undefined) headers['if-match'] = opts.ifMatch;
  if (typeof opts.payload === 'string') headers['content-type'] = 'application/json';
  const res = await app.inject({ method, url, headers, ...(opts.payload === undefined ? {} : { payload: opts.payload }) });
  return { status: res.statusCode, body: res.body ? json(res) : undefined, headers: res.headers, raw: res.body };
}

/** the app, the CAD's token, and a count of the events published for delivery (what the device hub would push) */
async function setUp(t: Test, opts: TestAppOptions = {}) {
  const bus = new MemoryBus();
  let published = 0;
  bus.subscribe('written', (evs) => (published += evs.length));
  const { app } = await makeApp(t, { bus, ...opts });
  const w = await world(app);
  const cad = bearer(await mintToken(app, w.cad));
  const other = bearer(await mintToken(app, w.other));
  const incidents = async () => json<{ id: number }[]>(await app.inject({ method: 'GET', url: '/api/incidents?all=true', headers: { authorization: 'Basic ' + Buffer.from('admin@example.test:admin-password-1').toString('base64') } }));
  return { app, w, cad, other, published: () => published, incidents };
}

const KEY = '"8e03978e-40d5-43e8-bc93-6894a57f9324"';

t.test('when a create is retried with its key and the same body, then the first answer comes back and nothing is written or pushed again', async (t) => {
  const s = await setUp(t);
  const body = incidentBody({ resources: ['E1', 'Z9'], description: 'kitchen' });
  const first = await call(s.app, s.cad, 'POST', '/api/incidents', { key: KEY, payload: body });
  t.equal(first.status, 202);
  const id = first.body.incident.id;
  t.equal(first.headers.etag, `"${id}-1"`, 'the ETag of the new incident');
  t.equal(first.headers.location, `/api/incidents/${id}`);
  t.notOk(first.headers['idempotent-replayed'], 'the first answer is not a replay');
  const written = await events(s.app);
  t.equal(written.length, 2, 'E1’s two devices');
  t.equal(s.published(), 2);

  // the same JSON, keys in another order and spaced otherwise
  const reordered = `{ "description": "kitchen", "resources": ["E1", "Z9"], "priority": 2, "longitude": -0.12, "latitude": 51.5, "type": "FIRE", "originId": "CAD-1" }`;
  for (const payload of [body, reordered]) {
    const again = await call(s.app, s.cad, 'POST', '/api/incidents', { key: KEY, payload });
    t.equal(again.status, 202, 'the first status');
    t.equal(again.raw, first.raw, 'the first body, byte for byte');
    t.equal(again.headers.etag, first.headers.etag);
    t.equal(again.headers.location, first.headers.location);
    t.equal(again.headers['idempotent-replayed'], 'true');
  }
  t.equal((await s.incidents()).length, 1, 'one incident');
  t.same(await events(s.app), written, 'no event (push) written again');
  t.equal(s.published(), 2, 'nothing published for delivery again');

  const noKey = await call(s.app, s.cad, 'POST', '/api/incidents', { payload: body });
  t.equal(noKey.status, 409, 'without the key a retry is the create it is: origin-id-taken');
  t.equal(noKey.body.type, 'urn:cad-incident:problem:origin-id-taken');
});

t.test('when an update and a delete are retried with their keys, then they answer as the first time, without writing', async (t) => {
  const s = await setUp(t);
  const created = await call(s.app, s.cad, 'POST', '/api/incidents', { payload: incidentBody({ resources: ['A7'] }) });
  const id = created.body.incident.id;
  const update = incidentBody({ resources: ['E1'] });
  const first = await call(s.app, s.cad, 'PUT', '/api/incidents/update', { key: 'update-1', payload: update });
  t.equal(first.status, 202);
  t.equal(first.headers.etag, `"${id}-2"`);
  const after = await events(s.app);
  t.equal(after.length, 4, 'A7 assigned, then stood down; E1’s two devices assigned');
  const again = await call(s.app, s.cad, 'PUT', '/api/incidents/update', { key: 'update-1', payload: update });
  t.equal(again.status, 202);
  t.equal(again.raw, first.raw);
  t.equal(again.headers.etag, `"${id}-2"`, 'the first answer’s ETag');
  t.equal(again.headers['idempotent-replayed'], 'true');
  t.same(await events(s.app), after, 'nothing written');
  t.equal((await call(s.app, s.cad, 'GET', `/api/incidents/${id}`)).headers.etag, `"${id}-2"`, 'the incident was not written again (its version)');

  const byId = await call(s.app, s.cad, 'PUT', `/api/incidents/${id}`, { key: 'update-2', payload: incidentBody({ resources: ['E1'], priority: 5 }) });
  t.equal(byId.status, 200, 'E1 unchanged: nothing to report');
  t.equal((await call(s.app, s.cad, 'PUT', `/api/incidents/${id}`, { key: 'update-2', payload: incidentBody({ resources: ['E1'], priority: 5 }) })).raw, byId.raw);

  const published = s.published();
  const del = await call(s.app, s.cad, 'DELETE', `/api/incidents/${id}`, { key: 'delete-1' });
  t.equal(del.status, 204);
  const stoodDown = (await events(s.app)).length;
  const delAgain = await call(s.app, s.cad, 'DELETE', `/api/incidents/${id}`, { key: 'delete-1' });
  t.equal(delAgain.status, 204, 'a retried delete is 204 again, not 404');
  t.equal(delAgain.headers['idempotent-replayed'], 'true');
  t.equal((await events(s.app)).length, stoodDown, 'no second stand-down');
  t.equal(s.published(), published + 2, 'the stand-downs published once');
  t.equal((await call(s.app, s.cad, 'DELETE', `/api/incidents/${id}`)).status, 404, 'without the key: 404');
});

t.test('when a key comes again with another request, then 422 and nothing is written', async (t) => {
  const s = await setUp(t);
  const first = await call(s.app, s.cad, 'POST', '/api/incidents', { key: KEY, payload: incidentBody() });
  t.equal(first.status, 200);
  const id = first.body.id;
  const cases: [string, 'POST' | 'PUT' | 'DELETE', string, object | undefined][] = [
    ['another body', 'POST', '/api/incidents', incidentBody({ originId: 'CAD-2' })],
    ['another value', 'POST', '/api/incidents', incidentBody({ priority: 3 })],
    ['another path', 'PUT', `/api/incidents/${id}`, incidentBody()],
    ['another method and path', 'DELETE', `/api/incidents/${id}`, undefined],
  ];
  for (const [why, method, url, payload] of cases) {
    const res = await call(s.app, s.cad, method, url, { key: KEY, ...(payload ? { payload } : {}) });
    t.equal(res.status, 422, why);
    t.equal(res.body.type, 'urn:cad-incident:problem:idempotency-key-reused', why);
    t.match(res.body.detail, /another request/);
  }
  t.equal((await s.incidents()).length, 1, 'no second incident, the first not deleted');
  t.equal((await call(s.app, s.cad, 'GET', `/api/incidents/${id}`)).headers.etag, `"${id}-1"`, 'not updated');
  const ifMatch = await call(s.app, s.cad, 'PUT', '/api/incidents/update', { key: 'u', payload: incidentBody() });
  t.equal(ifMatch.status, 200);
  const withPrecondition = await call(s.app, s.cad, 'PUT', '/api/incidents/update', { key: 'u', ifMatch: `"${id}-2"`, payload: incidentBody() });
  t.equal(withPrecondition.status, 422, 'another If-Match is another request');
});

t.test('when a retry spells the incident id or the If-Match list another way, then it is the same request and gets the first answer', async (t) => {
  const s = await setUp(t);
  const created = await call(s.app, s.cad, 'POST', '/api/incidents', { payload: incidentBody() });
  const id = created.body.id as number;
  const first = await call(s.app, s.cad, 'PUT', `/api/incidents/${id}`, { key: 'spelled', ifMatch: `"${id}-1", "${id}-7"`, payload: incidentBody({ priority: 4 }) });
  t.equal(first.status, 200);
  const spellings: [string, string, string][] = [
    ['a leading zero', `/api/incidents/0${id}`, `"${id}-1", "${id}-7"`],
    ['percent-encoded digits', `/api/incidents/${[...String(id)].map((d) => `%3${d}`).join('')}`, `"${id}-1", "${id}-7"`],
    ['a query', `/api/incidents/${id}?x=1`, `"${id}-1", "${id}-7"`],
    ['the tags in another order, spaced another way', `/api/incidents/${id}`, `"${id}-7","${id}-1"`],
    ['a tag twice', `/api/incidents/${id}`, `"${id}-1", "${id}-7", "${id}-1"`],
  ];
  for (const [why, url, ifMatch] of spellings) {
    const again = await call(s.app, s.cad, 'PUT', url, { key: 'spelled', ifMatch, payload: incidentBody({ priority: 4 }) });
    t.equal(again.status, 200, why);
    t.equal(again.headers['idempotent-replayed'], 'true', why);
    t.equal(again.raw, first.raw, why);
  }
  t.equal((await call(s.app, s.cad, 'GET', `/api/incidents/${id}`)).headers.etag, `"${id}-2"`, 'one write');
  const otherTags = await call(s.app, s.cad, 'PUT', `/api/incidents/${id}`, { key: 'spelled', ifMatch: `"${id}-1"`, payload: incidentBody({ priority: 4 }) });
  t.equal(otherTags.status, 422, 'another list of tags is another precondition');
});

t.test('when another user sends the same key, then it is that user’s own key', async (t) => {
  const s = await setUp(t);
  t.equal((await call(s.app, s.cad, 'POST', '/api/incidents', { key: KEY, payload: incidentBody() })).status, 200);
  const theirs = await call(s.app, s.other, 'POST', '/api/incidents', { key: KEY, payload: incidentBody({ originId: 'OTHER-1' }) });
  t.equal(theirs.status, 200, 'not 422: the key is per user');
  t.equal(theirs.body.originId, 'OTHER-1');
  t.notOk(theirs.headers['idempotent-replayed']);
  const replay = await call(s.app, s.other, 'POST', '/api/incidents', { key: KEY, payload: incidentBody({ originId: 'OTHER-1' }) });
  t.equal(replay.headers['idempotent-replayed'], 'true', 'and replayed for that user');
  t.equal(replay.body.originId, 'OTHER-1', 'with that user’s answer, never the other’s');
});

t.test('when the key is malformed, then 400 names the header and nothing is written', async (t) => {
  const s = await setUp(t);
  const bad = ['', '""', `"${'k'.repeat(256)}"`, 'k'.repeat(256), '"é"', '"a", "b"', '"unterminated', 'two words'];
  for (const key of bad) {
    const res = await call(s.app, s.cad, 'POST', '/api/incidents', { key, payload: incidentBody() });
    t.equal(res.status, 400, JSON.stringify(key));
    t.equal(res.body.errors?.[0]?.path, '/headers/idempotency-key', JSON.stringify(key));
  }
  t.equal((await s.incidents()).length, 0);
  const ok = await call(s.app, s.cad, 'POST', '/api/incidents', { key: `"${'k'.repeat(255)}"`, payload: incidentBody() });
  t.equal(ok.status, 200, 'a key of 255 characters is taken');
});

t.test('when a key’s request is refused, then no key is kept: a retry is decided again on the state as it is then (issue 36)', async (t) => {
  const s = await setUp(t);
  const early = incidentBody({ originId: 'LATE-1', resources: ['E1'] });
  const notYet = await call(s.app, s.cad, 'PUT', '/api/incidents/update', { key: 'early-update', payload: early });
  t.equal(notYet.status, 404);
  t.equal((await call(s.app, s.cad, 'POST', '/api/incidents', { payload: incidentBody({ originId: 'LATE-1' }) })).status, 200);
  const decided = await call(s.app, s.cad, 'PUT', '/api/incidents/update', { key: 'early-update', payload: early });
  t.equal(decided.status, 202, 'the retry is made, now that the incident exists (E1 has an offline device)');
  t.notOk(decided.headers['idempotent-replayed']);
  const replayed = await call(s.app, s.cad, 'PUT', '/api/incidents/update', { key: 'early-update', payload: early });
  t.equal(replayed.raw, decided.raw, 'and its success is the key’s answer');
  t.equal(replayed.headers['idempotent-replayed'], 'true');

  const closing = incidentBody({ originId: 'LATE-1', status: 'CLOSED', resources: ['E1'] });
  const closed = await call(s.app, s.cad, 'PUT', '/api/incidents/update', { key: 'close', payload: closing });
  t.equal(closed.status, 409);
  const closedAgain = await call(s.app, s.cad, 'PUT', '/api/incidents/update', { key: 'close', payload: closing });
  t.equal(closedAgain.status, 409);
  t.notOk(closedAgain.headers['idempotent-replayed'], 'a 409 is decided again too');

  const invalid = await call(s.app, s.cad, 'POST', '/api/incidents', { key: 'bad-body', payload: incidentBody({ originId: 'NEW-1', resources: ['  '] }) });
  t.equal(invalid.status, 400);
  const fixed = await call(s.app, s.cad, 'POST', '/api/incidents', { key: 'bad-body', payload: incidentBody({ originId: 'NEW-1' }) });
  t.equal(fixed.status, 200, 'the corrected request with the key is processed: a 400 of the request was not stored');
});

t.test('when keyed writes are refused (412 stale, 403 readonly), then they take none of the user’s keys; past IDEMPOTENCY_KEYS_MAX a new key is 429 and nothing is written', async (t) => {
  const s = await setUp(t, { config: { idempotencyKeysMax: 2 } });
  const created = await call(s.app, s.cad, 'POST', '/api/incidents', { payload: incidentBody() });
  const stale = `"${created.body.id}-0"`;
  for (let i = 0; i < 20; i++) {
    const refused = await call(s.app, s.cad, 'PUT', '/api/incidents/update', { key: `stale-${i}`, ifMatch: stale, payload: incidentBody({ description: `stale ${i}` }) });
    t.equal(refused.status, 412, `stale update ${i}`);
  }
  await createUser(s.app, { name: 'Reader', email: 'ro@example.test', password: 'ro-password-1', readonly: true });
  const ro = basic('ro@example.test', 'ro-password-1');
  for (let i = 0; i < 20; i++) t.equal((await call(s.app, ro, 'POST', '/api/incidents', { key: `ro-${i}`, payload: incidentBody({ originId: `RO-${i}` }) })).status, 403);
  t.equal((await call(s.app, ro, 'POST', '/api/incidents', { key: 'ro-0', payload: incidentBody({ originId: 'RO-0' }) })).headers['idempotent-replayed'], undefined, 'a refused create keeps no key');
  const first = await call(s.app, s.cad, 'POST', '/api/incidents', { key: 'new-1', payload: incidentBody({ originId: 'N-1' }) });
  const second = await call(s.app, s.cad, 'POST', '/api/incidents', { key: 'new-2', payload: incidentBody({ originId: 'N-2' }) });
  t.same([first.status, second.status], [200, 200], 'the 20 refusals took none of the two keys allowed');
  const over = await call(s.app, s.cad, 'POST', '/api/incidents', { key: 'new-3', payload: incidentBody({ originId: 'N-3' }) });
  t.equal(over.status, 429);
  t.equal(over.headers['content-type'], 'application/problem+json; charset=utf-8');
  t.equal(over.body.type, 'urn:cad-incident:problem:idempotency-keys-exhausted');
  t.match(over.headers['retry-after'], /^[1-9]\d*$/);
  t.equal((await s.incidents()).length, 3, 'nothing written for it');
  t.equal((await call(s.app, s.cad, 'POST', '/api/incidents', { key: 'new-1', payload: incidentBody({ originId: 'N-1' }) })).headers['idempotent-replayed'], 'true', 'a stored key still answers');
  t.equal((await call(s.app, s.cad, 'POST', '/api/incidents', { payload: incidentBody({ originId: 'N-3' }) })).status, 200, 'a write without a key is made');
  t.equal((await call(s.app, s.other, 'POST', '/api/incidents', { key: 'new-3', payload: incidentBody({ originId: 'O-1' }) })).status, 200, 'another user has keys of its own');
});

t.test('when 50 creates with new keys arrive at once around the bound, then exactly the bound is kept and the rest are 429', async (t) => {
  const s = await setUp(t, { config: { idempotencyKeysMax: 20 } });
  for (let i = 0; i < 15; i++) t.equal((await call(s.app, s.cad, 'POST', '/api/incidents', { key: `k-${i}`, payload: incidentBody({ originId: `K-${i}` }) })).status, 200);
  const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => call(s.app, s.cad, 'POST', '/api/incidents', { key: `p-${i}`, payload: incidentBody({ originId: `P-${i}` }) })));
  const counted: Record<number, number> = {};
  for (const a of answers) counted[a.status] = (counted[a.status] ?? 0) + 1;
  t.same(counted, { 200: 5, 429: 45 }, 'five more keys to the bound of 20, the rest refused');
  t.equal((await s.incidents()).length, 20, 'an incident for each key kept, none for a refused one');
});

/** a storage whose incident writes wait, while `held`, until the test releases them */
function heldWrites() {
  let release: () => void = () => {};
  let gate: Promise<void> | null = null;
  let waiting = 0;
  let failNext = false;
  const wrap = (storage: Storage): Storage => {
    const write = storage.incidents.write.bind(storage.incidents);
    const incidents = Object.create(storage.incidents) as Storage['incidents'];
    incidents.write = async (...args) => {
      if (failNext) {
        failNext = false;
        throw new Error('the write failed (test)');
      }
      if (gate) {
        waiting += 1;
        await gate;
      }
      return write(...args);
    };
    return Object.assign(Object.create(storage) as Storage, { incidents });
  };
  return {
    wrap,
    hold() {
      gate = new Promise((r) => (release = r));
    },
    release() {
      gate = null;
      release();
    },
    failNext() {
      failNext = true;
    },
    waiting: () => waiting,
  };
}

t.test('when a request comes again while the first with its key is in flight, then 409 with Retry-After; once it is answered, a retry gets its answer', async (t) => {
  const writes = heldWrites();
  const s = await setUp(t, { wrapStorage: writes.wrap });
  await call(s.app, s.cad, 'POST', '/api/incidents', { payload: incidentBody({ resources: ['A7'] }) });
  const before = (await events(s.app)).length;
  writes.hold();
  const update = incidentBody({ resources: ['E1'] });
  const first = call(s.app, s.cad, 'PUT', '/api/incidents/update', { key: 'in-flight', payload: update });
  while (writes.waiting() === 0) await new Promise((r) => setImmediate(r));
  const second = await call(s.app, s.cad, 'PUT', '/api/incidents/update', { key: 'in-flight', payload: update });
  t.equal(second.status, 409);
  t.equal(second.body.type, 'urn:cad-incident:problem:idempotency-key-in-use');
  t.equal(second.headers['retry-after'], '1');
  const otherBody = await call(s.app, s.cad, 'PUT', '/api/incidents/update', { key: 'in-flight', payload: incidentBody({ priority: 9 }) });
  t.equal(otherBody.status, 409, 'another request with the key in flight: 409 too (only the stored first request tells 422)');
  t.equal(otherBody.body.type, 'urn:cad-incident:problem:idempotency-key-in-use');
  t.equal(writes.waiting(), 1, 'neither reached the store');
  writes.release();
  const answered = await first;
  t.equal(answered.status, 202);
  const retry = await call(s.app, s.cad, 'PUT', '/api/incidents/update', { key: 'in-flight', payload: update });
  t.equal(retry.raw, answered.raw, 'a retry after the answer gets it');
  t.equal(retry.headers['idempotent-replayed'], 'true');
  t.equal((await events(s.app)).length, before + 3, 'one update written: A7 stood down, E1’s two devices assigned');
  const otherLater = await call(s.app, s.cad, 'PUT', '/api/incidents/update', { key: 'in-flight', payload: incidentBody({ priority: 9 }) });
  t.equal(otherLater.status, 422, 'the other request, sent again once the first is stored: 422');
});

t.test('when a faithful retry meets another request with its key in flight, then it is 409, never 422, and sent again it gets the first answer', async (t) => {
  const writes = heldWrites();
  const s = await setUp(t, { wrapStorage: writes.wrap });
  const body = incidentBody({ resources: ['A7'] });
  const first = await call(s.app, s.cad, 'POST', '/api/incidents', { key: 'answered', payload: body });
  t.equal(first.status, 202, 'stored (A7 offline)');
  writes.hold();
  // a request with the key and another body reaches the store and waits there
  const other = call(s.app, s.cad, 'POST', '/api/incidents', { key: 'answered', payload: incidentBody({ resources: ['A7'], priority: 9 }) });
  while (writes.waiting() === 0) await new Promise((r) => setImmediate(r));
  const retry = await call(s.app, s.cad, 'POST', '/api/incidents', { key: 'answered', payload: body });
  t.equal(retry.status, 409, 'the retry of the stored request meets the other in flight: retry later, not "send a new key"');
  t.equal(retry.body.type, 'urn:cad-incident:problem:idempotency-key-in-use');
  writes.release();
  const refused = await other;
  t.equal(refused.status, 422, 'the other request is told by the stored first one');
  const again = await call(s.app, s.cad, 'POST', '/api/incidents', { key: 'answered', payload: body });
  t.equal(again.raw, first.raw, 'the retry sent again gets the first answer');
  t.equal(again.headers['idempotent-replayed'], 'true');
});

t.test('when the write fails (500), then the key keeps nothing and a retry is processed', async (t) => {
  const writes = heldWrites();
  const s = await setUp(t, { wrapStorage: writes.wrap });
  writes.failNext();
  const failed = await call(s.app, s.cad, 'POST', '/api/incidents', { key: 'k', payload: incidentBody() });
  t.equal(failed.status, 500);
  const retry = await call(s.app, s.cad, 'POST', '/api/incidents', { key: 'k', payload: incidentBody() });
  t.equal(retry.status, 200);
  t.notOk(retry.headers['idempotent-replayed']);
  t.equal((await s.incidents()).length, 1);
});

t.test('when many requests with one key arrive at once, then one write is made and every other answer is 409 or its replay', async (t) => {
  const s = await setUp(t);
  const body = incidentBody({ resources: ['E1', 'A7'] });
  const answers = await Promise.all(Array.from({ length: 12 }, () => call(s.app, s.cad, 'POST', '/api/incidents', { key: 'burst', payload: body })));
  const statuses = answers.map((a) => a.status);
  const processed = answers.filter((a) => a.status === 202 && !a.headers['idempotent-replayed']);
  t.equal(processed.length, 1, `one processed (statuses ${statuses.join(',')})`);
  for (const a of answers) {
    if (a.status === 409) t.equal(a.body.type, 'urn:cad-incident:problem:idempotency-key-in-use');
    else t.equal(a.raw, processed[0]!.raw, 'a replay is the processed answer');
  }
  t.equal((await s.incidents()).length, 1, 'one incident');
  t.equal((await events(s.app)).length, 3, 'one write’s events: E1’s two devices and A7');
  t.equal(s.published(), 3, 'published once');
  const retry = await call(s.app, s.cad, 'POST', '/api/incidents', { key: 'burst', payload: body });
  t.equal(retry.raw, processed[0]!.raw);
});

t.test('when a key is used again after its retention, then the request is processed anew; within it, it is not', async (t) => {
  const clock = new FakeClock();
  const s = await setUp(t, { clock, config: { idempotencyTtlH: 2 } });
  const created = await call(s.app, s.cad, 'POST', '/api/incidents', { payload: incidentBody() });
  const id = created.body.id;
  const update = incidentBody({ description: 'first' });
  const first = await call(s.app, s.cad, 'PUT', '/api/incidents/update', { key: 'kept', payload: update });
  t.equal(first.headers.etag, `"${id}-2"`);
  clock.advance(2 * 3600_000 - 1);
  const within = await call(s.app, s.cad, 'PUT', '/api/incidents/update', { key: 'kept', payload: update });
  t.equal(within.headers['idempotent-replayed'], 'true', 'a millisecond before its retention ends: replayed');
  t.equal((await call(s.app, s.cad, 'PUT', '/api/incidents/update', { key: 'kept', payload: incidentBody({ description: 'other' }) })).status, 422);
  clock.advance(1);
  const anew = await call(s.app, s.cad, 'PUT', '/api/incidents/update', { key: 'kept', payload: update });
  t.equal(anew.status, 200);
  t.notOk(anew.headers['idempotent-replayed'], 'past its retention: a new request');
  t.equal(anew.headers.etag, `"${id}-3"`, 'written anew');
  const replayOfNew = await call(s.app, s.cad, 'PUT', '/api/incidents/update', { key: 'kept', payload: update });
  t.equal(replayOfNew.headers.etag, `"${id}-3"`, 'and the key now answers with the new write');
  clock.advance(2 * 3600_000);
  const otherBody = await call(s.app, s.cad, 'PUT', '/api/incidents/update', { key: 'kept', payload: incidentBody({ description: 'second' }) });
  t.equal(otherBody.status, 200, 'past its retention another body is no 422');
  t.equal(otherBody.body.description, 'second');
});

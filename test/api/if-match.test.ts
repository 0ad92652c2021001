// ETag on incident answers and If-Match on the updates and the delete (DESIGN section 12, issue
// 28): a stale tag is 412 with the incident as stored, and nothing is written or pushed; the
// check is made inside the unit of work, so of two writes sent with one tag only one passes.
// Runs on both adapters (TEST_ADAPTER=postgres).
import t, { type Test } from 'tap';
import type { FastifyInstance } from 'fastify';
import { bearer, json, makeApp, mintToken } from '../fixtures/app.js';
import { events, incidentBody, world } from '../fixtures/incidents.js';
import { MemoryBus } from '../../src/adapters/memory/bus.js';

async function call(
  app: FastifyInstance,
  auth: string,
  method: 'POST' | 'PUT' | 'DELETE' | 'GET',
  url: string,
  opts: { key?: string; ifMatch?: string; payload?: object } = {},
) {
  const headers: Record<string, string> = { authorization: auth };
  if (opts.key !== undefined) headers['idempotency-key'] = opts.key;
  if (opts.ifMatch !== undefined) headers['if-match'] = opts.ifMatch;
  const res = await app.inject({ method, url, headers, ...(opts.payload === undefined ? {} : { payload: opts.payload }) });
  return { status: res.statusCode, body: res.body ? json(res) : undefined, headers: res.headers, raw: res.body };
}

async function setUp(t: Test) {
  const bus = new MemoryBus();
  let published = 0;
  bus.subscribe('written', (evs) => (published += evs.length));
  const { app } = await makeApp(t, { bus });
  const w = await world(app);
  const cad = bearer(await mintToken(app, w.cad));
  const other = bearer(await mintToken(app, w.other));
  const created = await call(app, cad, 'POST', '/api/incidents', { payload: incidentBody({ resources: ['A7'] }) });
  const id: number = created.body.incident.id;
  return { app, w, cad, other, id, created, published: () => published };
}

t.test('when an incident is created, read and written, then its ETag names each state, the same in every answer', async (t) => {
  const s = await setUp(t);
  t.equal(s.created.headers.etag, `"${s.id}-1"`);
  const read = await call(s.app, s.cad, 'GET', `/api/incidents/${s.id}`);
  t.equal(read.headers.etag, `"${s.id}-1"`, 'GET gives the create’s tag');
  const tags = new Set([read.headers.etag]);
  const writes: [('PUT'), string, object][] = [
    ['PUT', '/api/incidents/update', incidentBody({ resources: ['A7'], description: 'a' })],
    ['PUT', `/api/incidents/${s.id}`, incidentBody({ resources: ['A7'], description: 'a' })],
    ['PUT', '/api/incidents/update', incidentBody({ resources: ['A7'], description: 'a' })],
  ];
  for (const [method, url, payload] of writes) {
    const res = await call(s.app, s.cad, method, url, { payload });
    t.ok(!tags.has(res.headers.etag as string), `a new tag after every write, even one that changes nothing (${res.headers.etag})`);
    tags.add(res.headers.etag as string);
    t.equal((await call(s.app, s.cad, 'GET', `/api/incidents/${s.id}`)).headers.etag, res.headers.etag, 'GET agrees with the write’s answer');
  }
  t.equal(tags.size, 4);
});

t.test('when If-Match names the current tag, then the write is made; when it names an older one, then 412 with the incident as stored, and nothing is written or pushed', async (t) => {
  const s = await setUp(t);
  const v1 = `"${s.id}-1"`;
  const ok = await call(s.app, s.cad, 'PUT', '/api/incidents/update', { ifMatch: v1, payload: incidentBody({ resources: ['A7'], description: 'newer' }) });
  t.equal(ok.status, 200);
  const v2 = ok.headers.etag as string;
  t.equal(v2, `"${s.id}-2"`);
  const eventsBefore = await events(s.app);
  const published = s.published();

  const stale = incidentBody({ resources: ['E1'], description: 'older, delayed in a queue' });
  for (const [method, url] of [['PUT', '/api/incidents/update'], ['PUT', `/api/incidents/${s.id}`]] as const) {
    const res = await call(s.app, s.cad, method, url, { ifMatch: v1, payload: stale });
    t.equal(res.status, 412, url);
    t.equal(res.headers['content-type'], 'application/problem+json; charset=utf-8');
    t.equal(res.body.type, 'urn:cad-incident:problem:precondition-failed');
    t.equal(res.headers.etag, v2, 'the current tag');
    t.same(res.body.incident, ok.body, 'the incident as it is now');
  }
  const del = await call(s.app, s.cad, 'DELETE', `/api/incidents/${s.id}`, { ifMatch: v1 });
  t.equal(del.status, 412, 'a stale delete');
  t.same(del.body.incident, ok.body);

  t.same(await events(s.app), eventsBefore, 'no event written (E1 not assigned, A7 not stood down)');
  t.equal(s.published(), published, 'nothing pushed');
  const now = await call(s.app, s.cad, 'GET', `/api/incidents/${s.id}`);
  t.equal(now.headers.etag, v2, 'not written');
  t.equal(now.body.description, 'newer');

  const delOk = await call(s.app, s.cad, 'DELETE', `/api/incidents/${s.id}`, { ifMatch: v2 });
  t.equal(delOk.status, 204, 'the current tag: deleted');
});

t.test('when If-Match is *, a list, weak or foreign, then it matches as RFC 9110 says; when it is not entity-tags, then 400', async (t) => {
  const s = await setUp(t);
  const body = incidentBody({ resources: ['A7'] });
  const put = (ifMatch: string) => call(s.app, s.cad, 'PUT', `/api/incidents/${s.id}`, { ifMatch, payload: body });
  t.equal((await put('*')).status, 200, '* matches an incident that exists');
  t.equal((await put(`"${s.id}-1", "${s.id}-2", "x"`)).status, 200, 'a list holding the current tag');
  t.equal((await put(`W/"${s.id}-3"`)).status, 412, 'a weak tag never matches (strong comparison)');
  t.equal((await put('"something-else"')).status, 412, 'a tag never given out');
  t.equal((await put(`"${s.id + 1}-3"`)).status, 412, 'another incident’s tag');
  for (const bad of [`${s.id}-3`, '"a" "b"', ', ,', '"unterminated']) {
    const res = await put(bad);
    t.equal(res.status, 400, JSON.stringify(bad));
    t.equal(res.body.errors?.[0]?.path, '/headers/if-match');
  }
  t.equal((await call(s.app, s.cad, 'GET', `/api/incidents/${s.id}`)).headers.etag, `"${s.id}-3"`, 'only the two matching writes were made');
});

t.test('when the precondition would fail but the request fails without it, then 404 is the answer, and the incident is not shown', async (t) => {
  const s = await setUp(t);
  const stale = `"${s.id}-0"`;
  t.equal((await call(s.app, s.cad, 'PUT', `/api/incidents/${s.id + 100}`, { ifMatch: stale, payload: incidentBody() })).status, 404);
  t.equal((await call(s.app, s.cad, 'PUT', '/api/incidents/update', { ifMatch: '*', payload: incidentBody({ originId: 'NOPE' }) })).status, 404, 'If-Match: * on no incident: 404');
  const forbidden = await call(s.app, s.other, 'PUT', `/api/incidents/${s.id}`, { ifMatch: stale, payload: incidentBody() });
  t.equal(forbidden.status, 404, 'no permission: 404 (as no incident), not 412');
  t.notOk(forbidden.body.incident, 'the incident is not shown to a caller without permission');
  t.notOk(forbidden.headers.etag);
  t.equal((await call(s.app, s.other, 'DELETE', `/api/incidents/${s.id}`, { ifMatch: stale })).status, 404);
});

t.test('when an originId is used again after a delete, then a tag of the deleted incident does not match the new one', async (t) => {
  const s = await setUp(t);
  t.equal((await call(s.app, s.cad, 'DELETE', `/api/incidents/${s.id}`)).status, 204);
  const again = await call(s.app, s.cad, 'POST', '/api/incidents', { payload: incidentBody({ resources: ['A7'] }) });
  t.equal(again.headers.etag, `"${again.body.incident.id}-1"`);
  t.not(again.body.incident.id, s.id, 'a new id');
  const res = await call(s.app, s.cad, 'PUT', '/api/incidents/update', { ifMatch: `"${s.id}-1"`, payload: incidentBody() });
  t.equal(res.status, 412, 'same originId, same version, another incident');
});

t.test('when two updates are sent at once with one tag, then one is made and the other is 412: the check is inside the unit of work', async (t) => {
  const s = await setUp(t);
  const tag = `"${s.id}-1"`;
  const before = (await events(s.app)).length;
  const answers = await Promise.all(
    ['E1', 'L9', 'A7, E1'].map((c, i) =>
      call(s.app, s.cad, 'PUT', '/api/incidents/update', { ifMatch: tag, payload: incidentBody({ resources: c.split(', '), priority: i }) }),
    ),
  );
  const statuses = answers.map((a) => a.status).sort();
  t.equal(statuses.filter((x) => x === 412).length, 2, `two refused (${statuses.join(',')})`);
  const made = answers.find((a) => a.status !== 412)!;
  t.equal(made.headers.etag, `"${s.id}-2"`, 'one write');
  for (const a of answers.filter((x) => x.status === 412)) t.equal(a.headers.etag, `"${s.id}-2"`, 'the refused see the write that was made');
  const now = await call(s.app, s.cad, 'GET', `/api/incidents/${s.id}`);
  t.same(now.body, made.status === 200 ? made.body : made.body.incident, 'the stored incident is the one answered');
  t.ok((await events(s.app)).length > before, 'that write’s events only');
});

t.test('when a stale update is sent with an Idempotency-Key, then its 412 keeps no key: a retry is decided again, with the incident as it is now (issue 36)', async (t) => {
  const s = await setUp(t);
  const v1 = `"${s.id}-1"`;
  t.equal((await call(s.app, s.cad, 'PUT', '/api/incidents/update', { payload: incidentBody({ resources: ['A7'], description: 'v2' }) })).status, 200);
  const refused = await call(s.app, s.cad, 'PUT', '/api/incidents/update', { key: 'stale', ifMatch: v1, payload: incidentBody({ description: 'stale' }) });
  t.equal(refused.status, 412);
  t.equal((await call(s.app, s.cad, 'PUT', '/api/incidents/update', { payload: incidentBody({ resources: ['A7'], description: 'v3' }) })).status, 200);
  const again = await call(s.app, s.cad, 'PUT', '/api/incidents/update', { key: 'stale', ifMatch: v1, payload: incidentBody({ description: 'stale' }) });
  t.equal(again.status, 412);
  t.notOk(again.headers['idempotent-replayed'], 'not a replay');
  t.equal(again.headers.etag, `"${s.id}-3"`, 'decided on the incident as it is now');
  t.equal(again.body.incident.description, 'v3');
});

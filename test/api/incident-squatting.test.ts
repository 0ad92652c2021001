// Squatting another tenant's originIds (issue 36): an originId is unique across the service, so
// creating incidents is a right an administrator grants (User.createIncidents), and an incident
// the caller has no permission on answers 404 on every path that names it, exactly as one that
// does not exist: no answer tells an ordinary tenant that an originId or an id is in use.
import t, { type Test } from 'tap';
import type { FastifyInstance } from 'fastify';
import { adminAuth, basic, createDevice, createUser, grant, json, makeApp } from '../fixtures/app.js';
import { incidentBody, send, world } from '../fixtures/incidents.js';

const PROBLEM = 'urn:cad-incident:problem:';

/** a user an administrator made without createIncidents, reaching a device of its own named E1 */
async function tenant(app: FastifyInstance, extra: Record<string, unknown> = {}): Promise<{ id: number; auth: string }> {
  const id = await createUser(app, { name: 'Tenant', email: 'tenant@example.test', password: 'tenant-password', createIncidents: false, ...extra });
  const device = await createDevice(app, { name: 'E1', uniqueId: 'tenant-e1' });
  await grant(app, { userId: id, deviceId: device });
  return { id, auth: basic('tenant@example.test', 'tenant-password') };
}

async function userOf(app: FastifyInstance, id: number) {
  return json<{ createIncidents: boolean }>(await app.inject({ method: 'GET', url: `/api/users/${id}`, headers: { authorization: adminAuth() } }));
}

function putUser(app: FastifyInstance, auth: string, id: number, body: Record<string, unknown>) {
  return send(app, auth, 'PUT', `/api/users/${id}`, { name: 'Tenant', email: 'tenant@example.test', ...body });
}

t.test('when a user not granted createIncidents creates an incident, then 403 create-incidents-not-granted, nothing is taken, and the CAD creates it', async (t) => {
  const { app } = await makeApp(t);
  const w = await world(app);
  const squatter = await tenant(app);
  t.equal((await userOf(app, squatter.id)).createIncidents, false, 'shown on the user');

  const squat = await send(app, squatter.auth, 'POST', '/api/incidents', incidentBody({ originId: 'CAD-2026-056549', resources: ['E1'] }));
  t.equal(squat.status, 403);
  t.equal(squat.headers['content-type'], 'application/problem+json; charset=utf-8');
  t.equal(squat.body.type, `${PROBLEM}create-incidents-not-granted`);
  t.match(squat.body.detail, /createIncidents/, 'the detail says what is missing and who grants it');

  const real = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'CAD-2026-056549', resources: ['E1'] }));
  t.equal(real.status, 202, 'the CAD\'s real incident is stored, its devices\' pushes queued (offline: 202)');
  const update = await send(app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ originId: 'CAD-2026-056549', resources: ['E1', 'A7'] }));
  t.equal(update.status, 202, 'and its update too');

  const again = await send(app, squatter.auth, 'POST', '/api/incidents', incidentBody({ originId: 'CAD-2026-056549' }));
  t.same([again.status, again.body.type], [403, `${PROBLEM}create-incidents-not-granted`], 'an originId in use: the same 403, not a 409 that tells it is in use');
  t.same((await send(app, adminAuth(), 'GET', '/api/incidents?all=true')).body.map((i: { originId: string }) => i.originId), ['CAD-2026-056549'], 'one incident stored');
});

t.test('when createIncidents is granted, then only an administrator can: not a manager, not the user itself', async (t) => {
  const { app } = await makeApp(t);
  await createUser(app, { name: 'M', email: 'm@example.test', password: 'manager-password', userLimit: 5, createIncidents: true });
  const m = basic('m@example.test', 'manager-password');

  const created = await send(app, m, 'POST', '/api/users', { name: 'U', email: 'u@example.test', password: 'u-password-1', createIncidents: true });
  t.same([created.status, created.body.type], [403, `${PROBLEM}forbidden`], 'a manager cannot create a user with it');
  t.equal(json(await app.inject({ method: 'GET', url: '/api/users', headers: { authorization: adminAuth() } })).length, 2, 'nobody was created');

  const made = await send(app, m, 'POST', '/api/users', { name: 'Tenant', email: 'tenant@example.test', password: 'tenant-password' });
  t.equal(made.status, 200);
  t.equal(made.body.createIncidents, false, 'a manager\'s new user is without it');
  const id = made.body.id as number;
  const self = basic('tenant@example.test', 'tenant-password');

  const byManager = await putUser(app, m, id, { createIncidents: true });
  t.same([byManager.status, byManager.body.type], [403, `${PROBLEM}forbidden`], 'its manager cannot grant it');
  const bySelf = await putUser(app, self, id, { createIncidents: true });
  t.same([bySelf.status, bySelf.body.type], [403, `${PROBLEM}forbidden`], 'the user cannot grant it to itself');
  t.equal((await putUser(app, self, id, { createIncidents: false, phone: '+44 1' })).status, 200, 'repeating the current value is no change');
  t.equal((await userOf(app, id)).createIncidents, false, 'still without it');
  t.equal((await send(app, self, 'POST', '/api/incidents', incidentBody())).status, 403);

  const byAdmin = await putUser(app, adminAuth(), id, { createIncidents: true });
  t.same([byAdmin.status, byAdmin.body.createIncidents], [200, true], 'an administrator grants it');
  t.equal((await send(app, self, 'POST', '/api/incidents', incidentBody())).status, 200, 'and the user creates');
  t.equal((await putUser(app, m, id, { createIncidents: false })).status, 403, 'nor can its manager take it away');
  t.equal((await putUser(app, adminAuth(), id, { createIncidents: false })).status, 200, 'an administrator can');
  t.equal((await send(app, self, 'POST', '/api/incidents', incidentBody({ originId: 'CAD-2' }))).body.type, `${PROBLEM}create-incidents-not-granted`, 'refused again at once');
});

t.test('when a readonly user is granted createIncidents, then it still creates nothing; an administrator creates without it', async (t) => {
  const { app } = await makeApp(t);
  await createUser(app, { name: 'RO', email: 'ro@example.test', password: 'ro-password-1', readonly: true, createIncidents: true });
  const ro = await send(app, basic('ro@example.test', 'ro-password-1'), 'POST', '/api/incidents', incidentBody());
  t.same([ro.status, ro.body.type], [403, `${PROBLEM}readonly-user`]);
  await createUser(app, { name: 'A2', email: 'a2@example.test', password: 'a2-password-1', administrator: true, createIncidents: false });
  t.equal((await send(app, basic('a2@example.test', 'a2-password-1'), 'POST', '/api/incidents', incidentBody())).status, 200, 'administrators always may');
});

t.test('when a user not granted createIncidents moves an incident it may change to another originId, then 403; other changes are fine', async (t) => {
  const { app } = await makeApp(t);
  const w = await world(app);
  const linked = await tenant(app);
  const created = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'CAD-7' }));
  await grant(app, { userId: linked.id, incidentId: created.body.id });

  const moved = await send(app, linked.auth, 'PUT', `/api/incidents/${created.body.id}`, incidentBody({ originId: 'CAD-2026-056549' }));
  t.same([moved.status, moved.body.type], [403, `${PROBLEM}create-incidents-not-granted`], 'moving it would take that originId');
  const kept = await send(app, linked.auth, 'PUT', `/api/incidents/${created.body.id}`, incidentBody({ originId: 'CAD-7', priority: 1 }));
  t.equal(kept.status, 200, 'the same originId: an ordinary update');
  t.equal((await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'CAD-2026-056549' }))).status, 200, 'the originId was not taken');
  t.equal((await send(app, w.cad, 'PUT', `/api/incidents/${created.body.id}`, incidentBody({ originId: 'CAD-8' }))).status, 200, 'a granted user moves it');
});

t.test('when an originId is in use, then a granted user\'s 409 names the incident only if it may see it', async (t) => {
  const { app } = await makeApp(t);
  const w = await world(app);
  const mine = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'CAD-1' }));
  const theirs = await send(app, w.other, 'POST', '/api/incidents', incidentBody({ originId: 'B-1' }));
  const own = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'CAD-1' }));
  t.same([own.status, own.body.type, own.body.incidentId], [409, `${PROBLEM}origin-id-taken`, mine.body.id]);
  const other = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'B-1' }));
  t.same([other.status, other.body.type], [409, `${PROBLEM}origin-id-taken`]);
  t.notOk('incidentId' in other.body, `not ${theirs.body.id}`);
});

/** status and body of each request, with the id it names written as {id} (the detail of a permission's 404 says which) */
async function answers(app: FastifyInstance, auth: string, id: number, originId: string) {
  const norm = (r: { status: number; body: unknown }) => {
    const body = r.body && typeof r.body === 'object' ? { ...(r.body as Record<string, unknown>) } : r.body;
    if (body && typeof body === 'object') delete (body as Record<string, unknown>).instance;
    return { status: r.status, body: JSON.parse(JSON.stringify(body ?? null).replaceAll(`No incident ${id}.`, 'No incident {id}.')) };
  };
  const me = (await send(app, auth, 'GET', '/api/session')).body?.id as number | undefined;
  const key = (n: number) => ({ 'idempotency-key': `"k-${originId}-${n}"` });
  const keyed = async (method: 'PUT' | 'DELETE', url: string, n: number, payload?: unknown) => {
    const res = await app.inject({ method, url, headers: { authorization: auth, ...key(n) }, ...(payload === undefined ? {} : { payload: payload as object }) });
    return { status: res.statusCode, body: res.body ? json(res) : undefined };
  };
  return {
    'GET /incidents/{id}': norm(await send(app, auth, 'GET', `/api/incidents/${id}`)),
    'PUT /incidents/{id}': norm(await send(app, auth, 'PUT', `/api/incidents/${id}`, incidentBody({ originId, resources: [] }))),
    'PUT /incidents/{id} If-Match': norm(await app.inject({ method: 'PUT', url: `/api/incidents/${id}`, headers: { authorization: auth, 'if-match': `"${id}-1"` }, payload: incidentBody({ originId }) }).then((r) => ({ status: r.statusCode, body: json(r) }))),
    'PUT /incidents/{id} Idempotency-Key': norm(await keyed('PUT', `/api/incidents/${id}`, 1, incidentBody({ originId }))),
    'PUT /incidents/update': norm(await send(app, auth, 'PUT', '/api/incidents/update', incidentBody({ originId, status: 'CLOSED' }))),
    'PUT /incidents/update Idempotency-Key': norm(await keyed('PUT', '/api/incidents/update', 2, incidentBody({ originId }))),
    'DELETE /incidents/{id}': norm(await send(app, auth, 'DELETE', `/api/incidents/${id}`)),
    'DELETE /incidents/{id} Idempotency-Key': norm(await keyed('DELETE', `/api/incidents/${id}`, 3)),
    'GET /incidents/{id}/responders': norm(await send(app, auth, 'GET', `/api/incidents/${id}/responders`)),
    'GET /events?incidentId': norm(await send(app, auth, 'GET', `/api/events?incidentId=${id}`)),
    'GET /incidents?originId&all': norm(await send(app, auth, 'GET', `/api/incidents?originId=${originId}&all=true`)),
    'POST /permissions incidentId': norm(await send(app, auth, 'POST', '/api/permissions', { userId: me, incidentId: id })),
    'DELETE /permissions incidentId': norm(await send(app, auth, 'DELETE', '/api/permissions', { userId: me, incidentId: id })),
  };
}

async function unseen(t: Test, who: 'granted' | 'not granted' | 'readonly') {
  const { app } = await makeApp(t);
  const w = await world(app);
  const theirs = await send(app, w.other, 'POST', '/api/incidents', incidentBody({ originId: 'B-1', resources: ['E1'] }));
  const id = theirs.body.incident?.id ?? theirs.body.id;
  t.equal(theirs.status, 202, 'the other tenant\'s incident is stored (its E1 is offline: 202)');
  const auth =
    who === 'granted'
      ? w.cad
      : (await tenant(app, who === 'readonly' ? { readonly: true } : {})).auth;
  const seen = await answers(app, auth, id, 'B-1');
  const unused = await answers(app, auth, id + 1000, 'B-UNUSED');
  t.same(seen, unused, 'every path answers as for an incident that does not exist');
  for (const [path, answer] of Object.entries(seen)) {
    if (path.startsWith('GET /events') || path.startsWith('GET /incidents?')) t.same(answer, { status: 200, body: [] }, `${path}: nothing listed`);
    else t.same([answer.status, answer.body.type], [404, `${PROBLEM}not-found`], `${path}: 404`);
  }
  const after = await send(app, adminAuth(), 'GET', `/api/incidents/${id}`);
  t.same([after.status, after.body.originId, after.body.resources], [200, 'B-1', ['E1']], 'nothing changed');
}

t.test('when a granted user names another tenant\'s incident, then every path answers 404, exactly as for an unused id', (t) => unseen(t, 'granted'));
t.test('when a user not granted createIncidents names another tenant\'s incident, then every path answers as for an unused id', (t) => unseen(t, 'not granted'));
t.test('when a readonly user names another tenant\'s incident, then 404 comes before its 403, as for an unused id', (t) => unseen(t, 'readonly'));

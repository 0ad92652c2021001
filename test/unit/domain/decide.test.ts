// The decisions taken inside an incident unit of work (domain/incident.ts decide*), and the
// refusals services throw (domain/refusal.ts): who may act, in the error order 404 → 403 → 409.
import t from 'tap';
import { type Caller, type CurrentIncident, type Incident, type MatchContext } from '../../../src/domain/incident.js';
import { decideCreate, decideDelete, decideUpdate } from '../../../src/domain/incident-write.js';
import { REFUSAL_CODES, Refused, refuse } from '../../../src/domain/refusal.js';

const NOW = '2026-11-22T12:00:00.000Z';
const cad: Caller = { id: 2, administrator: false, readonly: false, createIncidents: true };
const viewer: Caller = { id: 3, administrator: false, readonly: true, createIncidents: true };
const match: MatchContext = { matches: new Map([['e1', [1]]]), online: new Set([1]) };
const incident: Incident = {
  id: 7, originId: 'CAD-7', type: 'FIRE', timeOfOrigin: null, timeReceived: null, timeUpdated: null, status: 'OPEN',
  timeClosed: null, latitude: 1, longitude: 2, priority: 3, description: null, resources: ['E1'],
};
const current = (reachable = true): CurrentIncident => ({ incident, version: 1, assignments: [{ callsignKey: 'e1', callsign: 'E1', deviceId: 1 }], reachable });
const createBody = { originId: 'CAD-8', type: 'FIRE', latitude: 1, longitude: 2, priority: 3, resources: ['E1'] };

t.test('when creating, then a readonly caller is refused before an originId in use is', async (t) => {
  t.same(decideCreate(viewer, createBody, NOW)(current(), match), { ok: false, refusal: { code: 'FORBIDDEN', reason: 'readonly' } });
  t.same(decideCreate(cad, createBody, NOW)(current(true), match), { ok: false, refusal: { code: 'ORIGIN_ID_TAKEN', incidentId: 7 } });
  t.same(decideCreate(cad, createBody, NOW)(current(false), match), { ok: false, refusal: { code: 'ORIGIN_ID_TAKEN', incidentId: null } }, 'the id only for a caller who may see it');
  const d = decideCreate(cad, createBody, NOW)(null, match);
  t.ok(d.ok && d.write === 'insert' && d.plan.events.length === 1, 'a free originId: an insert assigning E1');
  t.same(decideCreate(cad, { ...createBody, resources: [' '] }, NOW)(null, match), { ok: false, refusal: { code: 'INVALID_CALLSIGN', error: { code: 'INVALID_CALLSIGN', index: 0, reason: 'empty' } } });
});

t.test('when updating, then 404, also without permission (issue 36), then 403 readonly, then the plan', async (t) => {
  const body = { originId: 'CAD-7', type: 'FIRE', resources: [] };
  t.same(decideUpdate(viewer, body, NOW)(null, match), { ok: false, refusal: { code: 'NOT_FOUND' } });
  t.same(decideUpdate(viewer, body, NOW)(current(false), match), { ok: false, refusal: { code: 'NOT_FOUND' } });
  t.same(decideUpdate(viewer, body, NOW)(current(true), match), { ok: false, refusal: { code: 'FORBIDDEN', reason: 'readonly' } });
  const d = decideUpdate(cad, body, NOW)(current(true), match);
  t.ok(d.ok && d.write === 'update' && d.plan.events.length === 1 && d.plan.events[0]!.type === 'incidentDeassigned', 'E1 stood down');
  t.same(decideUpdate(cad, { ...body, status: 'CLOSED' as const, resources: ['E1'] }, NOW)(current(true), match), {
    ok: false,
    refusal: { code: 'INCIDENT_CLOSED', beingClosed: true },
  });
});

t.test('when deleting, then 404, also without permission (issue 36), then 403, then every assigned device stood down', async (t) => {
  t.same(decideDelete(cad)(null, match), { ok: false, refusal: { code: 'NOT_FOUND' } });
  t.same(decideDelete(cad)(current(false), match), { ok: false, refusal: { code: 'NOT_FOUND' } });
  t.same(decideDelete(viewer)(current(true), match), { ok: false, refusal: { code: 'FORBIDDEN', reason: 'readonly' } });
  const d = decideDelete(cad)(current(true), match);
  t.ok(d.ok && d.write === 'delete', 'a deletion');
  if (d.ok) t.same(d.plan.events.map((e) => [e.deviceId, e.attributes]), [[1, { callsign: 'E1', incidentStatus: 'CLOSED', incidentDeleted: true }]]);
});

t.test('when a service refuses, then the refusal carries its code, detail and fields', async (t) => {
  const r = refuse.invalid('bad', [{ path: '/body/x', message: 'is bad' }]);
  t.ok(r instanceof Refused && r instanceof Error);
  t.same([r.code, r.detail, r.extra, r.name], ['INVALID', 'bad', { errors: [{ path: '/body/x', message: 'is bad' }] }, 'Refused']);
  t.same(refuse.invalid('bad').extra, {}, 'no field list unless given');
  t.same([refuse.unauthorized().code, refuse.unauthorized('why').detail], ['UNAUTHORIZED', 'why']);
  t.same([refuse.forbidden('no').code, refuse.readonly().code, refuse.notFound('none').code], ['FORBIDDEN', 'READONLY', 'NOT_FOUND']);
  const busy = refuse.busy('too many lookups', 4);
  t.same([busy.code, busy.detail, busy.headers], ['BUSY', 'too many lookups', { 'retry-after': '4' }], 'busy names its Retry-After');
  t.same(new Refused('EMAIL_TAKEN', 'taken').extra, {});
  t.ok(REFUSAL_CODES.includes('LAST_ADMINISTRATOR'));
});

t.test('when a caller not granted createIncidents creates, then 403 create-not-granted, before the originId is looked at (issue 36)', async (t) => {
  const tenant: Caller = { ...cad, createIncidents: false };
  t.same(decideCreate(tenant, createBody, NOW)(null, match), { ok: false, refusal: { code: 'FORBIDDEN', reason: 'create-not-granted' } });
  t.same(decideCreate(tenant, createBody, NOW)(current(false), match), { ok: false, refusal: { code: 'FORBIDDEN', reason: 'create-not-granted' } }, 'not 409: an originId in use is not told');
  t.same(decideCreate({ ...viewer, createIncidents: false }, createBody, NOW)(null, match), { ok: false, refusal: { code: 'FORBIDDEN', reason: 'readonly' } }, 'readonly first');
  const d = decideCreate({ id: 1, administrator: true, readonly: false, createIncidents: false }, createBody, NOW)(null, match);
  t.ok(d.ok && d.write === 'insert', 'an administrator creates whatever createIncidents says');
});

t.test('when a caller not granted createIncidents moves an incident to another originId, then 403; keeping it is an update (issue 36)', async (t) => {
  const tenant: Caller = { ...cad, createIncidents: false };
  const body = { originId: 'CAD-7', type: 'FIRE', resources: [] };
  t.same(decideUpdate(tenant, { ...body, originId: 'CAD-SQUAT' }, NOW)(current(true), match), { ok: false, refusal: { code: 'FORBIDDEN', reason: 'create-not-granted' } });
  t.same(decideUpdate(tenant, { ...body, originId: 'CAD-SQUAT' }, NOW)(current(false), match), { ok: false, refusal: { code: 'NOT_FOUND' } }, '404 first');
  const d = decideUpdate(tenant, body, NOW)(current(true), match);
  t.ok(d.ok && d.write === 'update', 'the same originId: an update');
  const moved = decideUpdate(cad, { ...body, originId: 'CAD-8' }, NOW)(current(true), match);
  t.ok(moved.ok && moved.write === 'update' && moved.plan.incident.originId === 'CAD-8', 'granted: moved');
});

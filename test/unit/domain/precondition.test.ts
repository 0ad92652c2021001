// If-Match inside the decision (domain/incident.ts decideUpdate/decideDelete, DESIGN section 12):
// checked on the incident the unit of work read, after 404 and 403, before the body is acted on.
import t from 'tap';
import { preconditionHolds, type Caller, type CurrentIncident, type Incident, type MatchContext } from '../../../src/domain/incident.js';
import { decideDelete, decideUpdate } from '../../../src/domain/incident-write.js';

const NOW = '2026-11-22T12:00:00.000Z';
const cad: Caller = { id: 2, administrator: false, readonly: false, createIncidents: true };
const viewer: Caller = { id: 3, administrator: false, readonly: true, createIncidents: true };
const match: MatchContext = { matches: new Map([['e1', [1]]]), online: new Set([1]) };
const incident: Incident = {
  id: 7, originId: 'CAD-7', type: 'FIRE', timeOfOrigin: null, timeReceived: null, timeUpdated: null, status: 'OPEN',
  timeClosed: null, latitude: 1, longitude: 2, priority: 3, description: null, resources: ['E1'],
};
const current = (version: number, reachable = true): CurrentIncident => ({
  incident, version, assignments: [{ callsignKey: 'e1', callsign: 'E1', deviceId: 1 }], reachable,
});
const body = { originId: 'CAD-7', type: 'FIRE', resources: ['E1'] };

t.test('when If-Match names the incident’s id and current version, or is *, then it holds; any other tag does not', async (t) => {
  const c = { incident, version: 4 };
  t.equal(preconditionHolds('*', c), true);
  t.equal(preconditionHolds([{ id: 7, version: 4 }], c), true);
  t.equal(preconditionHolds([{ id: 7, version: 3 }, { id: 7, version: 4 }], c), true, 'one of a list is enough');
  t.equal(preconditionHolds([{ id: 7, version: 3 }], c), false, 'an older version');
  t.equal(preconditionHolds([{ id: 8, version: 4 }], c), false, 'the same version of another incident (an originId used again after a delete)');
  t.equal(preconditionHolds([], c), false, 'only tags that can never match (weak or foreign ones are left out by the HTTP layer)');
});

t.test('when an update’s If-Match fails, then the decision is 412 with the incident as stored, and nothing is planned', async (t) => {
  t.same(decideUpdate(cad, body, NOW, [{ id: 7, version: 1 }])(current(2), match), {
    ok: false,
    refusal: { code: 'PRECONDITION_FAILED', current: incident, version: 2 },
  });
  const d = decideUpdate(cad, body, NOW, [{ id: 7, version: 2 }])(current(2), match);
  t.ok(d.ok && d.write === 'update', 'the current tag: the update is planned');
  t.ok(decideUpdate(cad, body, NOW, '*')(current(9), match).ok, '* holds for any stored incident');
  t.ok(decideUpdate(cad, body, NOW, null)(current(9), match).ok, 'no If-Match: no precondition');
});

t.test('when a precondition fails, then 404 and 403 still come first, and a 409 of the body comes after it', async (t) => {
  const stale = [{ id: 7, version: 1 }];
  t.same(decideUpdate(cad, body, NOW, stale)(null, match), { ok: false, refusal: { code: 'NOT_FOUND' } }, 'no incident: 404, not 412');
  t.same(decideUpdate(cad, body, NOW, stale)(current(2, false), match), { ok: false, refusal: { code: 'NOT_FOUND' } }, 'no permission: 404 as for no incident (issue 36), the incident is not shown');
  t.same(decideUpdate(viewer, body, NOW, stale)(current(2), match), { ok: false, refusal: { code: 'FORBIDDEN', reason: 'readonly' } });
  const closing = { ...body, status: 'CLOSED' as const };
  t.match(decideUpdate(cad, closing, NOW, stale)(current(2), match), { ok: false, refusal: { code: 'PRECONDITION_FAILED' } }, 'a stale close with callsigns: 412, not 409');
  t.match(decideUpdate(cad, closing, NOW, [{ id: 7, version: 2 }])(current(2), match), { ok: false, refusal: { code: 'INCIDENT_CLOSED' } }, 'fresh: the body’s own 409');
});

t.test('when a delete’s If-Match fails, then 412 with the incident; when it holds, every assigned device is stood down', async (t) => {
  t.same(decideDelete(cad, [{ id: 7, version: 5 }])(current(6), match), { ok: false, refusal: { code: 'PRECONDITION_FAILED', current: incident, version: 6 } });
  t.same(decideDelete(cad, [{ id: 7, version: 5 }])(null, match), { ok: false, refusal: { code: 'NOT_FOUND' } });
  const d = decideDelete(cad, [{ id: 7, version: 6 }])(current(6), match);
  t.ok(d.ok && d.write === 'delete' && d.plan.events.length === 1);
});

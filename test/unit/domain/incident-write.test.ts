// The write plan of an incident change (domain/incident-write.ts): every row a unit of work
// writes, decided here once for both database adapters (issue 38, 2026-11-29). Each rule below
// was, until then, written in sqlite/incidents.ts and again in postgres/incidents.ts.
import t from 'tap';
import type { Caller, CurrentIncident, EventDraft, Incident, MatchContext } from '../../../src/domain/incident.js';
import type { WakeKind } from '../../../src/domain/wake.js';
import {
  callsignKeyChanges,
  eventStates,
  planCreateWrite,
  planDeleteWrite,
  planUpdateWrite,
  plannedEvents,
  wakeStepsOf,
  type WritePlan,
} from '../../../src/domain/incident-write.js';

const NOW = '2026-11-29T04:00:00.000Z';
const cad: Caller = { id: 2, administrator: false, readonly: false, createIncidents: true };
const match = (m: Record<string, number[]> = {}, online: number[] = []): MatchContext => ({ matches: new Map(Object.entries(m)), online: new Set(online) });
const incident: Incident = {
  id: 7, originId: 'CAD-7', type: 'FIRE', timeOfOrigin: null, timeReceived: null, timeUpdated: null, status: 'OPEN',
  timeClosed: null, latitude: 1, longitude: 2, priority: 3, description: null, resources: ['E1', 'E2'],
};
const assigned = [
  { callsignKey: 'e1', callsign: 'E1', deviceId: 1 },
  { callsignKey: 'e2', callsign: 'E2', deviceId: 2 },
];
const current = (over: Partial<CurrentIncident> = {}): CurrentIncident => ({ incident, version: 4, assignments: assigned, reachable: true, originIdHolder: null, ...over });
const body = { originId: 'CAD-7', type: 'FIRE', latitude: 1, longitude: 2, priority: 3 };

function planOf(d: ReturnType<ReturnType<typeof planCreateWrite>>): WritePlan {
  if (!d.ok) throw new Error(`refused: ${d.refusal.code}`);
  return d.plan;
}

t.test('when an incident is created, then the plan inserts it linked to its creator at version 1, files it under each callsign key once, and writes no response state nor webhook', async (t) => {
  const p = planOf(planCreateWrite(cad, { ...body, originId: 'CAD-8', resources: ['E1', ' e1 ', 'E3'] }, NOW)(null, match({ e1: [1], e3: [3] }, [3])));
  t.match(p.row, { write: 'insert', creator: cad.id, incident: { originId: 'CAD-8', status: 'OPEN' } });
  t.equal(p.version, 1);
  t.same(p.callsignKeys, { add: ['e1', 'e3'], remove: [] }, 'each key once, however it is spelled');
  t.same(p.responses, { cancel: [], restart: [] });
  t.same(p.webhooks, []);
  t.same(p.supersede, [], 'an assignment replaces nothing');
  t.same(p.events.map((e) => [e.type, e.deviceId, e.state]), [['incidentAssigned', 1, 'PENDING'], ['incidentAssigned', 3, 'PENDING']]);
  t.equal(p.now, NOW);
});

t.test('when an update changes callsigns, then the plan raises the version, moves the callsign keys, cancels the ended assignments, restarts the new ones, and a stand-down may replace an unsent assignment', async (t) => {
  const p = planOf(planUpdateWrite(cad, { ...body, resources: ['E2', 'E3'] }, NOW)(current(), match({ e2: [2], e3: [3] })));
  t.match(p.row, { write: 'update', moved: false, incident: { id: 7, resources: ['E2', 'E3'] } });
  t.equal(p.version, 5, 'one past the version read');
  t.same(p.callsignKeys, { add: ['e3'], remove: ['e1'] });
  t.same(p.responses, { cancel: [{ deviceId: 1, callsign: 'E1' }], restart: [3] }, 'E1’s device cancelled, E3’s starts at NONE');
  t.same(p.supersede, [1], 'E1’s stand-down replaces its assignment if that was never sent');
  t.same(p.webhooks, [], 'still open: no incident.closed');
});

t.test('when an update leaves the callsigns as they are, then no callsign key and no response state is written', async (t) => {
  const p = planOf(planUpdateWrite(cad, { ...body, description: 'more smoke', resources: ['E1', 'E2'] }, NOW)(current(), match({ e1: [1], e2: [2] })));
  t.same(p.callsignKeys, { add: [], remove: [] });
  t.same(p.responses, { cancel: [], restart: [] });
  t.same(p.events, []);
});

t.test('when an update moves the incident to a free originId, then the row is written moved; to one another incident holds, it is refused ORIGIN_ID_TAKEN after the body is checked', async (t) => {
  const moved = planOf(planUpdateWrite(cad, { ...body, originId: 'CAD-NEW', resources: ['E1', 'E2'] }, NOW)(current(), match({ e1: [1], e2: [2] })));
  t.match(moved.row, { write: 'update', moved: true, incident: { originId: 'CAD-NEW' } });
  const taken = (reachable: boolean) => planUpdateWrite(cad, { ...body, originId: 'CAD-9', resources: ['E1', 'E2'] }, NOW)(current({ originIdHolder: { id: 9, reachable } }), match());
  t.same(taken(true), { ok: false, refusal: { code: 'ORIGIN_ID_TAKEN', incidentId: 9 } }, 'with the holder’s id for a caller who reaches it');
  t.same(taken(false), { ok: false, refusal: { code: 'ORIGIN_ID_TAKEN', incidentId: null } }, 'without it otherwise');
  t.same(
    planUpdateWrite(cad, { ...body, originId: 'CAD-9', resources: [' '] }, NOW)(current({ originIdHolder: { id: 9, reachable: true } }), match()),
    { ok: false, refusal: { code: 'INVALID_CALLSIGN', error: { code: 'INVALID_CALLSIGN', index: 0, reason: 'empty' } } },
    'a bad body is refused first, as before the move was looked at',
  );
  const own = planOf(planUpdateWrite(cad, { ...body, resources: ['E1', 'E2'] }, NOW)(current({ originIdHolder: { id: 9, reachable: true } }), match({ e1: [1], e2: [2] })));
  t.match(own.row, { moved: false }, 'a holder read for an originId the update keeps refuses nothing');
});

t.test('when an open incident is closed, then the plan sends incident.closed once; closing a closed one or reopening sends none', async (t) => {
  const closing = planOf(planUpdateWrite(cad, { ...body, status: 'CLOSED' }, NOW)(current(), match()));
  t.same(closing.webhooks, [{ type: 'incident.closed', timestamp: NOW, data: { incidentId: 7, originId: 'CAD-7', timeClosed: NOW, deleted: false } }]);
  t.same(closing.callsignKeys, { add: [], remove: ['e1', 'e2'] });
  t.same(closing.responses.cancel.map((c) => c.deviceId), [1, 2]);
  const closed: Incident = { ...incident, status: 'CLOSED', timeClosed: '2026-11-29T03:00:00.000Z', resources: [] };
  const again = planOf(planUpdateWrite(cad, { ...body, status: 'CLOSED' }, NOW)(current({ incident: closed, assignments: [] }), match()));
  t.same(again.webhooks, [], 'already closed');
  const reopened = planOf(planUpdateWrite(cad, { ...body, status: 'OPEN', resources: ['E1'] }, NOW)(current({ incident: closed, assignments: [] }), match({ e1: [1] })));
  t.same(reopened.webhooks, [], 'reopened');
  t.same(reopened.responses, { cancel: [], restart: [1] }, 'the new assignment starts at NONE');
});

t.test('when an incident is deleted, then the plan keeps its version, removes its keys, cancels every assignment, and sends incident.closed (deleted) only if it was open', async (t) => {
  const p = planOf(planDeleteWrite(cad, NOW)(current(), match()));
  t.same(p.row, { write: 'delete', incident });
  t.equal(p.version, 4);
  t.same(p.callsignKeys, { add: [], remove: ['e1', 'e2'] });
  t.same(p.responses, { cancel: [{ deviceId: 1, callsign: 'E1' }, { deviceId: 2, callsign: 'E2' }], restart: [] });
  t.same(p.webhooks, [{ type: 'incident.closed', timestamp: NOW, data: { incidentId: 7, originId: 'CAD-7', timeClosed: NOW, deleted: true } }]);
  t.same(p.supersede, [1, 2]);
  const closed: Incident = { ...incident, status: 'CLOSED', timeClosed: '2026-11-29T03:00:00.000Z', resources: [] };
  t.same(planOf(planDeleteWrite(cad, NOW)(current({ incident: closed, assignments: [] }), match())).webhooks, [], 'a closed incident was closed for the CAD already');
  t.same(planDeleteWrite(cad, NOW)(null, match()), { ok: false, refusal: { code: 'NOT_FOUND' } });
});

t.test('when a plan assigns a device and then stands it down, then both are SUPERSEDED; a stand-down alone is PENDING until the adapter says it replaced a stored unsent assignment', async (t) => {
  const draft = (type: EventDraft['type'], deviceId: number): EventDraft => ({ type, deviceId, online: false, attributes: { callsign: 'E1' } });
  const events = plannedEvents([draft('incidentAssigned', 1), draft('incidentAssigned', 2), draft('incidentDeassigned', 1), draft('incidentDeassigned', 3), draft('incidentAssigned', 1)]);
  t.same(events.map((e) => e.state), ['SUPERSEDED', 'PENDING', 'SUPERSEDED', 'PENDING', 'PENDING'], 'the pair replaced; a later assignment is sent');
  t.same(eventStates(events, new Set([3, 2])), ['SUPERSEDED', 'PENDING', 'SUPERSEDED', 'SUPERSEDED', 'PENDING'], 'device 3’s stand-down replaced a stored one; an assignment is never superseded by what the adapter found');
  t.same(eventStates(events, new Set()), events.map((e) => e.state));
});

t.test('when callsigns change, then their keys are compared as keys: a respelling moves nothing', async (t) => {
  t.same(callsignKeyChanges(['E1', 'e2'], [' e1 ', 'E2', 'E3']), { add: ['e3'], remove: [] });
  t.same(callsignKeyChanges(['E1'], []), { add: [], remove: ['e1'] });
});

t.test('when a plan assigns devices holding wake targets, then each assignment it sends gets the ladder’s steps of its device’s kinds; none without a ladder or targets', async (t) => {
  const ladder = { wake: 5, sms: 60, voice: 0 };
  const ctx: MatchContext = { ...match({ e1: [1], e3: [3] }), wakeKinds: new Map<number, ReadonlySet<WakeKind>>([[1, new Set<WakeKind>(['fcm', 'sms'])], [9, new Set<WakeKind>(['voice'])]]) };
  const p = planOf(planCreateWrite(cad, { ...body, originId: 'CAD-8', resources: ['E1', 'E3'] }, NOW, ladder)(null, ctx));
  t.same(p.wakeSteps, [
    { event: 0, step: 'wake', dueAt: '2026-11-29T04:00:05.000Z', owner: cad.id },
    { event: 0, step: 'sms', dueAt: '2026-11-29T04:01:00.000Z', owner: cad.id },
  ], 'device 1: wake-up and SMS (voice is off); device 3 holds no target; each the writer’s');
  t.same(planOf(planCreateWrite(cad, { ...body, originId: 'CAD-8', resources: ['E1'] }, NOW)(null, ctx)).wakeSteps, [], 'no ladder: no steps');
  t.same(planOf(planCreateWrite(cad, { ...body, originId: 'CAD-8', resources: ['E1'] }, NOW, ladder)(null, match({ e1: [1] }))).wakeSteps, [], 'no targets read: no steps');
  const up = planOf(planUpdateWrite(cad, { ...body, resources: ['E2', 'E1'] }, NOW, null, ladder)(current({ assignments: [assigned[1]!] , incident: { ...incident, resources: ['E2'] } }), ctx));
  t.same(up.wakeSteps.map((s) => [up.events[s.event]!.deviceId, s.step]), [[1, 'wake'], [1, 'sms']], 'an update escalates only what it assigns');
  t.same(planOf(planDeleteWrite(cad, NOW)(current(), ctx)).wakeSteps, [], 'a stand-down is never escalated');
  const pair = plannedEvents([
    { type: 'incidentAssigned', deviceId: 1, online: false, attributes: { callsign: 'E1' } },
    { type: 'incidentDeassigned', deviceId: 1, online: false, attributes: { callsign: 'E1' } },
  ]);
  t.same(wakeStepsOf(pair, ctx, ladder, NOW, cad.id), [], 'an assignment replaced in its own plan is never sent, so never escalated');
});

import t from 'tap';
import {
  isAccepted,
  planCreate,
  planDelete,
  planUpdate,
  type Assignment,
  type Incident,
  type MatchContext,
  type UpdateBody,
} from '../../../src/domain/incident.js';

const NOW = '2026-11-22T12:00:00.000Z';
const EARLIER = '2026-11-22T10:00:00.000Z';

// E1 is carried by devices 1 and 2, A7 by device 3; device 1 and 3 are online.
function ctx(online: number[] = [1, 3]): MatchContext {
  return { matches: new Map([['e1', [2, 1]], ['a7', [3]]]), online: new Set(online) };
}

function stored(overrides: Partial<Incident> = {}): Incident {
  return {
    id: 7, originId: 'CAD-7', type: 'FIRE', timeOfOrigin: EARLIER, timeReceived: EARLIER, timeUpdated: EARLIER, status: 'OPEN',
    timeClosed: null, latitude: 51.5, longitude: -0.1, priority: 3, description: 'kitchen', resources: ['E1', 'A7'], ...overrides,
  };
}
const assigned: Assignment[] = [
  { callsignKey: 'e1', callsign: 'E1', deviceId: 1 },
  { callsignKey: 'e1', callsign: 'E1', deviceId: 2 },
  { callsignKey: 'a7', callsign: 'A7', deviceId: 3 },
];
const body = (o: Partial<UpdateBody> = {}): UpdateBody => ({ originId: 'CAD-7', type: 'FIRE', ...o });

function ok<T>(o: { ok: true; plan: T } | { ok: false; refusal: unknown }): T {
  if (!o.ok) throw new Error(`refused: ${JSON.stringify(o.refusal)}`);
  return o.plan;
}

t.test('create', async (t) => {
  t.test('when created, then OPEN, status/timeClosed/id in the body ignored, omitted fields null', async (t) => {
    const plan = ok(planCreate({ originId: 'X', type: 'F', latitude: 1, longitude: 2, priority: 3, status: 'CLOSED', timeClosed: NOW, id: 5 }, NOW, ctx()));
    t.same(plan.incident, {
      originId: 'X', type: 'F', timeOfOrigin: null, timeReceived: null, timeUpdated: null, status: 'OPEN', timeClosed: null,
      latitude: 1, longitude: 2, priority: 3, description: null, resources: [],
    });
    t.same(plan.events, []);
    t.ok(isAccepted(plan.report));
  });

  t.test('when a callsign matches several devices, then each gets incidentAssigned, in device order', async (t) => {
    const plan = ok(planCreate({ originId: 'X', type: 'F', latitude: 0, longitude: 0, priority: 0, resources: ['E1', 'Z9', 'A7'] }, NOW, ctx()));
    t.same(plan.events.map((e) => [e.type, e.deviceId, e.online, e.attributes]), [
      ['incidentAssigned', 1, true, { callsign: 'E1' }],
      ['incidentAssigned', 2, false, { callsign: 'E1' }],
      ['incidentAssigned', 3, true, { callsign: 'A7' }],
    ]);
    t.same(plan.assignments, assigned);
    t.same(plan.report.deviceStatuses, { E1: 'OFFLINE', Z9: 'NOT_FOUND' }, 'A7 was online: omitted');
    t.notOk(isAccepted(plan.report));
    t.match(plan.report.message, /1 callsign has no device; 1 callsign has offline devices/);
    t.same(plan.incident.resources, ['E1', 'Z9', 'A7']);
  });

  t.test('when every device is online, then the report is empty', async (t) => {
    const plan = ok(planCreate({ originId: 'X', type: 'F', latitude: 0, longitude: 0, priority: 0, resources: ['E1', 'A7'] }, NOW, ctx([1, 2, 3])));
    t.same(plan.report.deviceStatuses, {});
    t.match(plan.report.message, /every device was notified/);
  });

  t.test('when several callsigns are not found or offline, then the message counts them', async (t) => {
    const plan = ok(planCreate({ originId: 'X', type: 'F', latitude: 0, longitude: 0, priority: 0, resources: ['Q1', 'Q2', 'E1', 'A7'] }, NOW, ctx([])));
    t.match(plan.report.message, /2 callsigns have no device; 2 callsigns have offline devices/);
  });

  t.test('when a callsign is invalid, then refused', async (t) => {
    const r = planCreate({ originId: 'X', type: 'F', latitude: 0, longitude: 0, priority: 0, resources: [' '] }, NOW, ctx());
    t.same(r, { ok: false, refusal: { code: 'INVALID_CALLSIGN', error: { code: 'INVALID_CALLSIGN', index: 0, reason: 'empty' } } });
  });
});

t.test('update: the full-replacement merge', async (t) => {
  t.test('when fields are omitted, then description/timeOfOrigin/timeReceived/status are kept and the rest emptied', async (t) => {
    const plan = ok(planUpdate(stored(), assigned, body({ resources: ['E1', 'A7'] }), NOW, ctx()));
    t.same(plan.incident, {
      id: 7, originId: 'CAD-7', type: 'FIRE', timeOfOrigin: EARLIER, timeReceived: EARLIER, timeUpdated: null, status: 'OPEN',
      timeClosed: null, latitude: 0, longitude: 0, priority: 0, description: 'kitchen', resources: ['E1', 'A7'],
    });
    t.same(plan.events, [], 'unchanged callsigns get nothing');
    t.same(plan.assignments, assigned);
  });

  t.test('when fields are sent, then they overwrite', async (t) => {
    const plan = ok(planUpdate(stored(), assigned, body({
      type: 'FLOOD', latitude: 1, longitude: 2, priority: 9, description: 'cellar', timeOfOrigin: NOW, timeReceived: NOW, timeUpdated: NOW, resources: ['E1', 'A7'], id: 99, timeClosed: NOW,
    }), NOW, ctx()));
    t.match(plan.incident, { id: 7, type: 'FLOOD', latitude: 1, longitude: 2, priority: 9, description: 'cellar', timeOfOrigin: NOW, timeReceived: NOW, timeUpdated: NOW, timeClosed: null });
  });

  t.test('when null is sent, then it is the same as omitted', async (t) => {
    const plan = ok(planUpdate(stored(), assigned, body({ description: null, timeOfOrigin: null, latitude: null, priority: null, status: null, resources: null }), NOW, ctx()));
    t.equal(plan.incident.description, 'kitchen');
    t.equal(plan.incident.timeOfOrigin, EARLIER);
    t.equal(plan.incident.latitude, 0);
    t.equal(plan.incident.priority, 0);
    t.equal(plan.incident.status, 'OPEN');
    t.same(plan.incident.resources, []);
  });

  t.test('when resources are omitted, then every callsign is stood down', async (t) => {
    const plan = ok(planUpdate(stored(), assigned, body(), NOW, ctx()));
    t.same(plan.events.map((e) => [e.type, e.deviceId, e.attributes]), [
      ['incidentDeassigned', 1, { callsign: 'E1' }],
      ['incidentDeassigned', 2, { callsign: 'E1' }],
      ['incidentDeassigned', 3, { callsign: 'A7' }],
    ]);
    t.same(plan.assignments, []);
    t.same(plan.report.deviceStatuses, { E1: 'OFFLINE' });
  });

  t.test('when callsigns are added and removed, then stand-downs go to the recorded devices and additions are matched', async (t) => {
    // the caller's fresh match for E1 would now be device 9: the stand-down still goes to 1 and 2
    const c: MatchContext = { matches: new Map([['e1', [9]], ['a7', [3]], ['b2', [4]]]), online: new Set([3, 4]) };
    const plan = ok(planUpdate(stored(), assigned, body({ resources: ['a7', 'B2'] }), NOW, c));
    t.same(plan.events.map((e) => [e.type, e.deviceId, e.attributes.callsign]), [
      ['incidentDeassigned', 1, 'E1'],
      ['incidentDeassigned', 2, 'E1'],
      ['incidentAssigned', 4, 'B2'],
    ]);
    t.same(plan.assignments, [assigned[2], { callsignKey: 'b2', callsign: 'B2', deviceId: 4 }]);
    t.same(plan.report.deviceStatuses, { E1: 'OFFLINE' });
    t.same(plan.incident.resources, ['a7', 'B2'], 'the latest spelling is kept');
  });

  t.test('when a removed callsign never matched a device, then it reports NOT_FOUND', async (t) => {
    const plan = ok(planUpdate(stored({ resources: ['E1', 'Q1'] }), assigned.slice(0, 2), body({ resources: ['E1'] }), NOW, ctx()));
    t.same(plan.report.deviceStatuses, { Q1: 'NOT_FOUND' });
    t.same(plan.events, []);
  });
});

t.test('update: the transition table', async (t) => {
  t.test('OPEN + status omitted: stays OPEN', async (t) => {
    t.equal(ok(planUpdate(stored(), assigned, body({ resources: ['E1', 'A7'] }), NOW, ctx())).incident.status, 'OPEN');
  });

  t.test('OPEN + CLOSED: timeClosed stamped, resources emptied, one CLOSED stand-down per assigned device', async (t) => {
    const extra: Assignment = { callsignKey: 'old', callsign: 'OLD', deviceId: 1 }; // device 1 also holds a stale assignment
    const plan = ok(planUpdate(stored(), [...assigned, extra], body({ status: 'CLOSED' }), NOW, ctx()));
    t.equal(plan.incident.status, 'CLOSED');
    t.equal(plan.incident.timeClosed, NOW);
    t.same(plan.incident.resources, []);
    t.same(plan.assignments, []);
    t.same(plan.events.map((e) => [e.type, e.deviceId, e.attributes]), [
      ['incidentDeassigned', 1, { callsign: 'E1', incidentStatus: 'CLOSED' }],
      ['incidentDeassigned', 2, { callsign: 'E1', incidentStatus: 'CLOSED' }],
      ['incidentDeassigned', 3, { callsign: 'A7', incidentStatus: 'CLOSED' }],
    ], 'device 1 gets exactly one, however many assignments it holds');
  });

  t.test('OPEN + CLOSED with resources: 409, being closed', async (t) => {
    t.same(planUpdate(stored(), assigned, body({ status: 'CLOSED', resources: ['E1'] }), NOW, ctx()), {
      ok: false, refusal: { code: 'INCIDENT_CLOSED', beingClosed: true },
    });
  });

  t.test('CLOSED + OPEN: reopened, timeClosed cleared, callsigns assigned as new', async (t) => {
    const closed = stored({ status: 'CLOSED', timeClosed: EARLIER, resources: [] });
    const plan = ok(planUpdate(closed, [], body({ status: 'OPEN', resources: ['E1'] }), NOW, ctx()));
    t.equal(plan.incident.status, 'OPEN');
    t.equal(plan.incident.timeClosed, null);
    t.same(plan.events.map((e) => [e.type, e.deviceId]), [['incidentAssigned', 1], ['incidentAssigned', 2]]);
  });

  t.test('CLOSED + status omitted or CLOSED, resources empty or omitted: stays CLOSED, no events, timeClosed kept', async (t) => {
    const closed = stored({ status: 'CLOSED', timeClosed: EARLIER, resources: [] });
    for (const b of [body(), body({ status: 'CLOSED' }), body({ resources: [] })]) {
      const plan = ok(planUpdate(closed, [], b, NOW, ctx()));
      t.equal(plan.incident.status, 'CLOSED');
      t.equal(plan.incident.timeClosed, EARLIER);
      t.same(plan.events, []);
      t.ok(isAccepted(plan.report));
    }
  });

  t.test('CLOSED + non-empty resources, status omitted or CLOSED: 409, nothing assigned', async (t) => {
    const closed = stored({ status: 'CLOSED', timeClosed: EARLIER, resources: [] });
    for (const b of [body({ resources: ['E1'] }), body({ status: 'CLOSED', resources: ['E1'] })]) {
      t.same(planUpdate(closed, [], b, NOW, ctx()), { ok: false, refusal: { code: 'INCIDENT_CLOSED', beingClosed: false } });
    }
  });

  t.test('a closed incident stored without timeClosed gets one when it stays closed', async (t) => {
    const closed = stored({ status: 'CLOSED', timeClosed: null, resources: [] });
    t.equal(ok(planUpdate(closed, [], body(), NOW, ctx())).incident.timeClosed, NOW);
  });

  t.test('an invalid callsign is refused before the 409 rule', async (t) => {
    const closed = stored({ status: 'CLOSED', timeClosed: EARLIER, resources: [] });
    const r = planUpdate(closed, [], body({ resources: [''] }), NOW, ctx());
    t.equal(r.ok ? 'ok' : r.refusal.code, 'INVALID_CALLSIGN');
  });
});

t.test('delete', async (t) => {
  t.test('when deleted, then every assigned device gets one CLOSED + deleted stand-down', async (t) => {
    const plan = planDelete(stored({ resources: ['E1', 'A7', 'Q1'] }), assigned, { online: new Set([1, 2, 3]) });
    t.same(plan.events.map((e) => [e.deviceId, e.attributes]), [
      [1, { callsign: 'E1', incidentStatus: 'CLOSED', incidentDeleted: true }],
      [2, { callsign: 'E1', incidentStatus: 'CLOSED', incidentDeleted: true }],
      [3, { callsign: 'A7', incidentStatus: 'CLOSED', incidentDeleted: true }],
    ]);
    t.same(plan.assignments, []);
    t.same(plan.report.deviceStatuses, { Q1: 'NOT_FOUND' });
  });

  t.test('when a closed incident is deleted, then nobody is notified', async (t) => {
    t.same(planDelete(stored({ status: 'CLOSED', resources: [] }), [], { online: new Set() }).events, []);
  });
});

import t from 'tap';
import {
  assignmentChanges,
  assignmentOf,
  cancelledState,
  decideResponse,
  listResponders,
  recordedTime,
  responseFrame,
  type AssignmentState,
  type ResponseContext,
  type ResponseStatus,
} from '../../../src/domain/response.js';

const ID = '0b7f2c1e-7d7a-4c55-9a0e-1f2d3c4b5a69';
const NOW = '2026-11-26T10:00:00.000Z';
const assigned = { callsign: 'E1' };

function ctx(over: Partial<ResponseContext> = {}): ResponseContext {
  return { earlier: null, assigned, state: null, now: NOW, ...over };
}
function at(status: AssignmentState['status'], time = '2026-11-26T09:00:00.000Z'): AssignmentState {
  return status === 'NONE' ? { status, times: {} } : { status, times: { [status]: time } };
}
const answer = (status: ResponseStatus, time?: string) => ({ responseId: ID, incidentId: 7, status, ...(time ? { time } : {}) });

t.test('when a device assigned to the incident answers a status ahead of its own, then the assignment moves there', async (t) => {
  const forward: [AssignmentState['status'], ResponseStatus][] = [
    ['NONE', 'ACKNOWLEDGED'],
    ['ACKNOWLEDGED', 'RESPONDING'],
    ['ACKNOWLEDGED', 'NOT_AVAILABLE'],
    ['NOT_AVAILABLE', 'RESPONDING'],
    ['RESPONDING', 'ON_SCENE'],
    ['ON_SCENE', 'CLEARED'],
    // steps may be skipped
    ['NONE', 'RESPONDING'],
    ['NONE', 'CLEARED'],
    ['NOT_AVAILABLE', 'ON_SCENE'],
  ];
  for (const [from, to] of forward) {
    const d = decideResponse(answer(to), ctx({ state: at(from) }));
    t.equal(d.write, 'advance', `${from} → ${to}`);
    if (d.write !== 'advance') continue;
    t.same(d.result, { responseId: ID, accepted: true });
    t.equal(d.state.status, to);
    t.equal(d.state.times[to], NOW, 'no time given: the time of receipt');
    t.equal(d.callsign, 'E1');
    if (from !== 'NONE') t.equal(d.state.times[from], '2026-11-26T09:00:00.000Z', 'the earlier status keeps its time');
  }
  t.equal(decideResponse(answer('ACKNOWLEDGED'), ctx({ state: null })).write, 'advance', 'no stored state is NONE');
});

t.test('when an answer is behind or at the current status, then it is accepted and records nothing new (a late RESPONDING after ON_SCENE)', async (t) => {
  const behind: [AssignmentState['status'], ResponseStatus][] = [
    ['ON_SCENE', 'RESPONDING'],
    ['ON_SCENE', 'ACKNOWLEDGED'],
    ['CLEARED', 'ON_SCENE'],
    ['RESPONDING', 'NOT_AVAILABLE'],
    ['RESPONDING', 'RESPONDING'],
    ['ACKNOWLEDGED', 'ACKNOWLEDGED'],
  ];
  for (const [from, to] of behind) {
    const d = decideResponse(answer(to, '2026-11-26T09:59:00Z'), ctx({ state: at(from) }));
    t.same(d, { write: 'record', result: { responseId: ID, accepted: true }, repeat: false }, `${from} ← ${to}: a no-op even with a newer time`);
  }
});

t.test('when the device is not assigned, then the answer is refused not-assigned; when stood down, cancelled', async (t) => {
  t.same(decideResponse(answer('RESPONDING'), ctx({ assigned: null })), { write: 'nothing', result: { responseId: ID, accepted: false, reason: 'not-assigned' }, repeat: false }, 'a refusal is not stored (issue 36)');
  t.same(decideResponse(answer('RESPONDING'), ctx({ assigned: null, state: at('ON_SCENE') })).result, {
    responseId: ID,
    accepted: false,
    reason: 'not-assigned',
  }, 'a state left by a device no longer assigned, not cancelled: not-assigned');
  const cancelled = cancelledState(at('RESPONDING'), NOW);
  const d = decideResponse(answer('ON_SCENE'), ctx({ assigned: null, state: cancelled }));
  t.same(d, { write: 'nothing', result: { responseId: ID, accepted: false, reason: 'cancelled' }, repeat: false }, 'nor is this one');
  t.same(decideResponse(answer('CLEARED'), ctx({ state: cancelled })).result, { responseId: ID, accepted: false, reason: 'cancelled' }, 'CANCELLED refuses even while assigned');
});

t.test('when a responseId comes again, then the first result is returned and nothing is written', async (t) => {
  const first = { responseId: ID, accepted: false, reason: 'cancelled' as const };
  t.same(decideResponse(answer('ON_SCENE'), ctx({ earlier: first, state: at('NONE') })), { write: 'nothing', result: first, repeat: true });
  const accepted = { responseId: ID, accepted: true };
  t.same(decideResponse(answer('CLEARED'), ctx({ earlier: accepted, assigned: null })), { write: 'nothing', result: accepted, repeat: true }, 'whatever the state says now');
});

t.test('when an answer carries a time, then it is recorded within [the current status time, now]', async (t) => {
  const d1 = decideResponse(answer('RESPONDING', '2026-11-26T10:30:00+01:00'), ctx({ state: at('ACKNOWLEDGED', '2026-11-26T09:00:00.000Z') }));
  t.equal(d1.write === 'advance' && d1.at, '2026-11-26T09:30:00.000Z', 'the device time, in UTC');
  const late = decideResponse(answer('ON_SCENE', '2026-11-26T08:00:00Z'), ctx({ state: at('RESPONDING', '2026-11-26T09:00:00.000Z') }));
  t.equal(late.write, 'advance', 'an out-of-order time does not stop a forward answer');
  t.equal(late.write === 'advance' && late.at, '2026-11-26T09:00:00.000Z', 'its time is raised to the status it follows');
  const ahead = decideResponse(answer('ACKNOWLEDGED', '2026-11-26T11:00:00Z'), ctx());
  t.equal(ahead.write === 'advance' && ahead.at, NOW, 'a clock ahead is brought back to now');
  t.equal(recordedTime(undefined, NOW, undefined), NOW);
  t.equal(recordedTime('2026-11-26T09:00:00Z', NOW, undefined), '2026-11-26T09:00:00.000Z');
  t.equal(recordedTime('10000-01-01T00:00:00Z', NOW, undefined), NOW, 'an unrepresentable time is the time of receipt');
});

t.test('when an incident change moves its assignments, then devices gone are cancelled and new ones started', async (t) => {
  const a = (callsign: string, deviceId: number) => ({ callsignKey: callsign.toLowerCase(), callsign, deviceId });
  t.same(assignmentChanges([a('E1', 1), a('E1', 2), a('L2', 3)], [a('E1', 1), a('K9', 4)]), {
    cancelled: [
      { deviceId: 2, callsign: 'E1' },
      { deviceId: 3, callsign: 'L2' },
    ],
    started: [4],
  });
  t.same(assignmentChanges([a('E1', 1), a('L2', 1)], [a('L2', 1)]), { cancelled: [], started: [] }, 'a device still assigned under another callsign keeps its state');
  t.same(assignmentChanges([a('E1', 1)], []), { cancelled: [{ deviceId: 1, callsign: 'E1' }], started: [] }, 'closure or deletion: all');
  t.same(assignmentOf([a('E1', 1), a('L2', 1)], 1), { callsign: 'E1' }, 'the first callsign the device was assigned under');
  t.equal(assignmentOf([a('E1', 1)], 2), null);
  t.same(cancelledState(null, NOW), { status: 'CANCELLED', times: { CANCELLED: NOW } });
});

t.test('when a socket frame is read, then only a response as asyncapi.yaml specifies it is one', async (t) => {
  const ok = { type: 'response', responseId: ID.toUpperCase(), incidentId: 7, status: 'RESPONDING' };
  t.same(responseFrame(ok), { responseId: ID, incidentId: 7, status: 'RESPONDING' }, 'the responseId in lower case');
  t.same(responseFrame({ ...ok, time: '2026-11-26T09:00:00+01:00' })?.time, '2026-11-26T09:00:00+01:00');
  const bad: unknown[] = [
    null,
    'response',
    [ok],
    { ...ok, type: 'ack' },
    { ...ok, extra: 1 },
    { ...ok, responseId: 'not-a-uuid' },
    { ...ok, responseId: 5 },
    { ...ok, incidentId: 0 },
    { ...ok, incidentId: 1.5 },
    { ...ok, incidentId: '7' },
    { ...ok, status: 'CANCELLED' },
    { ...ok, status: 3 },
    { ...ok, time: 'yesterday' },
    { ...ok, time: 5 },
    { ...ok, time: '10000-01-01T00:00:00Z' },
  ];
  for (const b of bad) t.equal(responseFrame(b), null, JSON.stringify(b));
});

t.test('when responders are listed, then the assignments come in order, then the devices stood down, each with its delivery and state', async (t) => {
  const a = (callsign: string, deviceId: number) => ({ callsignKey: callsign.toLowerCase(), callsign, deviceId });
  const delivered = { eventType: 'incidentAssigned' as const, state: 'DELIVERED' as const, attempts: 1, sentAt: NOW, deliveredAt: NOW };
  const states = new Map([
    [2, { callsign: 'E1', status: 'RESPONDING' as const, times: { RESPONDING: NOW } }],
    [9, { callsign: 'L2', status: 'CANCELLED' as const, times: { CANCELLED: NOW } }],
    [7, { callsign: 'K1', status: 'CANCELLED' as const, times: { CANCELLED: NOW } }],
  ]);
  const list = listResponders([a('E1', 2), a('E1', 1), a('A7', 2)], states, new Map([[2, delivered]]));
  t.same(
    list.map((r) => [r.callsign, r.deviceId, r.response.status, r.delivery.state]),
    [
      ['E1', 2, 'RESPONDING', 'DELIVERED'],
      ['E1', 1, 'NONE', null],
      ['A7', 2, 'RESPONDING', 'DELIVERED'],
      ['K1', 7, 'CANCELLED', null],
      ['L2', 9, 'CANCELLED', null],
    ],
  );
  t.same(list[1]!.response, { status: 'NONE', times: {} });
  t.same(list[1]!.delivery, { eventType: null, state: null, attempts: 0, sentAt: null, deliveredAt: null });
  t.same(listResponders([], new Map(), new Map()), []);
});

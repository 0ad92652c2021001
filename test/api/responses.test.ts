// Responders answer (DESIGN section 10) through HTTP: POST /incidents/{id}/responses with a
// device token, the incidentResponse events, GET /incidents/{id}/responders. Runs on both
// adapters (TEST_ADAPTER=postgres); every answer is checked against openapi.yaml by makeApp.
import t, { type Test } from 'tap';
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import type { Db } from '../../src/adapters/sqlite/db.js';
import { ADAPTER, adminAuth, bearer, json, makeApp, mintToken } from '../fixtures/app.js';
import { events, incidentBody, send, world, type World } from '../fixtures/incidents.js';

async function deviceToken(app: FastifyInstance, deviceId: number): Promise<string> {
  const res = await app.inject({ method: 'POST', url: `/api/devices/${deviceId}/token`, headers: { authorization: adminAuth() } });
  if (res.statusCode !== 200) throw new Error(`device token ${res.statusCode}: ${res.body}`);
  return res.body;
}

async function answer(app: FastifyInstance, token: string, incidentId: number, status: string, extra: Record<string, unknown> = {}) {
  const res = await app.inject({
    method: 'POST',
    url: `/api/incidents/${incidentId}/responses`,
    headers: { authorization: bearer(token) },
    payload: { responseId: randomUUID(), status, ...extra },
  });
  return { status: res.statusCode, body: json(res) };
}

interface Setup {
  app: FastifyInstance;
  db: Db;
  pgUrl?: string | undefined;
  w: World;
  incidentId: number;
  tokens: { e1a: string; e1b: string; a7: string; otherE1: string };
}

/** the world of fixtures/incidents.ts, an incident of cad's with E1 (two devices), and device tokens */
async function setup(t: Test): Promise<Setup> {
  const { app, db, pgUrl } = await makeApp(t);
  const w = await world(app);
  const created = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['E1'] }));
  const incidentId = (created.body.incident ?? created.body).id as number;
  const tokens = { e1a: await deviceToken(app, w.e1a), e1b: await deviceToken(app, w.e1b), a7: await deviceToken(app, w.a7), otherE1: await deviceToken(app, w.otherE1) };
  return { app, db, pgUrl, w, incidentId, tokens };
}

/** counts the stored answers (the responses table), on the adapter the app runs on */
async function responseRows(t: Test, s: Setup): Promise<() => Promise<number>> {
  if (ADAPTER === 'sqlite') return async () => s.db.$client.prepare('SELECT count(*) FROM responses').pluck().get() as number;
  const client = new pg.Client({ connectionString: s.pgUrl });
  await client.connect();
  t.teardown(() => client.end());
  return async () => Number((await client.query<{ n: string }>('SELECT count(*) AS n FROM responses')).rows[0]!.n);
}

const responders = (s: Setup, auth = s.w.cad) => send(s.app, auth, 'GET', `/api/incidents/${s.incidentId}/responders`);
const responseEvents = async (s: Setup) => (await events(s.app, `?incidentId=${s.incidentId}&type=incidentResponse`)).map((e) => [e.deviceId, e.attributes.status]);

t.test('when an assigned device answers, then it is accepted, listed as an event and on the responders', async (t) => {
  const s = await setup(t);
  const responseId = randomUUID();
  const res = await answer(s.app, s.tokens.e1a, s.incidentId, 'RESPONDING', { responseId, time: '2026-11-22T12:00:00+01:00' });
  t.equal(res.status, 200);
  t.same(res.body, { responseId, accepted: true });
  const evs = await events(s.app, `?incidentId=${s.incidentId}&type=incidentResponse`);
  t.equal(evs.length, 1);
  t.match(evs[0], { type: 'incidentResponse', deviceId: s.w.e1a, incidentId: s.incidentId, attributes: { callsign: 'E1', status: 'RESPONDING', responseId }, state: 'DELIVERED' });
  const list = await responders(s);
  t.equal(list.status, 200);
  t.same(
    list.body.map((r: any) => [r.callsign, r.deviceId, r.response.status, r.delivery.eventType, r.delivery.state]),
    [
      ['E1', s.w.e1a, 'RESPONDING', 'incidentAssigned', 'PENDING'],
      ['E1', s.w.e1b, 'NONE', 'incidentAssigned', 'PENDING'],
    ],
  );
  t.same(list.body[0].response.times, { RESPONDING: '2026-11-22T11:00:00.000Z' }, 'the device time, in UTC');
  t.same(list.body[1].response.times, {});
  const all = await events(s.app, `?deviceId=${s.w.e1a}`);
  t.same(all.map((e) => e.type), ['incidentAssigned', 'incidentResponse'], 'one device\'s events in id order, the answer after the push');
});

t.test('when a device is not assigned to the incident (or it does not exist), then accepted:false not-assigned and nothing is written', async (t) => {
  const s = await setup(t);
  t.same((await answer(s.app, s.tokens.a7, s.incidentId, 'RESPONDING')).body.reason, 'not-assigned', 'A7 is not on the incident');
  t.same((await answer(s.app, s.tokens.otherE1, s.incidentId, 'RESPONDING')).body.reason, 'not-assigned', "another user's E1 was never matched");
  const none = await answer(s.app, s.tokens.e1a, 999_999, 'RESPONDING');
  t.same([none.status, none.body.accepted, none.body.reason], [200, false, 'not-assigned'], 'an incident that does not exist');
  t.same(await responseEvents(s), []);
});

t.test('when a device answers an incident it is not assigned to, or one stood down, then nothing is stored: no row, and the same responseId is decided again (issue 36)', async (t) => {
  const s = await setup(t);
  const rows = await responseRows(t, s);
  const before = await rows();
  const refused = randomUUID();
  for (let i = 0; i < 20; i++) t.equal((await answer(s.app, s.tokens.a7, s.incidentId, 'RESPONDING')).body.reason, 'not-assigned');
  t.equal((await answer(s.app, s.tokens.a7, s.incidentId, 'RESPONDING', { responseId: refused })).body.reason, 'not-assigned');
  t.equal((await answer(s.app, s.tokens.a7, s.incidentId, 'RESPONDING', { responseId: refused })).body.reason, 'not-assigned', 'the same responseId again: decided again, the same answer');
  t.equal((await answer(s.app, s.tokens.a7, 999_999, 'RESPONDING')).body.reason, 'not-assigned');
  t.equal(await rows(), before, 'no row for 23 refused answers');
  const accepted = randomUUID();
  t.equal((await answer(s.app, s.tokens.e1a, s.incidentId, 'RESPONDING', { responseId: accepted })).body.accepted, true);
  t.equal(await rows(), before + 1, 'an accepted answer is stored (its responseId replays its result)');
  await send(s.app, s.w.cad, 'PUT', `/api/incidents/${s.incidentId}`, incidentBody({ resources: [] }));
  t.equal((await answer(s.app, s.tokens.e1a, s.incidentId, 'ON_SCENE')).body.reason, 'cancelled');
  t.same((await answer(s.app, s.tokens.e1a, s.incidentId, 'ON_SCENE', { responseId: accepted })).body, { responseId: accepted, accepted: true }, 'the accepted one replays its first result, after the stand-down too');
  t.equal(await rows(), before + 1, 'a cancelled refusal stores nothing either');
});

t.test('when a user credential or none is sent, then 401 (a user never answers as a device), before the body is read', async (t) => {
  const s = await setup(t);
  const url = `/api/incidents/${s.incidentId}/responses`;
  const body = { responseId: randomUUID(), status: 'RESPONDING' };
  const userToken = await mintToken(s.app, s.w.cad);
  for (const authorization of [s.w.cad, bearer(userToken), adminAuth(), bearer('not-a-token')]) {
    const res = await s.app.inject({ method: 'POST', url, headers: { authorization }, payload: body });
    t.equal(res.statusCode, 401, authorization.slice(0, 12));
    t.equal(res.headers['content-type'], 'application/problem+json; charset=utf-8');
  }
  t.equal((await s.app.inject({ method: 'POST', url, payload: { nonsense: true } })).statusCode, 401, 'no credential: 401, not 400');
  const bad = await s.app.inject({ method: 'POST', url, headers: { authorization: bearer(s.tokens.e1a) }, payload: { responseId: 'x', status: 'CANCELLED' } });
  t.equal(bad.statusCode, 400, 'a device with a bad body: 400');
  await send(s.app, adminAuth(), 'PUT', `/api/devices/${s.w.e1b}`, { name: 'e1 ', uniqueId: 'e1-tablet-b', disabled: true });
  t.equal((await answer(s.app, s.tokens.e1b, s.incidentId, 'RESPONDING')).status, 401, 'a disabled device: 401');
  t.same(await responseEvents(s), []);
});

t.test('when the same responseId comes again, then the first result is answered and nothing is recorded', async (t) => {
  const s = await setup(t);
  const responseId = randomUUID();
  const first = await answer(s.app, s.tokens.e1a, s.incidentId, 'ACKNOWLEDGED', { responseId });
  t.same(first.body, { responseId, accepted: true });
  const again = await answer(s.app, s.tokens.e1a, s.incidentId, 'ON_SCENE', { responseId: responseId.toUpperCase() });
  t.same(again.body, { responseId, accepted: true }, 'the first result, whatever the repeat says (the id in any case)');
  t.same(await responseEvents(s), [[s.w.e1a, 'ACKNOWLEDGED']]);
  t.equal((await responders(s)).body[0].response.status, 'ACKNOWLEDGED');
  const refused = randomUUID();
  t.same((await answer(s.app, s.tokens.a7, s.incidentId, 'RESPONDING', { responseId: refused })).body.reason, 'not-assigned');
  await send(s.app, s.w.cad, 'PUT', `/api/incidents/${s.incidentId}`, incidentBody({ resources: ['E1', 'A7'] }));
  t.same((await answer(s.app, s.tokens.a7, s.incidentId, 'RESPONDING', { responseId: refused })).body, { responseId: refused, accepted: true }, 'a refusal is not stored: once assigned, the same responseId is decided again (issue 36)');
  const other = await answer(s.app, s.tokens.e1b, s.incidentId, 'RESPONDING', { responseId });
  t.same(other.body, { responseId, accepted: true }, 'responseIds are per device: another device may use the same one');
  t.same(await responseEvents(s), [[s.w.e1a, 'ACKNOWLEDGED'], [s.w.a7, 'RESPONDING'], [s.w.e1b, 'RESPONDING']]);
});

t.test('when an answer is behind the current status, then it is accepted and records nothing (a late RESPONDING after ON_SCENE)', async (t) => {
  const s = await setup(t);
  t.equal((await answer(s.app, s.tokens.e1a, s.incidentId, 'ON_SCENE')).body.accepted, true);
  t.same((await answer(s.app, s.tokens.e1a, s.incidentId, 'RESPONDING')).body.accepted, true);
  t.same((await answer(s.app, s.tokens.e1a, s.incidentId, 'ON_SCENE')).body.accepted, true, 'the same status again');
  t.same(await responseEvents(s), [[s.w.e1a, 'ON_SCENE']]);
  t.equal((await answer(s.app, s.tokens.e1a, s.incidentId, 'CLEARED')).body.accepted, true);
  const list = (await responders(s)).body;
  t.same(Object.keys(list[0].response.times).sort(), ['CLEARED', 'ON_SCENE']);
  t.equal(list[0].response.status, 'CLEARED');
});

t.test('when an assignment is stood down, then it is CANCELLED and answers are refused cancelled; assigned again, it starts over', async (t) => {
  const s = await setup(t);
  await answer(s.app, s.tokens.e1a, s.incidentId, 'RESPONDING');
  const removed = await send(s.app, s.w.cad, 'PUT', `/api/incidents/${s.incidentId}`, incidentBody({ resources: ['A7'] }));
  t.ok([200, 202].includes(removed.status));
  const list = (await responders(s)).body;
  t.same(
    list.map((r: any) => [r.callsign, r.deviceId, r.response.status, r.delivery.eventType]),
    [
      ['A7', s.w.a7, 'NONE', 'incidentAssigned'],
      ['E1', s.w.e1a, 'CANCELLED', 'incidentDeassigned'],
      ['E1', s.w.e1b, 'CANCELLED', 'incidentDeassigned'],
    ],
    'the stood-down devices stay listed, after those assigned',
  );
  t.same(Object.keys(list[1].response.times).sort(), ['CANCELLED', 'RESPONDING'], 'what it reached is kept');
  t.same((await answer(s.app, s.tokens.e1a, s.incidentId, 'ON_SCENE')).body.reason, 'cancelled');
  t.same((await answer(s.app, s.tokens.e1b, s.incidentId, 'ACKNOWLEDGED')).body.reason, 'cancelled', 'one that never answered too');
  await send(s.app, s.w.cad, 'PUT', `/api/incidents/${s.incidentId}`, incidentBody({ resources: ['A7', 'E1'] }));
  t.same((await responders(s)).body.find((r: any) => r.deviceId === s.w.e1a).response, { status: 'NONE', times: {} }, 'a new assignment starts at NONE');
  t.equal((await answer(s.app, s.tokens.e1a, s.incidentId, 'ACKNOWLEDGED')).body.accepted, true);
  const closed = await send(s.app, s.w.cad, 'PUT', `/api/incidents/${s.incidentId}`, incidentBody({ status: 'CLOSED', resources: [] }));
  t.ok([200, 202].includes(closed.status));
  t.same((await answer(s.app, s.tokens.a7, s.incidentId, 'RESPONDING')).body.reason, 'cancelled', 'closing cancels');
  t.same((await responders(s)).body.map((r: any) => r.response.status), ['CANCELLED', 'CANCELLED', 'CANCELLED']);
  t.same(await responseEvents(s), [[s.w.e1a, 'RESPONDING'], [s.w.e1a, 'ACKNOWLEDGED']]);
});

t.test('when an incident is deleted, then its answers are refused cancelled and its events stay', async (t) => {
  const s = await setup(t);
  await answer(s.app, s.tokens.e1a, s.incidentId, 'ACKNOWLEDGED');
  t.equal((await send(s.app, s.w.cad, 'DELETE', `/api/incidents/${s.incidentId}`)).status, 204);
  t.same((await answer(s.app, s.tokens.e1a, s.incidentId, 'RESPONDING')).body.reason, 'cancelled');
  t.equal((await responders(s)).status, 404);
  t.same(await responseEvents(s), [[s.w.e1a, 'ACKNOWLEDGED']]);
});

t.test('when a user cannot see the incident, then its responders are 404, as when it does not exist, and its events stay hidden', async (t) => {
  const s = await setup(t);
  await answer(s.app, s.tokens.e1a, s.incidentId, 'RESPONDING');
  const other = await responders(s, s.w.other);
  t.equal(other.status, 404);
  t.equal((await send(s.app, s.w.cad, 'GET', '/api/incidents/999999/responders')).status, 404);
  t.same(await events(s.app, '?type=incidentResponse', s.w.other), [], 'the other user reaches none of the devices');
  t.equal((await events(s.app, '?type=incidentResponse', s.w.cad)).length, 1);
  t.equal((await responders(s, adminAuth())).status, 200, 'an administrator sees every incident');
});

// The incident interface through HTTP: status codes, bodies, stored state, events written.
import t from 'tap';
import { adminAuth, createUser, basic, makeApp, sqliteOnly } from '../fixtures/app.js';
import { events, incidentBody, send, world } from '../fixtures/incidents.js';

t.test('create', async (t) => {
  t.test('when callsigns match offline devices or none, then 202 with the report and one event per device', async (t) => {
    const { app } = await makeApp(t);
    const w = await world(app);
    const res = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['E1', 'Z9', 'A7'], status: 'CLOSED', timeClosed: '2026-01-01T00:00:00Z', id: 99 }));
    t.equal(res.status, 202);
    t.same(res.body.details.deviceStatuses, { E1: 'OFFLINE', Z9: 'NOT_FOUND', A7: 'OFFLINE' });
    t.match(res.body.message, /offline/);
    const inc = res.body.incident;
    t.equal(inc.status, 'OPEN', 'status in the body is ignored');
    t.equal(inc.timeClosed, null, 'timeClosed in the body is ignored');
    t.not(inc.id, 99, 'id in the body is ignored');
    t.same(inc.resources, ['E1', 'Z9', 'A7'], 'callsigns with no device stay on the incident');
    const evs = await events(app, `?incidentId=${inc.id}`);
    t.same(
      evs.map((e) => [e.type, e.deviceId, e.attributes.callsign, e.state]),
      [
        ['incidentAssigned', w.e1a, 'E1', 'PENDING'],
        ['incidentAssigned', w.e1b, 'E1', 'PENDING'],
        ['incidentAssigned', w.a7, 'A7', 'PENDING'],
      ],
      'each device of a multi-device callsign is notified; the other user\'s E1 is not',
    );
    const stored = await send(app, w.cad, 'GET', `/api/incidents/${inc.id}`);
    t.same(stored.body, inc, 'GET returns what was stored');
  });

  t.test('when no callsigns are sent, then 200 with the plain incident', async (t) => {
    const { app } = await makeApp(t);
    const w = await world(app);
    const res = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ description: 'x'.repeat(255), timeOfOrigin: '2026-11-22T14:03:00+01:00' }));
    t.equal(res.status, 200);
    t.equal(res.body.originId, 'CAD-1');
    t.equal(res.body.timeOfOrigin, '2026-11-22T13:03:00.000Z', 'date-times come back in UTC with milliseconds');
    t.equal(res.body.timeReceived, null);
    t.same(res.body.resources, []);
  });

  t.test('when a disabled device carries the callsign, then it is NOT_FOUND and gets nothing', async (t) => {
    const { app } = await makeApp(t);
    const w = await world(app);
    const res = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['L9'] }));
    t.equal(res.status, 202);
    t.same(res.body.details.deviceStatuses, { L9: 'NOT_FOUND' });
    t.same(await events(app), []);
  });

  t.test('when callsigns repeat with other spelling, then they collapse to the first spelling', async (t) => {
    const { app } = await makeApp(t);
    const w = await world(app);
    const res = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: [' e1', 'E1 ', 'A7'] }));
    t.same(res.body.incident.resources, ['e1', 'A7']);
    t.equal((await events(app)).length, 3);
  });

  t.test('when the body is invalid, then 400 problem+json names the fields and nothing is stored', async (t) => {
    const { app } = await makeApp(t);
    const w = await world(app);
    const cases: [Record<string, unknown>, string][] = [
      [incidentBody({ type: undefined }), '/body/type'],
      [incidentBody({ latitude: 91 }), '/body/latitude'],
      [incidentBody({ longitude: '12' }), '/body/longitude'],
      [incidentBody({ priority: 1.5 }), '/body/priority'],
      [incidentBody({ description: 'x'.repeat(256) }), '/body/description'],
      [incidentBody({ resources: ['   '] }), '/body/resources/0'],
      [incidentBody({ resources: ['x'.repeat(65)] }), '/body/resources/0'],
      [incidentBody({ resources: Array.from({ length: 501 }, (_, i) => `C${i}`) }), '/body/resources'],
      [incidentBody({ resource: ['E1'] }), '/body/resource'],
      [incidentBody({ timeOfOrigin: 'yesterday' }), '/body/timeOfOrigin'],
    ];
    for (const [body, path] of cases) {
      const res = await send(app, w.cad, 'POST', '/api/incidents', body);
      t.equal(res.status, 400, `400 for ${path}`);
      t.equal(res.headers['content-type'], 'application/problem+json; charset=utf-8');
      t.ok(
        res.body.errors.some((e: { path: string }) => e.path === path),
        `errors name ${path}: ${JSON.stringify(res.body.errors)}`,
      );
    }
    t.same((await send(app, adminAuth(), 'GET', '/api/incidents?all=true')).body, []);
  });

  t.test('when the caller is not authenticated, then 401 even for an invalid body', async (t) => {
    const { app } = await makeApp(t);
    const res = await app.inject({ method: 'POST', url: '/api/incidents', payload: { nonsense: true } });
    t.equal(res.statusCode, 401);
    t.match(res.headers['www-authenticate'], /Basic/);
    t.match(res.headers['www-authenticate'], /Bearer/);
  });

  t.test('when the originId is taken, then 409 origin-id-taken with the id only for a caller who may see it', async (t) => {
    const { app } = await makeApp(t);
    const w = await world(app);
    const first = await send(app, w.cad, 'POST', '/api/incidents', incidentBody());
    const again = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['A7'] }));
    t.equal(again.status, 409);
    t.equal(again.body.type, 'urn:cad-incident:problem:origin-id-taken');
    t.equal(again.body.incidentId, first.body.id);
    const stranger = await send(app, w.other, 'POST', '/api/incidents', incidentBody());
    t.equal(stranger.status, 409);
    t.notOk('incidentId' in stranger.body, 'another user learns nothing about the incident');
    t.same(await events(app), [], 'the refused create wrote no event');
  });

  t.test('when a readonly user creates, then 403', async (t) => {
    const { app } = await makeApp(t);
    await createUser(app, { name: 'RO', email: 'ro@example.test', password: 'ro-password', readonly: true });
    const res = await send(app, basic('ro@example.test', 'ro-password'), 'POST', '/api/incidents', incidentBody());
    t.equal(res.status, 403);
    t.equal(res.body.type, 'urn:cad-incident:problem:readonly-user');
  });
});

t.test('update', async (t) => {
  t.test('when callsigns are added and removed, then only the difference is notified', async (t) => {
    const { app } = await makeApp(t);
    const w = await world(app);
    const created = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['E1', 'A7'] }));
    const id = created.body.incident.id;
    const before = (await events(app)).length;
    const res = await send(app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ resources: ['a7', 'Z9'] }));
    t.equal(res.status, 202);
    t.same(res.body.details.deviceStatuses, { E1: 'OFFLINE', Z9: 'NOT_FOUND' }, 'removed E1 (stored spelling) and added Z9 are reported; unchanged A7 is not');
    t.same(res.body.incident.resources, ['a7', 'Z9'], 'resources keep the latest spelling');
    const evs = (await events(app)).slice(before);
    t.same(
      evs.map((e) => [e.type, e.deviceId]),
      [
        ['incidentDeassigned', w.e1a],
        ['incidentDeassigned', w.e1b],
      ],
    );
    t.equal(evs[0]!.incidentId, id);
  });

  t.test('when fields are omitted, then description and times are kept and the rest is emptied', async (t) => {
    const { app } = await makeApp(t);
    const w = await world(app);
    await send(app, w.cad, 'POST', '/api/incidents', incidentBody({
      description: 'kitchen fire', timeOfOrigin: '2026-11-22T10:00:00Z', timeReceived: '2026-11-22T10:01:00Z', timeUpdated: '2026-11-22T10:02:00Z', resources: ['A7'],
    }));
    const res = await send(app, w.cad, 'PUT', '/api/incidents/update', { originId: 'CAD-1', type: 'FIRE-2' });
    t.equal(res.status, 202, 'the omitted resources stand A7 down (offline)');
    const inc = res.body.incident;
    t.equal(inc.type, 'FIRE-2');
    t.equal(inc.description, 'kitchen fire');
    t.equal(inc.timeOfOrigin, '2026-11-22T10:00:00.000Z');
    t.equal(inc.timeReceived, '2026-11-22T10:01:00.000Z');
    t.equal(inc.timeUpdated, null);
    t.equal(inc.latitude, 0);
    t.equal(inc.longitude, 0);
    t.equal(inc.priority, 0);
    t.equal(inc.status, 'OPEN');
    t.same(inc.resources, []);
    const last = (await events(app)).at(-1)!;
    t.same([last.type, last.deviceId, last.attributes], ['incidentDeassigned', w.a7, { callsign: 'A7' }]);
  });

  t.test('when type is missing or status is unknown, then 400', async (t) => {
    const { app } = await makeApp(t);
    const w = await world(app);
    await send(app, w.cad, 'POST', '/api/incidents', incidentBody());
    t.equal((await send(app, w.cad, 'PUT', '/api/incidents/update', { originId: 'CAD-1' })).status, 400);
    const bad = await send(app, w.cad, 'PUT', '/api/incidents/update', { originId: 'CAD-1', type: 'FIRE', status: 'PENDING' });
    t.equal(bad.status, 400);
    t.equal(bad.body.errors[0].path, '/body/status');
  });

  t.test('when the incident does not exist, then 404', async (t) => {
    const { app } = await makeApp(t);
    const w = await world(app);
    t.equal((await send(app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ originId: 'nope' }))).status, 404);
    t.equal((await send(app, w.cad, 'PUT', '/api/incidents/12345', incidentBody())).status, 404);
  });

  t.test('when another user updates it, then 404 (as for no incident: issue 36) and nothing changes', async (t) => {
    const { app } = await makeApp(t);
    const w = await world(app);
    const created = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['A7'] }));
    const res = await send(app, w.other, 'PUT', `/api/incidents/${created.body.incident.id}`, incidentBody({ resources: [] }));
    t.equal(res.status, 404);
    t.equal((await send(app, w.other, 'GET', `/api/incidents/${created.body.incident.id}`)).status, 404);
    t.equal((await send(app, w.other, 'DELETE', `/api/incidents/${created.body.incident.id}`)).status, 404);
    t.equal((await events(app)).length, 1);
  });

  t.test('when closing, then timeClosed is set, resources emptied and every assigned device gets one CLOSED stand-down', async (t) => {
    const { app } = await makeApp(t);
    const w = await world(app);
    await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['E1', 'A7', 'Z9'] }));
    const res = await send(app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ status: 'CLOSED' }));
    t.equal(res.status, 202);
    const inc = res.body.incident;
    t.equal(inc.status, 'CLOSED');
    t.type(inc.timeClosed, 'string');
    t.same(inc.resources, []);
    t.same(res.body.details.deviceStatuses, { E1: 'OFFLINE', A7: 'OFFLINE', Z9: 'NOT_FOUND' });
    const closing = (await events(app)).filter((e) => e.type === 'incidentDeassigned');
    t.same(closing.map((e) => e.deviceId).sort(), [w.e1a, w.e1b, w.a7].sort());
    t.ok(closing.every((e) => e.attributes.incidentStatus === 'CLOSED'));
  });

  t.test('when closing with resources, or sending resources to a closed incident, then 409 and nothing is written', async (t) => {
    const { app } = await makeApp(t);
    const w = await world(app);
    await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['A7'] }));
    const closing = await send(app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ status: 'CLOSED', resources: ['A7'] }));
    t.equal(closing.status, 409);
    t.equal(closing.body.type, 'urn:cad-incident:problem:incident-closed');
    t.match(closing.body.detail, /status: "OPEN"/);
    t.equal((await send(app, w.cad, 'GET', '/api/incidents?originId=CAD-1')).body[0].status, 'OPEN', 'still open');
    await send(app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ status: 'CLOSED' }));
    const count = (await events(app)).length;
    const late = await send(app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ resources: ['E1'] }));
    t.equal(late.status, 409);
    t.equal((await events(app)).length, count, 'nothing assigned');
    const stay = await send(app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ status: 'CLOSED', resources: [] }));
    t.equal(stay.status, 200, 'closed with empty resources stays closed');
    t.equal(stay.body.timeClosed, (await send(app, w.cad, 'GET', '/api/incidents?originId=CAD-1')).body[0].timeClosed);
  });

  t.test('when reopening, then timeClosed is cleared and the callsigns are assigned again', async (t) => {
    const { app } = await makeApp(t);
    const w = await world(app);
    await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['A7'] }));
    await send(app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ status: 'CLOSED' }));
    const res = await send(app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ status: 'OPEN', resources: ['A7', 'E1'] }));
    t.equal(res.status, 202);
    t.equal(res.body.incident.status, 'OPEN');
    t.equal(res.body.incident.timeClosed, null);
    const assigned = (await events(app)).filter((e) => e.type === 'incidentAssigned');
    t.equal(assigned.length, 4, 'A7 at create, then A7 and both E1 devices on reopen');
  });

  t.test('when PUT /incidents/{id} changes the originId, then it is stored; a clash is 409', async (t) => {
    const { app } = await makeApp(t);
    const w = await world(app);
    const a = await send(app, w.cad, 'POST', '/api/incidents', incidentBody());
    await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'CAD-2' }));
    const renamed = await send(app, w.cad, 'PUT', `/api/incidents/${a.body.id}`, incidentBody({ originId: 'CAD-1b' }));
    t.equal(renamed.status, 200);
    t.equal(renamed.body.originId, 'CAD-1b');
    // read back from the table: the stored row moved, and the old originId is free
    t.same((await send(app, w.cad, 'GET', '/api/incidents?originId=CAD-1b')).body.map((i: { id: number }) => i.id), [a.body.id]);
    t.same((await send(app, w.cad, 'GET', '/api/incidents?originId=CAD-1')).body, []);
    // an update that keeps the originId keeps it stored
    const kept = await send(app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ originId: 'CAD-1b', priority: 1 }));
    t.equal(kept.status, 200);
    const stored = (await send(app, w.cad, 'GET', '/api/incidents?originId=CAD-1b')).body;
    t.same(stored.map((i: { id: number; priority: number }) => [i.id, i.priority]), [[a.body.id, 1]]);
    const clash = await send(app, w.cad, 'PUT', `/api/incidents/${a.body.id}`, incidentBody({ originId: 'CAD-2' }));
    t.equal(clash.status, 409);
    t.equal(clash.body.type, 'urn:cad-incident:problem:origin-id-taken');
  });
});

t.test('delete', async (t) => {
  t.test('when an incident is deleted, then 204, assigned devices get a deleted stand-down, events stay and the originId is free', async (t) => {
    const { app } = await makeApp(t);
    const w = await world(app);
    const created = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['A7'] }));
    const id = created.body.incident.id;
    t.equal((await send(app, w.cad, 'DELETE', `/api/incidents/${id}`)).status, 204);
    t.equal((await send(app, w.cad, 'GET', `/api/incidents/${id}`)).status, 404);
    const evs = await events(app, `?incidentId=${id}`);
    t.same(evs.map((e) => [e.type, e.attributes]), [
      ['incidentAssigned', { callsign: 'A7' }],
      ['incidentDeassigned', { callsign: 'A7', incidentStatus: 'CLOSED', incidentDeleted: true }],
    ]);
    t.same(evs.map((e) => e.state), ['SUPERSEDED', 'SUPERSEDED'], 'never sent, so neither is sent now');
    t.equal((await send(app, w.cad, 'POST', '/api/incidents', incidentBody())).status, 200, 'originId reusable');
    t.equal((await send(app, w.cad, 'DELETE', `/api/incidents/${id}`)).status, 404);
  });
});

t.test('when a device assigned to an open incident is deleted, then stand-downs and reports leave it out', { skip: sqliteOnly }, async (t) => {
  const { app, db } = await makeApp(t);
  const w = await world(app);
  const assignedTo = (id: number) =>
    (JSON.parse(db.$client.prepare('SELECT assignments FROM incidents WHERE id = ?').pluck().get(id) as string) as { deviceId: number }[]).map((a) => a.deviceId);
  const standDowns = async (id: number) => (await events(app, `?incidentId=${id}&type=incidentDeassigned`)).map((e) => e.deviceId);
  const open = (originId: string) => send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId, resources: ['E1', 'A7'] }));
  const updated = (await open('D1')).body.incident;
  const deleted = (await open('D2')).body.incident;
  t.equal((await send(app, adminAuth(), 'DELETE', `/api/devices/${w.a7}`)).status, 204);
  t.equal((await send(app, adminAuth(), 'DELETE', `/api/devices/${w.e1a}`)).status, 204);

  const keep = await send(app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ originId: 'D1', resources: ['E1', 'A7'], priority: 1 }));
  t.same(assignedTo(updated.id), [w.e1b], 'the next write of the incident drops the deleted devices from its row');
  t.same(keep.body.resources, ['E1', 'A7'], 'the callsigns stay');
  const update = await send(app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ originId: 'D1', resources: [] }));
  t.same(update.body.details.deviceStatuses, { E1: 'OFFLINE', A7: 'NOT_FOUND' }, 'A7 had only the deleted device; E1 keeps its other one');
  t.same(await standDowns(updated.id), [w.e1b], 'an update writes no stand-down for a deleted device');
  t.same(update.body.incident.resources, [], 'the callsigns are gone');

  t.equal((await send(app, w.cad, 'DELETE', `/api/incidents/${deleted.id}`)).status, 204);
  t.same(await standDowns(deleted.id), [w.e1b], 'a delete writes no stand-down for a deleted device');
});

t.test('list', async (t) => {
  t.test('when listing, then only the caller\'s incidents, filtered and paged with a Link header', async (t) => {
    const { app } = await makeApp(t);
    const w = await world(app);
    for (let i = 1; i <= 5; i++) await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: `C${i}`, resources: i % 2 ? ['A7'] : [] }));
    await send(app, w.other, 'POST', '/api/incidents', incidentBody({ originId: 'O1' }));
    await send(app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ originId: 'C5', status: 'CLOSED' }));
    const all = await send(app, w.cad, 'GET', '/api/incidents');
    t.same(all.body.map((i: { originId: string }) => i.originId), ['C1', 'C2', 'C3', 'C4', 'C5']);
    t.same((await send(app, w.cad, 'GET', '/api/incidents?status=CLOSED')).body.map((i: { originId: string }) => i.originId), ['C5']);
    t.same((await send(app, w.cad, 'GET', '/api/incidents?callsign=a7')).body.map((i: { originId: string }) => i.originId), ['C1', 'C3']);
    const page = await send(app, w.cad, 'GET', '/api/incidents?limit=2');
    t.equal(page.body.length, 2);
    t.match(page.headers.link, /offset=2/);
    t.match(page.headers.link, /rel="next"/);
    const last = await send(app, w.cad, 'GET', '/api/incidents?limit=2&offset=4');
    t.equal(last.body.length, 1);
    t.notOk(last.headers.link);
    t.equal((await send(app, adminAuth(), 'GET', '/api/incidents?all=true')).body.length, 6, 'admins see everyone\'s with all=true');
    t.equal((await send(app, w.cad, 'GET', `/api/incidents?userId=${w.otherId}`)).status, 403);
    t.equal((await send(app, adminAuth(), 'GET', `/api/incidents?userId=${w.otherId}`)).body.length, 1);
  });

  t.test('when granted an incident, then another user sees and may update it', async (t) => {
    const { app } = await makeApp(t);
    const w = await world(app);
    const created = await send(app, w.cad, 'POST', '/api/incidents', incidentBody());
    const grantRes = await send(app, w.cad, 'POST', '/api/permissions', { userId: w.otherId, incidentId: created.body.id });
    t.equal(grantRes.status, 403, 'cad does not manage other');
    t.equal((await send(app, adminAuth(), 'POST', '/api/permissions', { userId: w.otherId, incidentId: created.body.id })).status, 204);
    t.equal((await send(app, w.other, 'GET', `/api/incidents/${created.body.id}`)).status, 200);
    t.equal((await send(app, adminAuth(), 'DELETE', '/api/permissions', { userId: w.otherId, incidentId: created.body.id })).status, 204);
    t.equal((await send(app, w.other, 'GET', `/api/incidents/${created.body.id}`)).status, 404);
  });
});

t.test('when a write fails inside the transaction, then no incident, event or outbox row is left behind', { skip: sqliteOnly }, async (t) => {
  const { app, db } = await makeApp(t);
  const w = await world(app);
  db.$client.exec(`CREATE TRIGGER fail_event BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'disk on fire'); END`);
  const res = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['A7'] }));
  t.equal(res.status, 500);
  t.equal(res.body.type, 'urn:cad-incident:problem:internal-error');
  t.notMatch(JSON.stringify(res.body), /disk on fire|    at /, 'nothing internal leaks');
  const count = (table: string) => (db.$client.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
  t.equal(count('incidents'), 0);
  t.equal(count('incident_callsigns'), 0);
  t.equal(count('events'), 0);
  t.equal(count('incident_versions'), 0);
  db.$client.exec('DROP TRIGGER fail_event');
  t.equal((await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['A7'] }))).status, 202, 'the same request succeeds afterwards');
});

t.test('when concurrent writes share one commit, then each keeps its own answer and a failure stays its own', { skip: sqliteOnly }, async (t) => {
  const { app, db } = await makeApp(t);
  const w = await world(app);
  await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'P' }));
  db.$client.exec(`CREATE TRIGGER boom BEFORE INSERT ON incidents WHEN NEW.origin_id = 'BOOM' BEGIN SELECT RAISE(ABORT, 'boom'); END`);
  // concurrent requests have no defined order between them: assert only what holds in any order
  const [a1, boom, c, a2, p] = await Promise.all([
    send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'A', resources: ['A7'] })),
    send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'BOOM', resources: ['A7'] })),
    send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'C' })),
    send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'A', resources: ['A7'] })),
    send(app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ originId: 'P', resources: ['E1'] })),
  ]);
  t.equal(boom!.status, 500);
  t.equal(c!.status, 200);
  t.equal(p!.status, 202);
  t.same([a1!.status, a2!.status].sort(), [202, 409], 'exactly one of the two creates of A wins');
  const [winner, loser] = a1!.status === 202 ? [a1!, a2!] : [a2!, a1!];
  t.equal(loser.body.incidentId, winner.body.incident.id, 'the loser names the winner');
  const stored = (db.$client.prepare('SELECT origin_id FROM incidents ORDER BY origin_id').all() as { origin_id: string }[]).map((r) => r.origin_id);
  t.same(stored, ['A', 'C', 'P'], 'the failed operation left nothing; the others are stored');
  const evs = await events(app);
  t.same(evs.map((e) => [e.type, e.deviceId]).sort(), [['incidentAssigned', w.a7], ['incidentAssigned', w.e1a], ['incidentAssigned', w.e1b]].sort(), 'one assignment for A, two for P; none for BOOM');
});

t.test('when an incident was read, then every later read shows the latest committed write (the read cache never serves a stale one)', { skip: sqliteOnly }, async (t) => {
  const { app, db } = await makeApp(t);
  const w = await world(app);
  const created = (await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'R', resources: ['E1'] }))).body.incident;
  const read = async () => send(app, w.cad, 'GET', `/api/incidents/${created.id}`);
  t.same((await read()).body.resources, ['E1'], 'first read');

  await send(app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ originId: 'R', resources: ['A7'], description: 'moved' }));
  const afterUpdate = (await read()).body;
  t.same([afterUpdate.resources, afterUpdate.description], [['A7'], 'moved'], 'a read after an update shows it');

  // an update that fails inside its transaction is rolled back: the read shows the last commit
  db.$client.exec(`CREATE TRIGGER fail_update BEFORE UPDATE ON incidents BEGIN SELECT RAISE(ABORT, 'no'); END`);
  t.equal((await send(app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ originId: 'R', resources: ['Z9'], description: 'lost' }))).status, 500);
  db.$client.exec('DROP TRIGGER fail_update');
  const afterFailure = (await read()).body;
  t.same([afterFailure.resources, afterFailure.description], [['A7'], 'moved'], 'a failed update changes nothing that is read');

  await send(app, w.cad, 'PUT', `/api/incidents/${created.id}`, incidentBody({ originId: 'R', status: 'CLOSED' }));
  const closed = (await read()).body;
  t.same([closed.status, closed.resources], ['CLOSED', []], 'a read after closing shows it closed');

  t.equal((await send(app, w.cad, 'DELETE', `/api/incidents/${created.id}`)).status, 204);
  t.equal((await read()).status, 404, 'a read after a delete is 404');
});

t.test('when an update keeps the callsigns, then they stay stored in their order and nobody is notified again', { skip: sqliteOnly }, async (t) => {
  const { app, db } = await makeApp(t);
  const w = await world(app);
  const created = (await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'K', resources: ['A7', 'E1'] }))).body.incident;
  const before = (await events(app, `?incidentId=${created.id}`)).length;
  const res = await send(app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ originId: 'K', resources: ['A7', 'E1'], priority: 1, description: 'upgraded' }));
  t.equal(res.status, 200, 'no device is newly notified: the plain incident');
  t.same(res.body.resources, ['A7', 'E1']);
  const stored = db.$client.prepare('SELECT resources FROM incidents WHERE id = ?').pluck().get(created.id);
  t.same(JSON.parse(stored as string), ['A7', 'E1'], 'the stored callsigns are unchanged');
  t.equal((await events(app, `?incidentId=${created.id}`)).length, before, 'no new event');
  const swapped = await send(app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ originId: 'K', resources: ['E1', 'A7'] }));
  t.same(swapped.body.resources, ['E1', 'A7'], 'a new order is a change, and is stored');
  t.same((await send(app, w.cad, 'GET', `/api/incidents/${created.id}`)).body.resources, ['E1', 'A7']);
});

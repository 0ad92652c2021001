// The incident store port's contract (ports/incidents.ts): the unit of work and the reads.
// Every adapter must pass it unchanged; test/adapters/<adapter>/contract.test.ts runs it.
import type { Test } from 'tap';
import type { CurrentIncident, MatchContext } from '../../../src/domain/incident.js';
import { planCreateWrite } from '../../../src/domain/incident-write.js';
import type { Decide, EventView } from '../../../src/ports/incidents.js';
import { at, brief, byDevice, ok, world, type StorageFactory } from './world.js';

export async function incidentStoreContract(t: Test, factory: StorageFactory): Promise<void> {
  await t.test('incident store', async (t) => {
    t.test('when a create names callsigns, then it writes the incident and one pending assignment per enabled device the caller reaches, each a push of its device', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const managed = await w.user('Managed');
      await w.identity.linkManagedUser(cad.id, managed.id);
      const stranger = await w.user('Stranger');
      const a1 = await w.device('E1', cad);
      const a2 = await w.device('E1', cad);
      const off = await w.device('E1', cad, { disabled: true });
      const notMine = await w.device('E1', stranger);
      const viaManaged = await w.device('E2', managed);
      const online = await w.device('E3', cad);
      w.presence.set(a2.id, true);
      w.presence.set(online.id, true);
      const now = w.now();
      const r = ok(t, await w.create(cad, 'CAD-1', ['e1', 'E2', 'E3', 'E9'], { description: 'smoke' }, now));

      t.match(r.incident, { originId: 'CAD-1', type: 'FIRE', status: 'OPEN', timeClosed: null, description: 'smoke', resources: ['e1', 'E2', 'E3', 'E9'] });
      t.ok(Number.isInteger(r.incident.id) && r.incident.id > 0, 'the incident has an id');
      t.same(
        brief(byDevice(r.events)),
        [
          ['incidentAssigned', a1.id, { callsign: 'e1' }],
          ['incidentAssigned', a2.id, { callsign: 'e1' }],
          ['incidentAssigned', viaManaged.id, { callsign: 'E2' }],
          ['incidentAssigned', online.id, { callsign: 'E3' }],
        ],
        'one assignment per enabled device the caller reaches (its own or a managed user’s), with the callsign as sent; none for a disabled device or one it does not reach',
      );
      for (const e of r.events) t.match(e, { incidentId: r.incident.id, eventTime: now, state: 'PENDING', attempts: 0 });
      t.equal(new Set(r.events.map((e) => e.id)).size, r.events.length, 'each event has its own id');
      t.same(r.report.deviceStatuses, { e1: 'OFFLINE', E2: 'OFFLINE', E9: 'NOT_FOUND' }, 'the report: E3’s only device is online, E9 has none');

      t.same(await w.incidents.get(cad, r.incident.id), r.incident, 'get reads what the write returned');
      t.same(await w.incidents.events({ ownerIds: null, incidentId: r.incident.id, limit: 100, offset: 0 }), r.events, 'the events as written, oldest first');
      t.ok(await w.identity.reachesIncident(cad.id, r.incident.id), 'the creator is linked to what it created');
      t.same((await w.incidents.list({ ownerIds: [cad.id], limit: 10, offset: 0 })).incidents, [r.incident], 'and lists it');
      t.equal(await w.incidents.exists(r.incident.id), true);

      for (const e of r.events) {
        const rows = await w.pending(e.deviceId);
        t.equal(rows.length, 1, `device ${e.deviceId} has one push`);
        const row = rows[0]!;
        t.match(row, { pushId: 1, eventId: e.id, type: 'incidentAssigned', eventTime: now, deviceId: e.deviceId, incidentId: r.incident.id, lastSentAt: null });
        t.same(JSON.parse(row.attributes), e.attributes, 'the push carries the event’s attributes');
        t.same(JSON.parse(row.incident), r.incident, 'and the incident as the write left it');
      }
      t.same(await w.pending(off.id), [], 'a disabled device gets nothing');
      t.same(await w.pending(notMine.id), [], 'nor a device the caller does not reach');
    });

    t.test('when a unit of work runs, then decide sees the incident the locator names, whether the caller reaches it, its assignments, and the devices each callsign key matches for the caller', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const stranger = await w.user('Stranger');
      const admin = await w.admin();
      const a = await w.device('E1', cad);
      const s = await w.device('E1', stranger);
      w.presence.set(s.id, true);
      const r = ok(t, await w.create(cad, 'CAD-1', ['E1']));
      const seen: { current: CurrentIncident | null; match: MatchContext }[] = [];
      const peek: Decide = (current, match) => {
        seen.push({ current, match: { matches: new Map(match.matches), online: new Set(match.online) } });
        return { ok: false, refusal: { code: 'NOT_FOUND' } };
      };
      const opts = { callsigns: [' e1 ', 'E1', 'X'], now: w.now() };
      await w.incidents.write(cad, { originId: 'CAD-1' }, peek, opts);
      await w.incidents.write(stranger, { id: r.incident.id }, peek, opts);
      await w.incidents.write(admin, { id: r.incident.id }, peek, opts);
      await w.incidents.write(cad, { originId: 'CAD-2' }, peek, opts);
      await w.incidents.write(cad, { id: r.incident.id + 1000 }, peek, { callsigns: [], now: w.now() });
      const assignments = [{ callsignKey: 'e1', callsign: 'E1', deviceId: a.id }];
      t.same(seen[0]!.current, { incident: r.incident, version: 1, assignments, reachable: true, originIdHolder: null }, 'by originId: the incident, its assignments, reachable by its creator');
      t.same([...seen[0]!.match.matches], [['e1', [a.id]]], 'callsigns matched by key, once each; a key with no device is left out');
      t.same([...seen[0]!.match.online], [s.id], 'and the devices online now');
      t.same(seen[1]!.current, { incident: r.incident, version: 1, assignments, reachable: false, originIdHolder: null }, 'by id, for a caller who does not reach it');
      t.same([...seen[1]!.match.matches], [['e1', [s.id]]], 'matched among the devices that caller reaches');
      t.equal(seen[2]!.current?.reachable, true, 'an administrator reaches every incident');
      t.same([...seen[2]!.match.matches], [['e1', [a.id, s.id]]], 'and matches every enabled device, in id order');
      t.equal(seen[3]!.current, null, 'no incident under that originId');
      t.equal(seen[4]!.current, null, 'none with that id');
      t.same([...seen[4]!.match.matches], [], 'no callsigns: no match');
      // a write naming another originId: decide sees who holds it, and whether the caller reaches that one
      const other = ok(t, await w.create(cad, 'CAD-9'));
      const naming = (originId: string) => ({ callsigns: [], now: w.now(), originId });
      await w.incidents.write(cad, { id: r.incident.id }, peek, naming('CAD-9'));
      await w.incidents.write(stranger, { id: r.incident.id }, peek, naming('CAD-9'));
      await w.incidents.write(cad, { id: r.incident.id }, peek, naming('CAD-FREE'));
      await w.incidents.write(cad, { id: r.incident.id }, peek, naming('CAD-1'));
      t.same(seen[5]!.current?.originIdHolder, { id: other.incident.id, reachable: true }, 'the incident holding the originId named, reached by its creator');
      t.same(seen[6]!.current?.originIdHolder, { id: other.incident.id, reachable: false }, 'and not by a stranger');
      t.equal(seen[7]!.current?.originIdHolder, null, 'a free originId: no holder');
      t.equal(seen[8]!.current?.originIdHolder, null, 'the incident’s own originId: no holder');
    });

    t.test('when a create names an originId in use, then it is refused ORIGIN_ID_TAKEN (with the id only for a caller who reaches it) and nothing is written', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const manager = await w.user('Manager');
      await w.identity.linkManagedUser(manager.id, cad.id);
      const stranger = await w.user('Stranger');
      const admin = await w.admin();
      const a = await w.device('E1', cad);
      const b = await w.device('E2', cad);
      const s = await w.device('E1', stranger);
      const m = await w.device('E1', manager);
      const r = ok(t, await w.create(cad, 'CAD-1', ['E1']));
      const before = await w.snapshot();
      const again = ['E1', 'E2'];
      t.same(await w.create(cad, 'CAD-1', again), { ok: false, refusal: { code: 'ORIGIN_ID_TAKEN', incidentId: r.incident.id } }, 'its creator is told which');
      t.same(await w.create(manager, 'CAD-1', again), { ok: false, refusal: { code: 'ORIGIN_ID_TAKEN', incidentId: r.incident.id } }, 'so is the creator’s manager');
      t.same(await w.create(admin, 'CAD-1', again), { ok: false, refusal: { code: 'ORIGIN_ID_TAKEN', incidentId: r.incident.id } }, 'and an administrator');
      t.same(await w.create(stranger, 'CAD-1', again), { ok: false, refusal: { code: 'ORIGIN_ID_TAKEN', incidentId: null } }, 'a caller who does not reach it is not');
      t.same(await w.snapshot(), before, 'no incident, no event written');
      t.same(await w.pushIds(a.id), [1], 'no push');
      t.same(await w.pushIds(b.id), []);
      t.same(await w.pushIds(s.id), []);
      t.same(await w.pushIds(m.id), []);
      t.notOk(await w.identity.reachesIncident(stranger.id, r.incident.id), 'and no link to the refused caller');
    });

    t.test('when an update changes the callsigns, then they are diffed by key: removed ones are stood down, added ones assigned, unchanged ones left alone', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const a = await w.device('E1', cad);
      const b = await w.device('E2', cad);
      const c = await w.device('E3', cad);
      const r = ok(t, await w.create(cad, 'CAD-1', ['E1', 'E2']));
      const u = ok(t, await w.update(cad, { originId: 'CAD-1' }, { originId: 'CAD-1', resources: [' e1', 'E3'] }));
      t.same(
        brief(u.events),
        [
          ['incidentDeassigned', b.id, { callsign: 'E2' }],
          ['incidentAssigned', c.id, { callsign: 'E3' }],
        ],
        'E2 stood down (as it was spelt), E3 assigned, nothing for E1',
      );
      t.same(u.incident.resources, ['e1', 'E3'], 'the callsigns as now sent, trimmed');
      t.equal(u.incident.id, r.incident.id);
      t.same(await w.incidents.get(cad, r.incident.id), u.incident);
      t.same((await w.eventsOf(a.id)).length, 1, 'E1’s device got its assignment only');
      const byCallsign = async (callsign: string) => (await w.incidents.list({ ownerIds: null, callsign, limit: 10, offset: 0 })).incidents.map((i) => i.id);
      t.same(await byCallsign('E2'), [], 'the list no longer finds it by a removed callsign');
      t.same(await byCallsign('e3'), [r.incident.id], 'but by an added one');
      t.same(await byCallsign('E1'), [r.incident.id], 'and by one kept under a new spelling');
      const peek: { current: CurrentIncident | null }[] = [];
      await w.incidents.write(cad, { id: r.incident.id }, (current) => (peek.push({ current }), { ok: false, refusal: { code: 'NOT_FOUND' } }), { callsigns: [], now: w.now() });
      t.same(
        peek[0]!.current?.assignments,
        [
          { callsignKey: 'e1', callsign: 'E1', deviceId: a.id },
          { callsignKey: 'e3', callsign: 'E3', deviceId: c.id },
        ],
        'the stored assignments: the kept one as first assigned, then the added one',
      );
    });

    t.test('when callsigns are removed, then the stand-down goes to the devices recorded as assigned, not to a fresh match', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const a = await w.device('E1', cad);
      const b = await w.device('E1', cad);
      const r = ok(t, await w.create(cad, 'CAD-1', ['E1']));
      t.same(byDevice(r.events).map((e) => e.deviceId), [a.id, b.id]);
      await w.identity.unlinkDevice(cad.id, a.id); // no longer reached
      await w.rename(b.id, 'Z1'); // no longer named E1
      const fresh = await w.device('E1', cad); // would match now
      const u = ok(t, await w.update(cad, { id: r.incident.id }, { originId: 'CAD-1', resources: [] }));
      t.same(
        brief(byDevice(u.events)),
        [
          ['incidentDeassigned', a.id, { callsign: 'E1' }],
          ['incidentDeassigned', b.id, { callsign: 'E1' }],
        ],
        'both assigned devices are stood down; the device that now matches E1 gets nothing',
      );
      t.same(await w.eventsOf(fresh.id), []);
    });

    t.test('when an assigned device is deleted, then the next change neither stands it down nor fails', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const a = await w.device('E1', cad);
      const b = await w.device('E2', cad);
      const r = ok(t, await w.create(cad, 'CAD-1', ['E1', 'E2']));
      await w.identity.deleteDevice(a.id);
      const u = ok(t, await w.update(cad, { id: r.incident.id }, { originId: 'CAD-1', resources: [] }));
      t.same(brief(u.events), [['incidentDeassigned', b.id, { callsign: 'E2' }]], 'only the device that still exists');
      t.same(u.report.deviceStatuses, { E1: 'NOT_FOUND', E2: 'OFFLINE' });
      const d = ok(t, await w.remove(cad, r.incident.id));
      t.same(d.events, [], 'a later delete has nobody left to stand down');
    });

    t.test('when a stand-down follows an assignment never sent, then it supersedes it: both SUPERSEDED, nothing pending; a sent or delivered assignment is not superseded', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const never = await w.device('E1', cad);
      const sent = await w.device('E2', cad);
      const acked = await w.device('E3', cad);
      const r1 = ok(t, await w.create(cad, 'CAD-1', ['E1']));
      const r2 = ok(t, await w.create(cad, 'CAD-2', ['E2']));
      const r3 = ok(t, await w.create(cad, 'CAD-3', ['E3']));
      await w.outbox.markSent([r2.events[0]!.id, r3.events[0]!.id], w.now());
      t.equal(await w.outbox.ack(acked.id, 1, w.now()), 1);

      const u1 = ok(t, await w.update(cad, { id: r1.incident.id }, { originId: 'CAD-1', resources: [] }));
      t.same(u1.events.map((e) => [e.type, e.state]), [['incidentDeassigned', 'SUPERSEDED']], 'the stand-down is returned SUPERSEDED');
      t.same((await w.eventsOf(never.id)).map((e) => [e.type, e.state]), [
        ['incidentAssigned', 'SUPERSEDED'],
        ['incidentDeassigned', 'SUPERSEDED'],
      ]);
      t.same(await w.pending(never.id), [], 'the device is sent neither');

      const u2 = ok(t, await w.update(cad, { id: r2.incident.id }, { originId: 'CAD-2', resources: [] }));
      t.same(u2.events.map((e) => e.state), ['PENDING']);
      t.same((await w.pending(sent.id)).map((p) => [p.pushId, p.type]), [
        [1, 'incidentAssigned'],
        [2, 'incidentDeassigned'],
      ], 'an assignment sent but not acknowledged stays pending, and so does its stand-down');

      const u3 = ok(t, await w.update(cad, { id: r3.incident.id }, { originId: 'CAD-3', resources: [] }));
      t.same(u3.events.map((e) => e.state), ['PENDING']);
      t.same((await w.eventsOf(acked.id)).map((e) => e.state), ['DELIVERED', 'PENDING'], 'a delivered assignment stays delivered');

      // once superseded, a new assignment of the same incident is a new push
      const again = ok(t, await w.update(cad, { id: r1.incident.id }, { originId: 'CAD-1', resources: ['E1'] }));
      t.same(again.events.map((e) => [e.type, e.state]), [['incidentAssigned', 'PENDING']]);
      t.same(await w.pushIds(never.id), [3], 'pending: only the new assignment, numbered after the superseded pushes');
    });

    t.test('when an incident is deleted, then its row goes, its events stay, its devices are stood down, and a new incident may take its originId', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const a = await w.device('E1', cad);
      const r = ok(t, await w.create(cad, 'CAD-1', ['E1']));
      const id = r.incident.id;
      await w.outbox.markSent([r.events[0]!.id], w.now());
      const d = ok(t, await w.remove(cad, id));
      t.same(d.incident, r.incident, 'the delete returns the incident as it was');
      t.same(brief(d.events), [['incidentDeassigned', a.id, { callsign: 'E1', incidentStatus: 'CLOSED', incidentDeleted: true }]]);
      t.equal(await w.incidents.get(cad, id), 'NOT_FOUND');
      t.equal(await w.incidents.exists(id), false);
      t.same((await w.incidents.list({ ownerIds: null, limit: 10, offset: 0 })).incidents, []);
      t.same((await w.incidents.list({ ownerIds: [cad.id], limit: 10, offset: 0 })).incidents, [], 'nor in its creator’s list');
      t.same(
        (await w.incidents.events({ ownerIds: null, incidentId: id, limit: 10, offset: 0 })).map((e) => e.type),
        ['incidentAssigned', 'incidentDeassigned'],
        'its events are kept',
      );
      const push = (await w.pending(a.id)).at(-1)!;
      t.equal(push.type, 'incidentDeassigned');
      t.same(JSON.parse(push.incident), r.incident, 'the stand-down push carries the incident as it was');
      t.same(await w.remove(cad, id), { ok: false, refusal: { code: 'NOT_FOUND' } }, 'deleted twice: not found');
      const n = ok(t, await w.create(cad, 'CAD-1', ['E1']));
      t.not(n.incident.id, id, 'a new incident under the same originId gets a new id');
      t.same((await w.incidents.events({ ownerIds: null, incidentId: id, limit: 10, offset: 0 })).length, 2, 'the old id’s events are still its own');
      t.same((await w.incidents.list({ ownerIds: null, originId: 'CAD-1', limit: 10, offset: 0 })).incidents, [n.incident]);
    });

    t.test('when an update moves an incident to an originId another holds, then it is refused ORIGIN_ID_TAKEN and nothing is written; to a free one, the old one is free', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const other = await w.user('Other');
      const admin = await w.admin();
      await w.device('E1', other);
      const a = ok(t, await w.create(cad, 'CAD-A'));
      const b = ok(t, await w.create(other, 'CAD-B'));
      const before = await w.snapshot();
      t.same(
        await w.update(other, { id: b.incident.id }, { originId: 'CAD-A', resources: ['E1'] }),
        { ok: false, refusal: { code: 'ORIGIN_ID_TAKEN', incidentId: null } },
        'a caller who does not reach the holder is not told its id',
      );
      t.same(
        await w.update(admin, { originId: 'CAD-B' }, { originId: 'CAD-A', resources: ['E1'] }),
        { ok: false, refusal: { code: 'ORIGIN_ID_TAKEN', incidentId: a.incident.id } },
        'one who does is',
      );
      t.same(await w.snapshot(), before, 'nothing written: the incident, its callsigns, no event');
      const moved = ok(t, await w.update(other, { originId: 'CAD-B' }, { originId: 'CAD-C' }));
      t.equal(moved.incident.id, b.incident.id);
      const byOrigin = async (originId: string) => (await w.incidents.list({ ownerIds: null, originId, limit: 10, offset: 0 })).incidents.map((i) => i.id);
      t.same(await byOrigin('CAD-C'), [b.incident.id]);
      t.same(await byOrigin('CAD-B'), []);
      const found: (number | undefined)[] = [];
      await w.incidents.write(other, { originId: 'CAD-C' }, (current) => (found.push(current?.incident.id), { ok: false, refusal: { code: 'NOT_FOUND' } }), { callsigns: [], now: w.now() });
      t.same(found, [b.incident.id], 'the locator finds it under its new originId');
      const reused = ok(t, await w.create(cad, 'CAD-B'));
      t.not(reused.incident.id, b.incident.id, 'its old originId may be used again');
    });

    t.test('when decide refuses, then nothing is written', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const reader = await w.user('Reader', { readonly: true });
      const stranger = await w.user('Stranger');
      const a = await w.device('E1', cad);
      await w.identity.linkDevice(reader.id, a.id);
      await w.identity.linkDevice(stranger.id, a.id);
      const r = ok(t, await w.create(cad, 'CAD-1', ['E1']));
      const id = r.incident.id;
      const before = await w.snapshot();
      const refusals = [
        await w.create(reader, 'CAD-2', ['E1']),
        await w.update(stranger, { id }, { originId: 'CAD-1', resources: ['E1', 'E2'] }),
        await w.update(cad, { id: id + 1000 }, { originId: 'CAD-9', resources: ['E1'] }),
        await w.remove(stranger, id),
        await w.remove(cad, id + 1000),
        await w.update(cad, { id }, { originId: 'CAD-1', status: 'CLOSED', resources: ['E1'] }),
      ];
      t.same(
        refusals.map((o) => (o.ok ? 'ok' : o.refusal.code)),
        // a change to an incident the caller has no permission on is NOT_FOUND, as one that does not exist (issue 36)
        ['FORBIDDEN', 'NOT_FOUND', 'NOT_FOUND', 'NOT_FOUND', 'NOT_FOUND', 'INCIDENT_CLOSED'],
      );
      // a decision that would have written, refused after the match
      const would: Decide = (current, match) => {
        const d = planCreateWrite(cad, { originId: 'CAD-3', type: 'FIRE', latitude: 0, longitude: 0, priority: 1, resources: ['E1'] }, at(0))(current, match);
        t.ok(d.ok, 'the decision would write');
        return { ok: false, refusal: { code: 'FORBIDDEN', reason: 'readonly' } };
      };
      t.same(await w.incidents.write(cad, { originId: 'CAD-3' }, would, { callsigns: ['E1'], now: w.now() }), { ok: false, refusal: { code: 'FORBIDDEN', reason: 'readonly' } });
      t.same(await w.snapshot(), before, 'no incident changed, no event');
      t.same(await w.pushIds(a.id), [1], 'no push');
      t.same(await w.incidents.get(cad, id), r.incident);
      t.notOk(await w.identity.reachesIncident(reader.id, id));
    });

    t.test('when a decision cannot be written whole, then the write rejects and nothing of it is stored', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const a = await w.device('E1', cad);
      const gone = await w.device('E2', cad);
      await w.identity.deleteDevice(gone.id);
      ok(t, await w.create(cad, 'CAD-1', ['E1']));
      const before = await w.snapshot();
      // a plan whose second event names a device that does not exist: the incident and the first
      // event are written before the adapter finds out
      const broken: Decide = (current, match) => {
        const d = planCreateWrite(cad, { originId: 'CAD-2', type: 'FIRE', latitude: 0, longitude: 0, priority: 1, resources: ['E1'] }, at(0))(current, match);
        if (!d.ok) throw new Error('the plan was refused');
        d.plan.events.push({ type: 'incidentAssigned', deviceId: gone.id, online: false, attributes: { callsign: 'E2' }, state: 'PENDING' });
        return d;
      };
      await t.rejects(w.incidents.write(cad, { originId: 'CAD-2' }, broken, { callsigns: ['E1'], now: w.now() }));
      const throws: Decide = () => {
        throw new Error('a bug in a decision');
      };
      await t.rejects(w.incidents.write(cad, { originId: 'CAD-3' }, throws, { callsigns: ['E1'], now: w.now() }), { message: 'a bug in a decision' });
      t.same(await w.snapshot(), before, 'no incident, no event');
      t.same(await w.pushIds(a.id), [1], 'no push');
      const next = ok(t, await w.create(cad, 'CAD-2', ['E1']));
      t.same(await w.pushIds(a.id), [1, 2], 'the failed write’s pushId was given back: the next push follows without a gap');
      t.equal((await w.pending(a.id))[1]!.eventId, next.events[0]!.id);
    });

    t.test('when an incident is read, then an unknown id is NOT_FOUND for anyone and a known one FORBIDDEN to a caller who does not reach it', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const manager = await w.user('Manager');
      await w.identity.linkManagedUser(manager.id, cad.id);
      const stranger = await w.user('Stranger');
      const admin = await w.admin();
      const r = ok(t, await w.create(cad, 'CAD-1'));
      const id = r.incident.id;
      t.equal(await w.incidents.get(cad, id + 1000), 'NOT_FOUND');
      t.equal(await w.incidents.get(admin, id + 1000), 'NOT_FOUND');
      t.equal(await w.incidents.get(stranger, id + 1000), 'NOT_FOUND');
      t.equal(await w.incidents.get(stranger, id), 'FORBIDDEN');
      t.same(await w.incidents.get(cad, id), r.incident, 'its creator reads it');
      t.same(await w.incidents.get(manager, id), r.incident, 'so does the creator’s manager');
      t.same(await w.incidents.get(admin, id), r.incident, 'and an administrator');
      await w.identity.linkIncident(stranger.id, id);
      t.same(await w.incidents.get(stranger, id), r.incident, 'a user linked to it reads it');
      await w.identity.unlinkIncident(cad.id, id);
      t.equal(await w.incidents.get(cad, id), 'FORBIDDEN', 'its creator, once unlinked, does not');
      t.equal(await w.incidents.get(manager, id), 'FORBIDDEN', 'nor its manager');
      t.equal(await w.incidents.exists(id), true);
      t.equal(await w.incidents.exists(id + 1000), false);
    });

    t.test('when incidents are listed, then each filter holds alone and together, in id order, and pages say whether more follow', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const u = await w.user('U');
      const nobody = await w.user('Nobody');
      const i1 = ok(t, await w.create(cad, 'L-1', ['E1'], {}, at(1))).incident.id;
      const i2 = ok(t, await w.create(cad, 'L-2', ['E2'], {}, at(2))).incident.id;
      const i3 = ok(t, await w.create(u, 'L-3', ['e1 '], {}, at(3))).incident.id;
      const i4 = ok(t, await w.create(u, 'L-4', [], {}, at(4))).incident.id;
      ok(t, await w.update(cad, { id: i2 }, { originId: 'L-2', status: 'CLOSED', resources: [] }, at(5)));
      await w.identity.linkIncident(u.id, i1);
      const ids = async (f: Partial<Parameters<typeof w.incidents.list>[0]>) => {
        const page = await w.incidents.list({ ownerIds: null, limit: 100, offset: 0, ...f });
        return page.incidents.map((i) => i.id);
      };
      t.same(await ids({}), [i1, i2, i3, i4], 'ownerIds null: every incident');
      t.same(await ids({ ownerIds: [] }), [], 'ownerIds []: none');
      t.same(await ids({ ownerIds: [nobody.id] }), [], 'a user with no incident');
      t.same(await ids({ ownerIds: [cad.id] }), [i1, i2]);
      t.same(await ids({ ownerIds: [u.id] }), [i1, i3, i4]);
      t.same(await ids({ ownerIds: [cad.id, u.id] }), [i1, i2, i3, i4], 'several owners: each incident once');
      t.same(await ids({ status: 'CLOSED' }), [i2]);
      t.same(await ids({ status: 'OPEN' }), [i1, i3, i4]);
      t.same(await ids({ originId: 'L-3' }), [i3]);
      t.same(await ids({ originId: 'l-3' }), [], 'originId is exact');
      t.same(await ids({ callsign: 'E1' }), [i1, i3], 'callsign by key');
      t.same(await ids({ callsign: ' e1' }), [i1, i3]);
      t.same(await ids({ callsign: 'E2' }), [], 'a closed incident lists no callsign');
      t.same(await ids({ callsign: 'E%' }), [], 'a callsign is no pattern');
      t.same(await ids({ updatedSince: at(3) }), [i2, i3, i4], 'updatedSince is inclusive, and counts from the last write');
      t.same(await ids({ updatedSince: '2026-11-25T09:00:03+01:00' }), [i2, i3, i4], 'the same instant with an offset');
      t.same(await ids({ updatedSince: at(6) }), []);
      t.same(await ids({ ownerIds: [u.id], status: 'OPEN', callsign: 'E1' }), [i1, i3], 'filters together');
      t.same(await ids({ ownerIds: [cad.id, u.id], updatedSince: at(2), status: 'OPEN' }), [i3, i4]);

      const page = (limit: number, offset: number, f: object = {}) => w.incidents.list({ ownerIds: null, limit, offset, ...f });
      const p = async (limit: number, offset: number, f: object = {}) => {
        const r = await page(limit, offset, f);
        return [r.incidents.map((i) => i.id), r.more];
      };
      t.same(await p(2, 0), [[i1, i2], true]);
      t.same(await p(2, 2), [[i3, i4], false], 'the last page, full: no more');
      t.same(await p(3, 1), [[i2, i3, i4], false]);
      t.same(await p(4, 0), [[i1, i2, i3, i4], false]);
      t.same(await p(2, 4), [[], false]);
      t.same(await p(1, 0, { callsign: 'E1' }), [[i1], true], 'a page of a filtered list');
      t.same(await p(1, 1, { ownerIds: [u.id] }), [[i3], true]);
      t.same(await p(1, 1, { ownerIds: [cad.id, u.id] }), [[i2], true]);
    });

    t.test('when events are read, then each filter holds alone and together, oldest first', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const u = await w.user('U');
      const a = await w.device('E1', cad);
      const b = await w.device('E2', cad);
      const c = await w.device('E3', u);
      const x = ok(t, await w.create(cad, 'X-1', ['E1', 'E2'], {}, at(1)));
      const y = ok(t, await w.create(u, 'X-2', ['E3'], {}, at(2)));
      const z = ok(t, await w.update(cad, { id: x.incident.id }, { originId: 'X-1', resources: [] }, at(3)));
      const [e1, e2] = x.events.map((e) => e.id);
      const [e3] = y.events.map((e) => e.id);
      const [e4, e5] = z.events.map((e) => e.id);
      t.same([x.events[0]!.deviceId, x.events[1]!.deviceId, z.events[0]!.deviceId, z.events[1]!.deviceId], [a.id, b.id, a.id, b.id]);
      t.ok(e1! < e2! && e2! < e3! && e3! < e4! && e4! < e5!, 'event ids grow in commit order');
      const ids = async (f: object) => (await w.incidents.events({ ownerIds: null, limit: 100, offset: 0, ...f })).map((e) => e.id);
      t.same(await ids({}), [e1, e2, e3, e4, e5], 'every event, oldest first');
      const written = ({ state: _, ...e }: EventView) => e; // the first two were superseded since
      t.same((await w.allEvents()).map(written), [...x.events, ...y.events, ...z.events].map(written), 'as the writes returned them');
      t.same(await ids({ incidentId: x.incident.id }), [e1, e2, e4, e5]);
      t.same(await ids({ deviceId: a.id }), [e1, e4]);
      t.same(await ids({ type: 'incidentDeassigned' }), [e4, e5]);
      t.same(await ids({ from: at(2) }), [e3, e4, e5], 'from is inclusive');
      t.same(await ids({ to: at(3) }), [e1, e2, e3], 'to is exclusive');
      t.same(await ids({ from: at(2), to: at(3) }), [e3]);
      t.same(await ids({ from: '2026-11-25T09:00:02+01:00' }), [e3, e4, e5], 'the same instant with an offset');
      t.same(await ids({ ownerIds: [] }), [], 'ownerIds []: none');
      t.same(await ids({ ownerIds: [u.id] }), [e3], 'the events of the devices linked to these users');
      t.same(await ids({ ownerIds: [cad.id] }), [e1, e2, e4, e5]);
      t.same(await ids({ ownerIds: [cad.id, u.id] }), [e1, e2, e3, e4, e5]);
      t.same(await ids({ deviceId: a.id, type: 'incidentAssigned' }), [e1], 'filters together');
      t.same(await ids({ ownerIds: [cad.id], incidentId: x.incident.id, from: at(3) }), [e4, e5]);
      t.same(await ids({ limit: 2, offset: 1 }), [e2, e3], 'a page');
      t.same(await ids({ deviceId: b.id, limit: 1, offset: 1 }), [e5]);
    });

    t.test('when links, names and the enabled flag change between writes, then each write matches callsigns as they stand', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const m = await w.user('Managed');
      let n = 0;
      const matched = async (callsign = 'E1') => {
        n += 1;
        return ok(t, await w.create(cad, `M-${n}`, [callsign])).events.map((e) => e.deviceId);
      };
      t.same(await matched(), [], 'no device yet');
      const a = await w.device('E1', cad);
      t.same(await matched(), [a.id], 'a device linked to the caller');
      await w.identity.updateDevice(a.id, { disabled: true });
      t.same(await matched(), [], 'disabled');
      await w.identity.updateDevice(a.id, { disabled: false });
      t.same(await matched(), [a.id], 'enabled again');
      await w.identity.unlinkDevice(cad.id, a.id);
      t.same(await matched(), [], 'unlinked');
      await w.identity.linkDevice(m.id, a.id);
      t.same(await matched(), [], 'linked to a user the caller does not manage');
      await w.identity.linkManagedUser(cad.id, m.id);
      t.same(await matched(), [a.id], 'that user managed by the caller');
      await w.rename(a.id, 'E5');
      t.same(await matched(), [], 'renamed');
      t.same(await matched('e5'), [a.id], 'matched under its new name');
      await w.identity.unlinkManagedUser(cad.id, m.id);
      t.same(await matched('E5'), [], 'no longer managed');
      await w.identity.linkDevice(cad.id, a.id);
      t.same(await matched('E5'), [a.id]);
      await w.identity.deleteDevice(a.id);
      t.same(await matched('E5'), [], 'deleted');
    });

    t.test('when writes are started together, then each resolves with its own incident, and every device’s pushIds stay gapless in commit order', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const a = await w.device('E1', cad);
      const b = await w.device('E2', cad);
      const N = 25;
      const outcomes = await Promise.all(Array.from({ length: N }, (_, i) => w.create(cad, `P-${i}`, i % 3 === 2 ? ['E2'] : ['E1', 'E2'])));
      const results = outcomes.map((o) => ok(t, o));
      t.equal(new Set(results.map((r) => r.incident.id)).size, N, 'distinct incident ids');
      t.same(results.map((r) => r.incident.originId), Array.from({ length: N }, (_, i) => `P-${i}`), 'each write answered with its own incident');
      const expectA = results.filter((_, i) => i % 3 !== 2).length;
      for (const [device, count] of [
        [a.id, expectA],
        [b.id, N],
      ] as const) {
        const rows = await w.pending(device);
        t.same(
          rows.map((r) => r.pushId),
          Array.from({ length: count }, (_, i) => i + 1),
          `device ${device}: pushIds 1..${count}`,
        );
        const eventIds = rows.map((r) => r.eventId);
        t.same(eventIds, [...eventIds].sort((x, y) => x - y), 'in the order the events were committed');
        const written = results.flatMap((r) => r.events.filter((e) => e.deviceId === device).map((e) => e.id));
        t.same([...eventIds].sort((x, y) => x - y), [...written].sort((x, y) => x - y), 'exactly the pushes the writes returned');
      }
      t.equal((await w.incidents.list({ ownerIds: null, limit: 100, offset: 0 })).incidents.length, N);
    });

    t.test('when writes to one originId or one incident are started together, then they take effect one after another', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const a = await w.device('E1', cad);
      const creates = await Promise.all(Array.from({ length: 6 }, () => w.create(cad, 'SAME', ['E1'])));
      const made = creates.filter((o) => o.ok);
      t.equal(made.length, 1, 'one create of the originId succeeds');
      const id = (made[0] as { incident: { id: number } }).incident.id;
      t.same(
        creates.filter((o) => !o.ok).map((o) => (o.ok ? null : o.refusal)),
        Array.from({ length: 5 }, () => ({ code: 'ORIGIN_ID_TAKEN', incidentId: id })),
        'the others are refused with its id',
      );
      // updates flipping E1 on and off: each must see the one before it, so the device's
      // events alternate (two assignments in a row would be a lost update)
      const flips = await Promise.all(Array.from({ length: 12 }, (_, i) => w.update(cad, { id }, { originId: 'SAME', resources: i % 2 === 0 ? [] : ['E1'] })));
      flips.forEach((o) => ok(t, o));
      const types = (await w.eventsOf(a.id)).map((e) => e.type);
      t.ok(types.length >= 2, 'the device was stood down and assigned again');
      t.ok(
        types.every((type, i) => type === (i % 2 === 0 ? 'incidentAssigned' : 'incidentDeassigned')),
        `assignments and stand-downs alternate: ${types.join(', ')}`,
      );
      const last = await w.incidents.get(cad, id);
      t.same(typeof last === 'string' ? last : last.resources, types.at(-1) === 'incidentAssigned' ? ['E1'] : [], 'the incident agrees with the last event');
      const pending = await w.pushIds(a.id);
      t.same(pending, pending.map((_, i) => pending[0]! + i), 'pending pushIds without a gap');
      const deletes = await Promise.all([w.remove(cad, id), w.remove(cad, id), w.remove(cad, id)]);
      t.same(
        deletes.map((o) => (o.ok ? 'ok' : o.refusal.code)).sort(),
        ['NOT_FOUND', 'NOT_FOUND', 'ok'],
        'one delete of an incident succeeds, the others find nothing',
      );
      t.equal((await w.eventsOf(a.id)).filter((e) => e.attributes.incidentDeleted).length, types.at(-1) === 'incidentAssigned' ? 1 : 0, 'and its device is stood down once at most');
    });

    t.test('when a write that fails is started together with others, then the others are stored and it leaves nothing', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const a = await w.device('E1', cad);
      const boom: Decide = () => {
        throw new Error('a bug in a decision');
      };
      const [one, bad, two] = await Promise.allSettled([
        w.create(cad, 'G-1', ['E1']),
        w.incidents.write(cad, { originId: 'G-2' }, boom, { callsigns: ['E1'], now: w.now() }),
        w.create(cad, 'G-3', ['E1']),
      ]);
      t.equal(bad.status, 'rejected');
      t.ok(one.status === 'fulfilled' && one.value.ok && two.status === 'fulfilled' && two.value.ok, 'the others are done');
      t.same(
        (await w.incidents.list({ ownerIds: null, limit: 10, offset: 0 })).incidents.map((i) => i.originId).sort(),
        ['G-1', 'G-3'],
      );
      t.same(await w.pushIds(a.id), [1, 2]);
      const events: EventView[] = await w.allEvents();
      t.equal(events.length, 2);
    });
  });
}

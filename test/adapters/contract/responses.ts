// The response store port's contract (ports/responses.ts): a device's answer as one unit of work
// on what the incident unit of work wrote, through the ports only, on every adapter.
import type { Test } from 'tap';
import { randomUUID } from 'node:crypto';
import { decideResponse, type ResponseInput, type ResponseStatus } from '../../../src/domain/response.js';
import type { ResponseOutcome } from '../../../src/ports/responses.js';
import { ok, world, type StorageFactory, type World } from './world.js';

function respond(w: World, deviceId: number, incidentId: number, status: ResponseStatus, responseId = randomUUID(), now = w.now()): Promise<ResponseOutcome> {
  const input: ResponseInput = { responseId, incidentId, status };
  return w.storage.responses.respond(deviceId, input, (ctx) => decideResponse(input, ctx), now);
}

export async function responseStoreContract(t: Test, factory: StorageFactory): Promise<void> {
  await t.test('responses', async (t) => {
    t.test('when an assigned device answers, then its state and an incidentResponse event are written, and the event is no push', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const a = await w.device('E1', cad);
      const incident = ok(t, await w.create(cad, 'R-1', ['E1'])).incident;
      const out = await respond(w, a.id, incident.id, 'RESPONDING');
      t.same([out.result.accepted, out.repeat, out.incident?.originId], [true, false, 'R-1']);
      t.equal(out.events.length, 1);
      t.match(out.events[0], { type: 'incidentResponse', deviceId: a.id, incidentId: incident.id, state: 'DELIVERED', attributes: { callsign: 'E1', status: 'RESPONDING' } });
      t.same((await w.eventsOf(a.id)).map((e) => [e.id, e.type]), [[(await w.allEvents())[0]!.id, 'incidentAssigned'], [out.events[0]!.id, 'incidentResponse']], 'listed, in id order');
      t.same(await w.pushIds(a.id), [1], 'only the assignment is pending');
      ok(t, await w.create(cad, 'R-2', ['E1']));
      t.same(await w.pushIds(a.id), [1, 2], "the device's pushIds go on without a gap");
      t.equal(await w.outbox.ack(a.id, 2, w.now()), 2, 'an ack settles the pushes only');
      const [line] = await w.storage.responses.responders(incident.id);
      t.match(line, { callsign: 'E1', deviceId: a.id, response: { status: 'RESPONDING' }, delivery: { eventType: 'incidentAssigned', state: 'DELIVERED' } });
    });

    t.test('when one responseId is answered many times at once, then one answer is recorded and every call gets its result', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const a = await w.device('E1', cad);
      const incidents = [];
      for (let i = 0; i < 4; i++) incidents.push(ok(t, await w.create(cad, `D-${i}`, ['E1'])).incident.id);
      const responseId = randomUUID();
      // the same responseId on four incidents: the unique (device, responseId) decides
      const outs = await Promise.all(incidents.flatMap((id) => [respond(w, a.id, id, 'ACKNOWLEDGED', responseId), respond(w, a.id, id, 'ACKNOWLEDGED', responseId)]));
      t.equal(outs.filter((o) => !o.repeat).length, 1, 'one decided, the others repeats');
      t.ok(outs.every((o) => o.result.accepted && o.result.responseId === responseId));
      t.equal((await w.allEvents()).filter((e) => e.type === 'incidentResponse').length, 1, 'one event');
    });

    t.test('when answers of one device race each other, then the state ends at the furthest status and never moves back', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const a = await w.device('E1', cad);
      const id = ok(t, await w.create(cad, 'O-1', ['E1'])).incident.id;
      const statuses: ResponseStatus[] = ['ON_SCENE', 'ACKNOWLEDGED', 'RESPONDING', 'NOT_AVAILABLE', 'ON_SCENE'];
      const outs = await Promise.all(statuses.map((s) => respond(w, a.id, id, s)));
      t.ok(outs.every((o) => o.result.accepted));
      const [line] = await w.storage.responses.responders(id);
      t.equal(line!.response.status, 'ON_SCENE');
      const events = (await w.allEvents()).filter((e) => e.type === 'incidentResponse').map((e) => e.attributes.status);
      const rank = ['ACKNOWLEDGED', 'NOT_AVAILABLE', 'RESPONDING', 'ON_SCENE'];
      t.ok(events.every((s, i) => i === 0 || rank.indexOf(s!) > rank.indexOf(events[i - 1]!)), `the events move forward only: ${events.join(', ')}`);
      t.equal(events.at(-1), 'ON_SCENE');
    });

    t.test('when an answer races a stand-down, then either it is refused cancelled or it was taken and then cancelled', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const a = await w.device('E1', cad);
      for (let i = 0; i < 6; i++) {
        const id = ok(t, await w.create(cad, `S-${i}`, ['E1'])).incident.id;
        const [answer, standDown] = await Promise.all([
          respond(w, a.id, id, 'RESPONDING'),
          i % 2 === 0 ? w.update(cad, { id }, { originId: `S-${i}`, resources: [] }) : w.remove(cad, id),
        ]);
        ok(t, standDown);
        const events: string[] = (await w.incidents.events({ ownerIds: null, incidentId: id, limit: 100, offset: 0 })).map((e) => e.type);
        if (answer.result.accepted) {
          t.same(events, ['incidentAssigned', 'incidentResponse', 'incidentDeassigned'].filter((e) => events.includes(e)), 'the answer came first');
          t.ok(events.includes('incidentResponse'));
        } else {
          t.equal(answer.result.reason, 'cancelled');
          t.notOk(events.includes('incidentResponse'));
        }
        const after = await respond(w, a.id, id, 'ON_SCENE');
        t.same(after.result.reason, 'cancelled', 'afterwards every answer is cancelled');
      }
    });

    t.test('when a device is deleted or the incident is unknown, then the responders leave it out or are empty', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const a = await w.device('E1', cad);
      const b = await w.device('E1', cad);
      const id = ok(t, await w.create(cad, 'X-1', ['E1'])).incident.id;
      await respond(w, b.id, id, 'ACKNOWLEDGED');
      await w.identity.deleteDevice(b.id);
      t.same((await w.storage.responses.responders(id)).map((r) => r.deviceId), [a.id]);
      t.same(await w.storage.responses.responders(id + 1000), []);
      const none = await respond(w, a.id, id + 1000, 'RESPONDING');
      t.same([none.result.accepted, none.result.reason, none.incident], [false, 'not-assigned', null]);
    });
  });
}

// The retention port's contract (ports/retention.ts): what a sweep removes, and what it must
// leave, on every adapter, through the ports only.
import type { Test } from 'tap';
import { decideResponse, type ResponseInput } from '../../../src/domain/response.js';
import { incidentClosedPayload } from '../../../src/domain/webhook-payloads.js';
import type { RetentionCutoffs } from '../../../src/ports/retention.js';
import { at, ok, world, type StorageFactory, type World } from './world.js';

/** cutoffs: rows before `retained` go (null: kept forever), sessions idle since before `idle`; now is `now` */
function cutoffs(retained: number | null, now = 1000, idle = -1000): RetentionCutoffs {
  return { retainedSince: retained === null ? null : at(retained), sessionsIdleSince: at(idle), now: at(now) };
}

/** every sweep to its end, as a pass runs them; what it removed per table, and how many batches and rows each batch removed */
async function sweepAll(w: World, c: RetentionCutoffs, limit = 500): Promise<{ removed: Record<string, number>; batches: number[] }> {
  const removed: Record<string, number> = {};
  const batches: number[] = [];
  for (const name of w.storage.retention.sweeps) {
    let from: number | null = 0;
    while (from !== null) {
      const batch = await w.storage.retention.sweep(name, c, limit, from);
      for (const [table, n] of Object.entries(batch.removed)) if (n > 0) removed[table] = (removed[table] ?? 0) + n;
      if (name === 'events') batches.push(batch.removed.events ?? 0);
      if (batches.length > 1000) throw new Error('a sweep that never ends');
      from = batch.next;
    }
  }
  return { removed, batches };
}

export async function retentionContract(t: Test, factory: StorageFactory): Promise<void> {
  await t.test('retention', async (t) => {
    t.test('when pushes are older than the retention, then exactly the settled ones go: a PENDING one older stays, a delivered one a second younger stays', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const a = await w.device('E1', cad);
      const b = await w.device('E2', cad);
      const c = await w.device('E3', cad);
      ok(t, await w.create(cad, 'EXPIRES', ['E3'], {}, at(1))); // c#1, expired below
      const sup = ok(t, await w.create(cad, 'SUPERSEDED', ['E1'], {}, at(2))); // a#1
      ok(t, await w.update(cad, { id: sup.incident.id }, { originId: 'SUPERSEDED', resources: [] }, at(3))); // a#1, a#2 superseded
      ok(t, await w.create(cad, 'PENDING', ['E1'], {}, at(5))); // a#3 stays PENDING
      ok(t, await w.create(cad, 'DELIVERED-OLD', ['E2'], {}, at(10))); // b#1
      t.equal(await w.outbox.ack(b.id, 1, at(11)), 1);
      t.same(await w.outbox.expireStep(at(4)), { expired: 1, more: false }, 'c#1 expires');
      ok(t, await w.create(cad, 'DELIVERED-YOUNG', ['E2'], {}, at(21))); // b#2, a second younger than the cutoff
      t.equal(await w.outbox.ack(b.id, 2, at(22)), 1);

      const { removed } = await sweepAll(w, cutoffs(20));
      t.same(removed, { events: 4, incidentVersions: 4 }, 'the expired, the two superseded and the old delivered push, and the versions only they used');
      const left = await w.allEvents();
      t.same(
        left.map((e) => [e.deviceId, e.state, e.eventTime]),
        [
          [a.id, 'PENDING', at(5)],
          [b.id, 'DELIVERED', at(21)],
        ],
        'the old PENDING push and the young delivered one stay',
      );
      t.same((await w.eventsOf(c.id)).length, 0);
      const pending = await w.pending(a.id);
      t.same(pending.map((p) => p.pushId), [3], 'the PENDING push is still delivered, with its pushId');
      t.equal(JSON.parse(pending[0]!.incident).originId, 'PENDING', 'and the incident as it was (its version stays)');
      t.same((await sweepAll(w, cutoffs(20))).removed, {}, 'a second pass finds nothing');
      t.same((await sweepAll(w, cutoffs(null))).removed, {}, 'with no retention (RETENTION_DAYS=0) nothing goes');
    });

    t.test('when the retention is 0 (kept forever), then no event or token goes, and sessions still expire', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const b = await w.device('E2', cad);
      ok(t, await w.create(cad, 'OLD', ['E2'], {}, at(1)));
      await w.outbox.ack(b.id, 1, at(2));
      ok(t, await w.create(cad, 'NEWER', ['E2'], {}, at(3)));
      const token = await w.identity.insertToken({ hash: 'h-revoked', userId: cad.id, createdAt: at(1), expiresAt: null });
      await w.identity.revokeToken(token.id, at(2));
      const session = await w.identity.insertSession({ hash: 's-idle', userId: cad.id, tokenId: null, impersonatorId: null, at: at(1) });
      t.same((await sweepAll(w, cutoffs(null, 1000, 10))).removed, { sessions: 1 });
      t.equal((await w.allEvents()).length, 2);
      t.ok(await w.identity.tokenById(token.id), 'the revoked token is kept');
      t.equal(await w.identity.sessionByHashValue(session.hash), undefined, 'the idle session is gone');
    });

    t.test('when tokens were revoked or expired before the retention, then they go with the sessions opened with them; live ones, young ones and the parents of live ones stay', async (t) => {
      const w = await world(t, factory);
      const user = await w.user('U');
      const device = await w.device('E1', user);
      const token = (hash: string, values: { expiresAt?: string | null; parentId?: number | null; deviceId?: number } = {}) =>
        w.identity.insertToken({ hash, userId: values.deviceId ? null : user.id, deviceId: values.deviceId ?? null, parentId: values.parentId ?? null, createdAt: at(0), expiresAt: values.expiresAt ?? null });
      const live = await token('live');
      const liveExpiring = await token('live-expiring', { expiresAt: at(2000) });
      const revokedOld = await token('revoked-old');
      await w.identity.revokeToken(revokedOld.id, at(5));
      const expiredOld = await token('expired-old', { expiresAt: at(6) });
      const deviceExpired = await token('device-expired', { deviceId: device.id, expiresAt: at(7) });
      const revokedYoung = await token('revoked-young');
      await w.identity.revokeToken(revokedYoung.id, at(30));
      const expiredYoung = await token('expired-young', { expiresAt: at(31) });
      // a parent revoked long ago with a live child (the rules never make one: this guards the cascade)
      const parent = await token('parent');
      await w.identity.revokeToken(parent.id, at(5));
      const child = await token('child', { parentId: parent.id });
      // a session opened with the old revoked token (refused since), seen recently: it goes with it
      const withToken = await w.identity.insertSession({ hash: 's-with-token', userId: user.id, tokenId: revokedOld.id, impersonatorId: null, at: at(35) });
      const idleOld = await w.identity.insertSession({ hash: 's-idle-old', userId: user.id, tokenId: null, impersonatorId: null, at: at(1) });
      const idleYoung = await w.identity.insertSession({ hash: 's-idle-young', userId: user.id, tokenId: null, impersonatorId: null, at: at(25) });

      const { removed } = await sweepAll(w, cutoffs(20, 100, 20));
      t.same(removed, { tokens: 3, sessions: 1 });
      const present = async (id: number) => (await w.identity.tokenById(id)) !== undefined;
      t.same(
        {
          live: await present(live.id),
          liveExpiring: await present(liveExpiring.id),
          revokedOld: await present(revokedOld.id),
          expiredOld: await present(expiredOld.id),
          deviceExpired: await present(deviceExpired.id),
          revokedYoung: await present(revokedYoung.id),
          expiredYoung: await present(expiredYoung.id),
          parent: await present(parent.id),
          child: await present(child.id),
        },
        { live: true, liveExpiring: true, revokedOld: false, expiredOld: false, deviceExpired: false, revokedYoung: true, expiredYoung: true, parent: true, child: true },
      );
      t.equal(await w.identity.sessionByHashValue(withToken.hash), undefined, 'the session opened with a removed token went with it');
      t.equal(await w.identity.sessionByHashValue(idleOld.hash), undefined, 'the idle session went');
      t.ok(await w.identity.sessionByHashValue(idleYoung.hash), 'a session seen since stays');
      t.same((await w.identity.listUserTokens(user.id)).map((r) => r.hash).sort(), ['child', 'expired-young', 'live', 'live-expiring', 'parent', 'revoked-young']);
    });

    t.test('when a device answered before the retention, then its answer record goes and the same responseId is decided again; a younger answer stays a repeat', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const a = await w.device('E1', cad);
      const { incident } = ok(t, await w.create(cad, 'ANSWERED', ['E1'], {}, at(1)));
      const answer = (responseId: string, status: ResponseInput['status'], now: number) => {
        const input: ResponseInput = { responseId, incidentId: incident.id, status };
        return w.storage.responses.respond(a.id, input, (ctx) => decideResponse(input, ctx), at(now));
      };
      const oldId = '00000000-0000-4000-8000-000000000001';
      const youngId = '00000000-0000-4000-8000-000000000002';
      t.equal((await answer(oldId, 'ACKNOWLEDGED', 5)).repeat, false);
      t.equal((await answer(youngId, 'RESPONDING', 25)).repeat, false);
      t.equal((await answer(oldId, 'ACKNOWLEDGED', 26)).repeat, true, 'before the sweep, the old responseId is a repeat');

      const { removed } = await sweepAll(w, cutoffs(20));
      t.equal(removed.responses, 1, 'the old answer record goes, the young one stays');
      t.equal((await answer(youngId, 'RESPONDING', 30)).repeat, true, 'the young responseId is still a repeat');
      const again = await answer(oldId, 'ACKNOWLEDGED', 31);
      t.equal(again.repeat, false, 'the old responseId is decided again');
      const [line] = await w.storage.responses.responders(incident.id);
      t.equal(line?.response.status, 'RESPONDING', 'and the assignment never moves backwards');
    });

    t.test('when webhook deliveries are older than the retention, then the settled ones go with their attempts and a PENDING one stays', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const hook = await w.storage.webhooks.create(cad.id, { url: 'https://cad.example.org/hooks', events: ['incident.closed'], enabled: true }, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', at(0), 20);
      if (hook === 'LIMIT') throw new Error('limit');
      const { incident } = ok(t, await w.create(cad, 'HOOKED', [], {}, at(1)));
      const event = (n: number) => incidentClosedPayload({ incident: { id: incident.id, originId: 'HOOKED', timeClosed: at(n) }, deleted: false, at: at(n) });
      t.equal(await w.storage.webhooks.enqueue(event(2)), 1);
      const [first] = await w.storage.webhooks.claim({ now: at(3), until: at(33), by: 'node-a:1', limit: 32, perWebhook: 4, choose: (c) => new Map(c.map((x) => [x.webhookId, x.ready])) });
      t.ok(await w.storage.webhooks.settle(first!, { at: at(3), status: 204, error: null, durationMs: 2 }, { state: 'DELIVERED' }));
      t.equal(await w.storage.webhooks.enqueue(event(4)), 1, 'an old one still PENDING');
      t.equal(await w.storage.webhooks.enqueue(event(25)), 1, 'a young one');

      const { removed } = await sweepAll(w, cutoffs(20));
      t.equal(removed.webhookDeliveries, 1, 'only the settled old delivery goes');
      const left = await w.storage.webhooks.deliveries(hook.id, 10, 0);
      t.equal(left.length, 2, 'the PENDING old one and the young one stay');
      t.ok(left.every((d) => d.state === 'PENDING'));
      t.same((await sweepAll(w, cutoffs(20))).removed, {}, 'a second pass finds nothing');
    });

    t.test('when a batch looks at 2 rows, then a backlog of 10 old pushes is swept in several batches of at most 2, and the young ones stay', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const d = await w.device('E1', cad);
      for (let i = 0; i < 10; i++) ok(t, await w.create(cad, `OLD-${i}`, ['E1'], {}, at(i)));
      await w.outbox.ack(d.id, 10, at(10));
      for (let i = 0; i < 2; i++) ok(t, await w.create(cad, `YOUNG-${i}`, ['E1'], {}, at(50 + i)));
      await w.outbox.ack(d.id, 12, at(60));
      const { removed, batches } = await sweepAll(w, cutoffs(20), 2);
      t.same(removed, { events: 10, incidentVersions: 10 });
      t.ok(batches.length >= 5, `${batches.length} batches`);
      t.ok(batches.every((n) => n <= 2), `each removed at most 2: ${batches.join(', ')}`);
      t.same((await w.eventsOf(d.id)).map((e) => e.eventTime), [at(50), at(51)]);
    });

    t.test('when a device’s pushes were swept, then its next push gets the next pushId, and a cursor or an ack after the swept ones still works', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const a = await w.device('E1', cad);
      const b = await w.device('E2', cad);
      for (let i = 0; i < 3; i++) ok(t, await w.create(cad, `A-${i}`, ['E1'], {}, at(i)));
      t.equal(await w.outbox.ack(a.id, 3, at(5)), 3);
      ok(t, await w.create(cad, 'B-young', ['E2'], {}, at(30))); // the newest event is another device's
      t.same((await sweepAll(w, cutoffs(20))).removed, { events: 3, incidentVersions: 3 });
      t.same(await w.eventsOf(a.id), [], 'every push of E1 is gone');
      t.same(await w.outbox.pendingAfter(a.id, 3, 10), [], 'a device reconnecting after pushId 3 gets nothing');
      t.same(await w.pushIds(a.id), [], 'nor a new socket');
      const next = ok(t, await w.create(cad, 'A-next', ['E1'], {}, at(40)));
      t.same((await w.outbox.pendingAfter(a.id, 3, 10)).map((p) => p.pushId), [4], 'the next push is pushId 4, after the cursor');
      t.same(await w.pushIds(a.id), [4], 'and from the start');
      t.equal((await w.pending(a.id))[0]!.eventId, next.events[0]!.id);
      t.ok(next.events[0]!.id > (await w.eventsOf(b.id))[0]!.id, 'its event id is new');
      t.equal(await w.outbox.ack(a.id, 4, at(41)), 1, 'its ack settles it');
      t.same(await w.pushIds(a.id), []);
      t.same((await w.eventsOf(b.id)).map((e) => e.state), ['PENDING'], 'the other device’s young push is untouched');
    });
  });
}

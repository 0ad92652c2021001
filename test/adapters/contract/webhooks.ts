// The webhook store's contract (ports/webhooks.ts): the deliveries the units of work write
// (incident.closed with the incident, incident.delivery with the ack and the TTL sweep,
// incident.response through the adapter's one function, here through `enqueue`), only for
// owners who may see the incident; and the sender's claim: a lease no other claim breaks, at
// most `perWebhook` in flight, in order per incident, retries and failures as settled.
import type { Test } from 'tap';
import type { WebhookEventType } from '../../../src/domain/webhook.js';
import { shareClaims } from '../../../src/domain/webhook-share.js';
import { incidentResponsePayload } from '../../../src/domain/webhook-payloads.js';
import type { ResponseStatus } from '../../../src/domain/response.js';
import type { ClaimedDelivery, ClaimOptions } from '../../../src/ports/webhooks.js';
import { checkedWebhook } from '../../fixtures/webhook-payloads.js';
import { at, ok, world, type StorageFactory, type World } from './world.js';

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

/** every webhook below its cap gives all it has ready (the store still stops at `limit` and the cap) */
const greedy: ClaimOptions['choose'] = (candidates) => new Map(candidates.map((c) => [c.webhookId, c.ready]));

function claimAt(n: number, extra: Partial<ClaimOptions> = {}): ClaimOptions {
  return { now: at(n), until: at(n + 30), by: `node-a:${n}`, limit: 32, perWebhook: 4, choose: greedy, ...extra };
}

async function hook(w: World, userId: number, events: WebhookEventType[] = ['incident.closed', 'incident.delivery', 'incident.response'], max = 20) {
  const created = await w.storage.webhooks.create(userId, { url: 'https://cad.example.org/hooks', events, enabled: true }, SECRET, w.now(), max);
  if (created === 'LIMIT') throw new Error('limit');
  return created;
}

/** the sender's rule (domain/webhook-share.ts) with room `limit`, this node holding `held` by owner */
function fair(limit: number, held: Record<number, number> = {}, perOwner = limit): Partial<ClaimOptions> {
  const heldBy = new Map(Object.entries(held).map(([k, v]) => [Number(k), v]));
  return { limit, choose: (candidates) => shareClaims(candidates, { room: limit, perWebhook: 4, perOwner, held: heldBy }) };
}

/** the bodies as stored, each checked against openapi.yaml's `webhooks` entry for its type */
const payloads = (claimed: readonly ClaimedDelivery[]) => claimed.map((c) => checkedWebhook(c.payload));

/** an incident.response body as the response unit of work builds it (device and event made up: enqueue takes any) */
const answered = (incidentId: number, originId: string, timestamp: string, status: ResponseStatus = 'ACKNOWLEDGED') =>
  incidentResponsePayload({
    incident: { id: incidentId, originId },
    event: { id: 1, deviceId: 1, eventTime: timestamp },
    callsign: 'E1',
    status,
    responseId: '8e03978e-40d5-43e8-bc93-6894a57f9324',
    time: timestamp,
  });

export async function webhookContract(t: Test, factory: StorageFactory): Promise<void> {
  await t.test('webhooks', async (t) => {
    t.test('when an incident is closed or deleted while open, then its owner’s and an administrator’s webhooks get incident.closed, a stranger’s none', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const stranger = await w.user('Other');
      const admin = await w.admin();
      await w.device('E1', cad);
      const mine = await hook(w, cad.id);
      const theirs = await hook(w, stranger.id);
      const admins = await hook(w, admin.id, ['incident.closed']);
      const r = ok(t, await w.create(cad, 'W-1', ['E1']));
      const id = r.incident.id;
      ok(t, await w.update(cad, { id }, { originId: 'W-1', resources: ['E1'], description: 'still open' }));
      t.same(await w.storage.webhooks.claim(claimAt(1000)), [], 'no delivery while it stays open');
      ok(t, await w.update(cad, { id }, { originId: 'W-1', status: 'CLOSED', resources: [] }));
      ok(t, await w.update(cad, { id }, { originId: 'W-1', status: 'CLOSED', resources: [], description: 'closed again' }));
      const claimed = await w.storage.webhooks.claim(claimAt(1000));
      t.same(claimed.map((c) => c.webhookId).sort(), [mine.id, admins.id].sort(), 'one each for the owner and the administrator, none for a closed incident updated');
      t.notOk(claimed.some((c) => c.webhookId === theirs.id), 'never a webhook of a user who cannot see it');
      for (const p of payloads(claimed)) t.match(p, { type: 'incident.closed', data: { incidentId: id, originId: 'W-1', deleted: false } });
      t.equal(new Set(claimed.map((c) => c.msgId)).size, 2, 'a webhook-id per delivery');
      const second = ok(t, await w.create(cad, 'W-2', []));
      ok(t, await w.remove(cad, second.incident.id));
      const deleted = await w.storage.webhooks.claim(claimAt(1000, { by: 'node-a:x' }));
      t.equal(deleted.length, 2);
      for (const p of payloads(deleted)) t.match(p, { type: 'incident.closed', data: { deleted: true } });
      for (const p of payloads(deleted)) t.match(p, { type: 'incident.closed', data: { incidentId: second.incident.id, originId: 'W-2', deleted: true } });
    });

    t.test('when a device acks a push or a push expires, then incident.delivery is written with it, for webhooks that subscribe', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const e1 = await w.device('E1', cad);
      const e2 = await w.device('E2', cad);
      const wanted = await hook(w, cad.id, ['incident.delivery']);
      await hook(w, cad.id, ['incident.closed']);
      const r = ok(t, await w.create(cad, 'D-1', ['E1', 'E2']));
      t.equal(await w.outbox.ack(e1.id, 1, w.now()), 1);
      const acked = await w.storage.webhooks.claim(claimAt(1000));
      t.equal(acked.length, 1, 'one delivery, for the webhook that wants incident.delivery');
      t.equal(acked[0]!.webhookId, wanted.id);
      t.match(payloads(acked)[0], { type: 'incident.delivery', data: { incidentId: r.incident.id, originId: 'D-1', deviceId: e1.id, callsign: 'E1', state: 'DELIVERED', eventType: 'incidentAssigned' } });
      t.equal(await w.outbox.ack(e1.id, 1, w.now()), 0);
      await w.outbox.expireStep(at(5000), undefined, at(1005));
      const expired = await w.storage.webhooks.claim(claimAt(1010, { by: 'node-a:y' }));
      t.equal(expired.length, 0, 'the next of the incident waits for the one in flight');
      await w.storage.webhooks.settle(acked[0]!, { at: at(1001), status: 200, error: null, durationMs: 3 }, { state: 'DELIVERED' });
      const after = await w.storage.webhooks.claim(claimAt(1011, { by: 'node-a:z' }));
      t.match(payloads(after), [{ type: 'incident.delivery', data: { deviceId: e2.id, state: 'EXPIRED' } }]);
      t.equal(await w.outbox.ack(e2.id, 1, w.now()), 0, 'an expired push is not acked');
    });

    t.test('when an event is enqueued (incident.response), then only webhooks whose owner sees the incident get it: linked, a manager of a linked user, an administrator', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const manager = await w.user('Manager', { userLimit: 5 });
      await w.identity.linkManagedUser(manager.id, cad.id);
      const stranger = await w.user('Other');
      const admin = await w.admin();
      const disabledOwner = await w.user('Gone');
      const r = ok(t, await w.create(cad, 'R-1', []));
      await w.identity.linkIncident(disabledOwner.id, r.incident.id);
      for (const u of [cad, manager, stranger, admin, disabledOwner]) await hook(w, u.id, ['incident.response']);
      await hook(w, cad.id, ['incident.closed']);
      await w.identity.updateUser(disabledOwner.id, { disabled: true });
      const n = await w.storage.webhooks.enqueue(answered(r.incident.id, 'R-1', w.now(), 'RESPONDING'));
      t.equal(n, 3, 'the creator, its manager and the administrator; not the stranger, nor a disabled user');
      const claimed = await w.storage.webhooks.claim(claimAt(1000));
      t.equal(claimed.length, 3);
      for (const p of payloads(claimed)) t.match(p, { type: 'incident.response', data: { incidentId: r.incident.id, originId: 'R-1', status: 'RESPONDING' } });
    });

    t.test('when deliveries are claimed, then at most perWebhook are in flight, an incident’s wait for its earlier one, and a lease is never taken twice', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const hookA = await hook(w, cad.id, ['incident.response']);
      const ids: number[] = [];
      for (let i = 0; i < 6; i++) ids.push(ok(t, await w.create(cad, `C-${i}`, [])).incident.id);
      const event = (incidentId: number, status: ResponseStatus) => w.storage.webhooks.enqueue(answered(incidentId, 'x', w.now(), status));
      for (const id of ids) await event(id, 'ACKNOWLEDGED');
      await event(ids[0]!, 'RESPONDING');
      const first = await w.storage.webhooks.claim(claimAt(1000));
      t.equal(first.length, 4, 'four of the six due, of six incidents');
      t.same(await w.storage.webhooks.claim(claimAt(1001, { by: 'node-b:1' })), [], 'another node gets none while four are in flight');
      await w.storage.webhooks.settle(first[0]!, { at: at(1002), status: 204, error: null, durationMs: 1 }, { state: 'DELIVERED' });
      const next = await w.storage.webhooks.claim(claimAt(1003, { by: 'node-b:2' }));
      t.equal(next.length, 1, 'one more once one is settled');
      const all = [...first, ...next];
      const statuses = payloads(all).filter((p) => p.data.incidentId === ids[0]).map((p) => p.data.status);
      t.same(statuses, first[0]!.incidentId === ids[0] ? ['ACKNOWLEDGED', 'RESPONDING'].slice(0, statuses.length) : ['ACKNOWLEDGED'], 'an incident’s second waits for its first');
      t.notOk(payloads(first).some((p) => p.data.status === 'RESPONDING'), 'never the later one of an incident with the earlier one in flight');
      // the lease: past its end another node claims the rest of the in-flight ones; the first holder’s settle is then refused
      const late = await w.storage.webhooks.claim(claimAt(1040, { by: 'node-b:3', perWebhook: 10 }));
      t.ok(late.some((c) => c.id === first[1]!.id), 'a lease that ran out is claimed again');
      t.equal(await w.storage.webhooks.settle(first[1]!, { at: at(1041), status: 200, error: null, durationMs: 1 }, { state: 'DELIVERED' }), false, 'the old holder can no longer settle it');
      const [mine] = late.filter((c) => c.id === first[1]!.id);
      t.equal(await w.storage.webhooks.settle(mine!, { at: at(1042), status: 200, error: null, durationMs: 1 }, { state: 'DELIVERED' }), true);
      t.equal(hookA.id, first[0]!.webhookId);
    });

    t.test('when two nodes claim at the same moment, then no delivery is handed to both, and together they stay within perWebhook', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      await hook(w, cad.id, ['incident.response']);
      await hook(w, cad.id, ['incident.response']);
      for (let i = 0; i < 6; i++) {
        const id = ok(t, await w.create(cad, `N-${i}`, [])).incident.id;
        await w.storage.webhooks.enqueue(answered(id, `N-${i}`, w.now()));
      }
      const claims = await Promise.all(['node-a', 'node-b', 'node-c'].map((by) => w.storage.webhooks.claim(claimAt(1000, { by, perWebhook: 4 }))));
      const ids = claims.flat().map((c) => c.id);
      t.equal(new Set(ids).size, ids.length, 'every delivery to one node only');
      const perHook = new Map<number, number>();
      for (const c of claims.flat()) perHook.set(c.webhookId, (perHook.get(c.webhookId) ?? 0) + 1);
      t.ok([...perHook.values()].every((n) => n <= 4), 'at most four of a webhook in flight');
      const rest = await w.storage.webhooks.claim(claimAt(1001, { by: 'node-d', perWebhook: 100 }));
      t.equal(ids.length + rest.length, 12, 'and none lost: the others are claimed later');
    });

    t.test('when a webhook is at its cap, then it takes none of the room: with room for one, another webhook’s delivery is claimed (issue 36)', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const other = await w.user('Other');
      const busy = await hook(w, cad.id, ['incident.response']);
      const quiet = await hook(w, other.id, ['incident.response']);
      for (let i = 0; i < 6; i++) {
        const id = ok(t, await w.create(cad, `B-${i}`, [])).incident.id;
        await w.storage.webhooks.enqueue(answered(id, `B-${i}`, w.now()));
      }
      const first = await w.storage.webhooks.claim(claimAt(1000, fair(32)));
      t.same(first.map((c) => c.webhookId), [busy.id, busy.id, busy.id, busy.id], 'the busy webhook at its cap of four, two more of it due');
      t.ok(first.every((c) => c.ownerId === cad.id), 'each claimed delivery names its owner');
      const id = ok(t, await w.create(other, 'Q-1', [])).incident.id;
      await w.storage.webhooks.enqueue(answered(id, 'Q-1', w.now()));
      const next = await w.storage.webhooks.claim(claimAt(1001, { by: 'node-a:room-for-one', ...fair(1) }));
      t.same(next.map((c) => [c.webhookId, c.ownerId]), [[quiet.id, other.id]], 'the webhook at its cap (the lower id) did not use the one place');
    });

    t.test('when owners have more ready than the room, then it is shared by owner, fewest held first, and no owner past perOwner (issue 36)', async (t) => {
      const w = await world(t, factory);
      const many = await w.user('Many');
      const late = await w.user('Late');
      const manyHooks = [];
      for (let i = 0; i < 5; i++) manyHooks.push(await hook(w, many.id, ['incident.closed']));
      const lateHook = await hook(w, late.id, ['incident.closed']);
      // three incidents of each owner closed: 15 deliveries of Many's (5 webhooks), 3 of Late's
      for (const [u, prefix] of [[many, 'M'], [late, 'L']] as const) {
        for (let i = 0; i < 3; i++) {
          const id = ok(t, await w.create(u, `${prefix}-${i}`, [])).incident.id;
          ok(t, await w.update(u, { id }, { originId: `${prefix}-${i}`, status: 'CLOSED', resources: [] }));
        }
      }
      const two = await w.storage.webhooks.claim(claimAt(1000, fair(2)));
      t.same(two.map((c) => c.ownerId).sort(), [many.id, late.id].sort(), 'room for two: one each, not two of the lower ids');
      const four = await w.storage.webhooks.claim(claimAt(1001, { by: 'node-a:4', ...fair(4, { [many.id]: 9, [late.id]: 1 }, 10) }));
      const of = (u: { id: number }) => four.filter((c) => c.ownerId === u.id).map((c) => c.webhookId);
      t.same(of(late), [lateHook.id, lateHook.id], 'the owner holding fewer gets the room while it has deliveries ready (Late: its two left)');
      t.equal(of(many).length, 1, 'Many, holding 9 of perOwner 10, one more: room for four, three claimed…');
      const capped = await w.storage.webhooks.claim(claimAt(1002, { by: 'node-a:cap', ...fair(8, { [many.id]: 10 }, 10) }));
      t.same(capped, [], '…and none once it holds perOwner');
      const rest = await w.storage.webhooks.claim(claimAt(1003, { by: 'node-a:rest', ...fair(32) }));
      t.equal(new Set(rest.map((c) => c.webhookId)).size, 5, 'the rest spread over Many’s five webhooks');
      t.ok(rest.every((c) => c.ownerId === many.id));
      t.equal(manyHooks.length, 5);
    });

    t.test('when a webhook’s owner is expired or disabled, then no delivery is written for it and none already written is claimed until it works again (issue 36)', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const expired = await w.user('Expired', { expirationTime: at(500) });
      const disabled = await w.user('Disabled');
      const r = ok(t, await w.create(cad, 'X-1', [])).incident;
      for (const u of [expired, disabled]) await w.identity.linkIncident(u.id, r.id);
      const expiredHook = await hook(w, expired.id, ['incident.response']);
      const disabledHook = await hook(w, disabled.id, ['incident.response']);
      const event = (n: number) => w.storage.webhooks.enqueue(answered(r.id, 'X-1', at(n)));
      t.equal(await event(400), 2, 'before the expiry, with both owners working: one delivery each');
      await w.identity.updateUser(disabled.id, { disabled: true });
      t.equal(await event(600), 0, 'past the expiry, and with the other owner disabled: none written');
      t.same(await w.storage.webhooks.claim(claimAt(601)), [], 'the deliveries written before wait: nothing is sent to an expired or disabled owner');
      t.match(await w.storage.webhooks.deliveries(expiredHook.id, 10, 0), [{ state: 'PENDING', attempts: [] }], 'listed PENDING, never attempted');
      await w.identity.updateUser(disabled.id, { disabled: false });
      await w.identity.updateUser(expired.id, { expirationTime: null });
      const resumed = await w.storage.webhooks.claim(claimAt(602, { by: 'node-a:back' }));
      t.same(resumed.map((c) => c.webhookId).sort(), [expiredHook.id, disabledHook.id].sort(), 'sent once the owners work again');
    });

    t.test('when an attempt fails, then the delivery waits for its next attempt, attempts are listed, and a 410 disables the webhook until it is enabled again', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const h = await hook(w, cad.id, ['incident.response']);
      const a = ok(t, await w.create(cad, 'F-1', [])).incident.id;
      const b = ok(t, await w.create(cad, 'F-2', [])).incident.id;
      await w.storage.webhooks.enqueue(answered(a, 'F-1', at(100)));
      const [d] = await w.storage.webhooks.claim(claimAt(1000));
      await w.storage.webhooks.settle(d!, { at: at(1000), status: 500, error: null, durationMs: 5 }, { state: 'PENDING', nextAttemptAt: at(1005) });
      t.same(await w.storage.webhooks.claim(claimAt(1004, { by: 'n:1' })), [], 'not before its next attempt');
      const [again] = await w.storage.webhooks.claim(claimAt(1005, { by: 'n:2' }));
      t.equal(again?.id, d!.id);
      t.equal(again?.attempts, 1);
      t.equal(again?.msgId, d!.msgId, 'the same webhook-id on every attempt');
      await w.storage.webhooks.settle(again!, { at: at(1005), status: 410, error: null, durationMs: 5 }, { state: 'FAILED', disableWebhook: true, why: 'the receiver answered 410 Gone' });
      const [listed] = await w.storage.webhooks.deliveries(h.id, 10, 0);
      t.match(listed, { id: d!.id, state: 'FAILED', attempts: [{ status: 500 }, { status: 410 }] });
      const disabled = await w.storage.webhooks.get(h.id);
      t.equal(disabled?.enabled, false);
      t.match(disabled?.disabledReason, /410/);
      await w.storage.webhooks.enqueue(answered(b, 'F-2', at(1006)));
      t.equal((await w.storage.webhooks.deliveries(h.id, 10, 0)).length, 1, 'a disabled webhook gets no new deliveries');
      const redelivered = await w.storage.webhooks.redeliver(h.id, d!.id, at(1007));
      t.match(redelivered, { state: 'PENDING', msgId: d!.msgId, attempts: [] });
      t.same(await w.storage.webhooks.claim(claimAt(1010, { by: 'n:3' })), [], 'nothing is sent to a disabled webhook');
      const enabled = await w.storage.webhooks.update(h.id, { url: h.url, events: h.events, enabled: true });
      t.equal(enabled?.disabledReason, null, 'enabling clears the reason');
      const [resent] = await w.storage.webhooks.claim(claimAt(1011, { by: 'n:4' }));
      t.equal(resent?.id, redelivered!.id);
      t.equal(await w.storage.webhooks.redeliver(h.id + 1000, d!.id, at(1012)), undefined, 'a delivery of another webhook is not found');
    });

    t.test('when a secret is rotated, then both sign until the previous one’s time is up', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const h = await hook(w, cad.id, ['incident.response']);
      const id = ok(t, await w.create(cad, 'S-1', [])).incident.id;
      const rotated = await w.storage.webhooks.rotate(h.id, 'whsec_bmV3LXNlY3JldC1uZXctc2VjcmV0LW5ldy1zZWNyZXQ=', at(2000));
      t.equal(rotated?.previousSecret, SECRET);
      await w.storage.webhooks.enqueue(answered(id, 'S-1', at(100)));
      const [d] = await w.storage.webhooks.claim(claimAt(1000));
      t.same(d?.secrets, ['whsec_bmV3LXNlY3JldC1uZXctc2VjcmV0LW5ldy1zZWNyZXQ=', SECRET]);
      await w.storage.webhooks.release(d!);
      const [later] = await w.storage.webhooks.claim(claimAt(2000, { by: 'n:9' }));
      t.same(later?.secrets, ['whsec_bmV3LXNlY3JldC1uZXctc2VjcmV0LW5ldy1zZWNyZXQ='], 'the previous one no longer signs');
    });

    t.test('when one user creates webhooks at once, then no more than the limit are stored', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const results = await Promise.all(
        Array.from({ length: 8 }, () => w.storage.webhooks.create(cad.id, { url: 'https://cad.example.org/', events: ['incident.closed'], enabled: true }, SECRET, w.now(), 3)),
      );
      t.equal(results.filter((r) => r !== 'LIMIT').length, 3);
      t.equal((await w.storage.webhooks.list([cad.id])).length, 3);
      t.same(await w.storage.webhooks.list([]), []);
      t.equal((await w.storage.webhooks.list(null)).length, 3);
      t.equal(await w.storage.webhooks.delete(results.find((r) => r !== 'LIMIT')!.id), true);
      t.equal(await w.storage.webhooks.get(999_999), undefined);
    });
  });
}

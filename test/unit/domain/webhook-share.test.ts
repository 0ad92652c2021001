import t from 'tap';
import { shareByOwner, shareClaims, type ShareCandidate, type ShareLimits } from '../../../src/domain/webhook-share.js';

const limits = (over: Partial<ShareLimits> = {}): ShareLimits => ({ room: 32, perWebhook: 4, perOwner: 16, held: new Map(), ...over });
const hook = (webhookId: number, ownerId: number, ready: number, inFlight = 0): ShareCandidate => ({ webhookId, ownerId, ready, inFlight });
const plain = (m: Map<number, number>) => Object.fromEntries(m);

t.test('when a webhook is at its cap, then it is given nothing and uses none of the room', async (t) => {
  const out = shareClaims([hook(1, 1, 4, 4), hook(2, 1, 3, 2), hook(3, 2, 1)], limits({ room: 2 }));
  t.same(plain(out), { 2: 1, 3: 1 }, 'webhook 1 (full) skipped; the room goes to the others');
  t.same(plain(shareClaims([hook(1, 1, 4, 4)], limits())), {}, 'nothing at all when every webhook is full');
});

t.test('when owners want more than the room, then each gets one in turn, fewest held first, ties to the lower id', async (t) => {
  const many = [1, 2, 3, 4, 5].map((id) => hook(id, 7, 4));
  t.same(plain(shareClaims([...many, hook(9, 8, 4)], limits({ room: 2 }))), { 1: 1, 9: 1 }, 'one each, not two of the lower ids');
  t.same(plain(shareClaims([...many, hook(9, 8, 4)], limits({ room: 3, held: new Map([[7, 5]]) }))), { 9: 3 }, 'the owner holding fewer first, while it has any ready');
  t.same(plain(shareClaims(many, limits({ room: 7 }))), { 1: 2, 2: 2, 3: 1, 4: 1, 5: 1 }, 'within an owner, its webhooks in turn');
});

t.test('when an owner holds perOwner, then it gets no more, even with room left', async (t) => {
  t.same(plain(shareClaims([hook(1, 1, 4), hook(2, 1, 4)], limits({ room: 8, perOwner: 3 }))), { 1: 2, 2: 1 });
  t.same(plain(shareClaims([hook(1, 1, 4)], limits({ perOwner: 3, held: new Map([[1, 3]]) }))), {});
});

t.test('when a webhook has fewer ready than its cap allows, then it is given no more than it has', async (t) => {
  t.same(plain(shareClaims([hook(1, 1, 1), hook(2, 2, 0)], limits())), { 1: 1 });
  t.same(plain(shareClaims([hook(1, 1, 4, 1)], limits())), { 1: 3 }, 'the cap counts what is in flight');
});

t.test('when wake steps of several owners are due and the room is short, then each owner gets one in turn, fewest held first, at most perOwner, never more than it has ready', async (t) => {
  const ready = new Map([
    [1, 50], // a flood
    [2, 1],
    [3, 2],
  ]);
  t.same([...shareByOwner(ready, { room: 4, perOwner: 2, held: new Map() })].sort(), [
    [1, 2],
    [2, 1],
    [3, 1],
  ]);
  t.same([...shareByOwner(ready, { room: 8, perOwner: 2, held: new Map([[1, 2]]) })].sort(), [
    [2, 1],
    [3, 2],
  ], 'the flooding owner at its cap gets nothing; the others all they have');
  t.same([...shareByOwner(new Map([[1, 50]]), { room: 3, perOwner: 8, held: new Map() })], [[1, 3]], 'never more than the room');
  t.same(shareByOwner(new Map(), { room: 3, perOwner: 2, held: new Map() }).size, 0);
});

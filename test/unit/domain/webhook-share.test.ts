import t from 'tap';
import { laneKey, shareLanes, shareClaims, type LaneReady, type ShareCandidate, type ShareLimits } from '../../../src/domain/webhook-share.js';

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
  const none = { held: new Map<number, number>(), heldLanes: new Map<string, number>() };
  const ready: LaneReady[] = [
    { ownerId: 1, lane: 'wake', ready: 50 }, // a flood
    { ownerId: 2, lane: 'wake', ready: 1 },
    { ownerId: 3, lane: 'sms', ready: 2 },
  ];
  const plainLanes = (l: LaneReady[]) => l.map((x) => `${x.ownerId}:${x.lane}=${x.ready}`).sort();
  t.same(plainLanes(shareLanes(ready, { room: 4, perOwner: 2, perLane: 2, ...none })), ['1:wake=2', '2:wake=1', '3:sms=1']);
  t.same(plainLanes(shareLanes(ready, { room: 8, perOwner: 2, perLane: 2, ...none, held: new Map([[1, 2]]) })), ['2:wake=1', '3:sms=2'], 'the flooding owner at its cap gets nothing; the others all they have');
  t.same(plainLanes(shareLanes([{ ownerId: 1, lane: 'wake', ready: 50 }], { room: 3, perOwner: 8, perLane: 8, ...none })), ['1:wake=3'], 'never more than the room');
  t.same(shareLanes([], { room: 3, perOwner: 2, perLane: 2, ...none }), []);
});

t.test('when one owner’s wake-ups fill their lane (a provider that hangs), then its SMS and calls still get room', async (t) => {
  const ready: LaneReady[] = [
    { ownerId: 1, lane: 'wake', ready: 40 },
    { ownerId: 1, lane: 'sms', ready: 3 },
    { ownerId: 1, lane: 'voice', ready: 1 },
  ];
  const held = new Map([[1, 16]]);
  const heldLanes = new Map([[laneKey(1, 'wake'), 16]]);
  t.same(
    shareLanes(ready, { room: 48, perOwner: 32, perLane: 16, held, heldLanes }).map((x) => [x.lane, x.ready]),
    [
      ['sms', 3],
      ['voice', 1],
    ],
    'the wake-ups’ lane at its cap takes nothing; the escalation all it has',
  );
  t.same(
    shareLanes(ready, { room: 6, perOwner: 32, perLane: 16, held: new Map(), heldLanes: new Map() }).map((x) => [x.lane, x.ready]),
    [
      ['wake', 3],
      ['sms', 2],
      ['voice', 1],
    ],
    'a short room goes round the lanes, fewest held first',
  );
});

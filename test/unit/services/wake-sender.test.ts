// The wake sender (services/wake-sender.ts) over a store and channels of the test's own: what it
// sends for a claimed step, when it stops instead, how it tries again, and what it records.
import t from 'tap';
import { WakeSender, type WakeMetrics } from '../../../src/services/wake-sender.js';
import type { ClaimedStep, StepEnd, WakeStepStorePort } from '../../../src/ports/wake-steps.js';
import type { WakeChannel, WakeKind, WakeMessage, WakeOutcome, WakeTarget } from '../../../src/ports/wake.js';

const NOW = '2026-11-29T05:00:10.000Z';
const clock = { now: () => new Date(NOW) };
const quiet = { warn: () => {}, error: () => {}, debug: () => {} };

function step(over: Partial<ClaimedStep> = {}): ClaimedStep {
  return {
    id: 1,
    ownerId: 5,
    by: 'x',
    step: 'wake',
    dueAt: '2026-11-29T05:00:05.000Z',
    eventId: 9,
    facts: { pushState: 'PENDING', answered: false, assigned: true, writtenAt: '2026-11-29T05:00:00.000Z' },
    message: { incidentId: 7, originId: 'CAD-7', type: 'FIRE', priority: 1, pushId: 3, deviceId: 2 },
    targets: [],
    ...over,
  };
}

class Store implements WakeStepStorePort {
  queued: ClaimedStep[] = [];
  ends: [number, StepEnd][] = [];
  recorded: [number, number, string][] = [];
  removed: number[] = [];
  async claim(): Promise<ClaimedStep[]> {
    const out = this.queued;
    this.queued = [];
    return out.map((s) => ({ ...s }));
  }
  acceptedAt: (string | null)[] = [];
  async recordTarget(s: { id: number }, targetId: number, outcome: string, kind: string, acceptedAt: string | null): Promise<boolean> {
    this.recorded.push([s.id, targetId, `${kind}:${outcome}`]);
    this.acceptedAt.push(acceptedAt);
    return true;
  }
  async settle(s: { id: number }, end: StepEnd): Promise<boolean> {
    this.ends.push([s.id, end]);
    return true;
  }
  released: number[] = [];
  async release(s: { id: number }): Promise<boolean> {
    this.released.push(s.id);
    return true;
  }
  resumed: string[] = [];
  async releaseNode(nodeId: string): Promise<number> {
    this.resumed.push(nodeId);
    return 2;
  }
  /** the targets' port's part the sender uses */
  readonly targets = { removeDead: async (id: number) => (this.removed.push(id), true) };
}

/** a channel answering from a script, one answer per send, noting what it was sent */
function channel<K extends WakeKind>(kind: K, answers: WakeOutcome[]): WakeChannel<K> & { sent: { target: WakeTarget; message: WakeMessage }[] } {
  const sent: { target: WakeTarget; message: WakeMessage }[] = [];
  return {
    kind,
    sent,
    async send(target, message) {
      sent.push({ target, message });
      return answers.shift() ?? { outcome: 'accepted', status: 201 };
    },
  };
}

function sender(store: Store, channels: ConstructorParameters<typeof WakeSender>[2], metrics?: WakeMetrics, waits: number[] = []) {
  return new WakeSender(store, store.targets, channels, clock, quiet, { nodeId: 'n1', pushTtlMs: 3600_000, sleep: async (ms) => void waits.push(ms) }, metrics);
}

const webpush: WakeTarget = { kind: 'webpush', subscription: { endpoint: 'https://push.example/1', keys: { p256dh: 'a', auth: 'b' } } };
const fcm: WakeTarget = { kind: 'fcm', token: 'tok' };
const apns: WakeTarget = { kind: 'apns', token: 'ab'.repeat(32), critical: true };

t.test('when a due step is claimed and the ladder still runs, then each target gets one wake-up naming the incident, with the push’s remaining lifetime', async (t) => {
  const store = new Store();
  store.queued = [step({ targets: [{ id: 11, target: webpush }, { id: 12, target: fcm }] })];
  const wp = channel('webpush', []);
  const f = channel('fcm', []);
  const counted: string[] = [];
  const s = sender(store, { webpush: wp, fcm: f }, { wakeAttempt: (k, o) => counted.push(`${k}:${o}`), wakeLatency: (k, sec) => counted.push(`${k} after ${sec}s`) });
  await s.round();
  await s.idle();
  await s.stop();
  t.same(wp.sent.map((x) => x.message), [{ incidentId: 7, originId: 'CAD-7', type: 'FIRE', priority: 1, pushId: 3, deviceId: 2, ttlSeconds: 3590 }]);
  t.equal(f.sent.length, 1);
  t.same(store.recorded, [[1, 11, 'webpush:accepted'], [1, 12, 'fcm:accepted']]);
  t.same(store.ends, [[1, { state: 'DONE', outcome: '' }]], 'each target’s result was recorded as it came');
  t.same(counted.sort(), ['fcm after 5s', 'fcm:accepted', 'webpush after 5s', 'webpush:accepted'], 'attempts by channel and outcome, and the time from due to acceptance');
});

t.test('when the push was acknowledged, answered, stood down or expired, then the step is settled STOPPED and nothing is sent', async (t) => {
  const cases: [Partial<ClaimedStep['facts']>, string][] = [
    [{ pushState: 'DELIVERED' }, 'acknowledged'],
    [{ answered: true }, 'answered'],
    [{ assigned: false }, 'stood-down'],
    [{ writtenAt: '2026-11-29T03:00:00.000Z' }, 'expired'],
  ];
  for (const [facts, reason] of cases) {
    const store = new Store();
    store.queued = [step({ facts: { ...step().facts, ...facts }, targets: [{ id: 11, target: webpush }] })];
    const wp = channel('webpush', []);
    const s = sender(store, { webpush: wp });
    await s.round();
  await s.idle();
    await s.stop();
    t.same(store.ends, [[1, { state: 'STOPPED', outcome: `stopped:${reason}` }]], reason);
    t.equal(wp.sent.length, 0, `${reason}: nothing sent`);
  }
});

t.test('when a provider fails for now, then the target is tried again after the backoff or its Retry-After, at most 3 times', async (t) => {
  const store = new Store();
  store.queued = [step({ targets: [{ id: 11, target: webpush }, { id: 12, target: apns }] })];
  const wp = channel('webpush', [
    { outcome: 'retry', status: 503, detail: 'unavailable' },
    { outcome: 'retry', status: 429, detail: 'slow down', retryAfterMs: 2000 },
  ]);
  const ap = channel('apns', [
    { outcome: 'retry', status: 500, detail: 'x' },
    { outcome: 'retry', status: 500, detail: 'x' },
    { outcome: 'retry', status: 500, detail: 'x' },
  ]);
  const waits: number[] = [];
  const s = sender(store, { webpush: wp, apns: ap }, undefined, waits);
  await s.round();
  await s.idle();
  await s.stop();
  t.equal(wp.sent.length, 3, 'accepted on the third try');
  t.equal(ap.sent.length, 3, 'three tries, no more');
  t.same(waits.sort((a, b) => a - b), [1000, 1000, 2000, 4000], 'webpush waited 1 s then its Retry-After; apns 1 s then 4 s');
  t.same(store.recorded.sort((a, b) => a[1] - b[1]), [[1, 11, 'webpush:accepted'], [1, 12, 'apns:failed']]);
});

t.test('when a target is gone, then it is removed; rejected, it is not tried again; a channel not configured sends nothing', async (t) => {
  const store = new Store();
  const sms: WakeTarget = { kind: 'sms', phone: '+447700900123' };
  store.queued = [step({ targets: [{ id: 11, target: webpush }, { id: 12, target: fcm }, { id: 13, target: sms }] })];
  const wp = channel('webpush', [{ outcome: 'gone', status: 410, detail: 'expired subscription' }]);
  const f = channel('fcm', [{ outcome: 'rejected', status: 400, detail: 'bad' }]);
  const s = sender(store, { webpush: wp, fcm: f });
  await s.round();
  await s.idle();
  await s.stop();
  t.same(store.removed, [11]);
  t.equal(f.sent.length, 1);
  t.same(store.recorded.sort((a, b) => a[1] - b[1]), [[1, 11, 'webpush:gone'], [1, 12, 'fcm:rejected'], [1, 13, 'sms:not-configured']]);
});

t.test('when a step has no target left (all reached before a takeover), then it is settled DONE with none', async (t) => {
  const store = new Store();
  store.queued = [step()];
  const s = sender(store, {});
  await s.round();
  await s.idle();
  await s.stop();
  t.same(store.ends, [[1, { state: 'DONE', outcome: 'no target' }]]);
});

t.test('when the node stops while a wake-up is still unanswered after the drain, then the step is given back unfinished: nothing recorded failed, claimable at once by the next claim', async (t) => {
  const store = new Store();
  store.queued = [step({ targets: [{ id: 11, target: webpush }, { id: 12, target: fcm }] })];
  // the push service hangs until the send is aborted, as a real one cut off by the stop; FCM accepts
  let sent = 0;
  const hanging: WakeChannel<'webpush'> = {
    kind: 'webpush',
    send: (_target, _message, signal) =>
      new Promise((resolve) => {
        sent++;
        signal?.addEventListener('abort', () => resolve({ outcome: 'retry', status: null, detail: 'aborted' }), { once: true });
      }),
  };
  const s = new WakeSender(store, store.targets, { webpush: hanging, fcm: channel('fcm', []) }, clock, quiet, { nodeId: 'n1', pushTtlMs: 3600_000, drainMs: 50 });
  await s.round();
  while (sent === 0) await new Promise((r) => setTimeout(r, 5));
  await s.stop();
  t.same(store.recorded, [[1, 12, 'fcm:accepted']], 'the target that had its answer keeps it; the one cut short has none');
  t.same(store.ends, [], 'not settled');
  t.same(store.released, [1], 'given back');
});

t.test('when the node stops while a target waits to be tried again, then the wait ends at once and the step is given back', async (t) => {
  const store = new Store();
  store.queued = [step({ targets: [{ id: 11, target: webpush }] })];
  const s = new WakeSender(store, store.targets, { webpush: channel('webpush', [{ outcome: 'retry', status: 429, detail: 'slow down', retryAfterMs: 30_000 }]) }, clock, quiet, {
    nodeId: 'n1',
    pushTtlMs: 3600_000,
    sleep: (ms) => new Promise((r) => setTimeout(r, ms).unref()),
  });
  await s.round();
  await new Promise((r) => setTimeout(r, 50));
  const t0 = Date.now();
  await s.stop();
  t.ok(Date.now() - t0 < 1000, `stopped in ${Date.now() - t0} ms, not after the provider's 30 s Retry-After`);
  t.same(store.recorded, [], 'nothing recorded');
  t.same(store.released, [1]);
});

t.test('when a node starts, then before its first claim it takes back what an earlier run of its NODE_ID held, once', async (t) => {
  const store = new Store();
  const warned: string[] = [];
  const s = new WakeSender(store, store.targets, {}, clock, { ...quiet, warn: (_o: object, msg: string) => void warned.push(msg) }, { nodeId: 'n1', pushTtlMs: 3600_000 });
  await s.round();
  await s.round();
  await s.stop();
  t.same(store.resumed, ['n1'], 'once, for its own NODE_ID');
  t.match(warned, [/an earlier run of this node held/], 'and says so');
});

t.test('when the node stops while a provider is answering, then the answer within the drain is recorded and the step settled, not given back to be sent again', async (t) => {
  const store = new Store();
  store.queued = [step({ targets: [{ id: 11, target: webpush }] })];
  let answer: (() => void) | undefined;
  const slow: WakeChannel<'webpush'> = {
    kind: 'webpush',
    send: (_target, _message, signal) =>
      new Promise((resolve) => {
        answer = () => resolve({ outcome: 'accepted', status: 201 });
        signal?.addEventListener('abort', () => resolve({ outcome: 'retry', status: null, detail: 'aborted' }), { once: true });
      }),
  };
  const s = new WakeSender(store, store.targets, { webpush: slow }, clock, quiet, { nodeId: 'n1', pushTtlMs: 3600_000, drainMs: 5_000 });
  await s.round();
  while (answer === undefined) await new Promise((r) => setTimeout(r, 5));
  const stopped = s.stop();
  setTimeout(() => answer!(), 100); // accepted 100 ms into the stop
  await stopped;
  t.same(store.recorded, [[1, 11, 'webpush:accepted']]);
  t.same(store.ends, [[1, { state: 'DONE', outcome: '' }]], 'settled');
  t.same(store.released, [], 'not given back');
});

t.test('when a provider answers slowly with long Retry-After waits, then no try is made that could outlast the claim’s lease (another claim could send the same wake-up meanwhile)', async (t) => {
  const store = new Store();
  store.queued = [step({ targets: [{ id: 11, target: fcm }] })];
  // a clock the sender's waits and the provider's slowness move on
  let now = Date.parse(NOW);
  const moving = { now: () => new Date(now) };
  const starts: number[] = [];
  const slow: WakeChannel<'fcm'> = {
    kind: 'fcm',
    send: async () => {
      starts.push(now - Date.parse(NOW));
      now += 10_000; // answers at the channel's timeout
      return { outcome: 'retry', status: 429, detail: 'slow down', retryAfterMs: 30_000 };
    },
  };
  const run = async (leaseMs?: number) => {
    now = Date.parse(NOW);
    starts.length = 0;
    store.queued = [step({ targets: [{ id: 11, target: fcm }] })];
    const s = new WakeSender(store, store.targets, { fcm: slow }, moving, quiet, {
      nodeId: 'n1',
      pushTtlMs: 3600_000,
      ...(leaseMs === undefined ? {} : { leaseMs }),
      sleep: async (ms) => void (now += ms),
    });
    await s.round();
    await s.idle();
    await s.stop();
    return [...starts];
  };
  t.same(await run(), [0, 40_000, 80_000], 'the default lease holds all three tries and both waits (the last ends at 90 s of 100)');
  t.same(await run(60_000), [0, 40_000], 'a 60 s lease: the third try, ending at 90 s, is not made');
  t.match(store.recorded.at(-1), [1, 11, 'fcm:failed'], 'recorded failed, within the lease');
});

t.test('when a target’s result is recorded, then an accepted one carries when it was accepted (an SMS reply answers the SMS last delivered), another none', async (t) => {
  const store = new Store();
  store.queued = [step({ targets: [{ id: 11, target: webpush }, { id: 12, target: fcm }] })];
  const s = sender(store, { webpush: channel('webpush', []), fcm: channel('fcm', [{ outcome: 'rejected', status: 400, detail: 'bad token' }]) });
  await s.round();
  await s.idle();
  await s.stop();
  const byTarget = new Map(store.recorded.map((r, i) => [r[1], store.acceptedAt[i]]));
  t.equal(byTarget.get(11), NOW);
  t.equal(byTarget.get(12), null);
});

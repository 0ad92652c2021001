// The wake ladder's rules (domain/wake.ts, DESIGN section 14): the steps a push gets and when,
// when a step stops, how tries are spaced, which targets are taken, what the messages say.
import t from 'tap';
import {
  checkWakeTarget,
  DEFAULT_LADDER,
  ladderOf,
  nextTryInMs,
  reachedTargets,
  targetResult,
  smsReplyStatus,
  stillAssigned,
  targetAddress,
  smsReplyTo,
  smsText,
  stepOf,
  stepStops,
  voiceText,
  WAKE_ADDRESS_MAX,
  WAKE_RETRY_AFTER_MAX_MS,
  WAKE_LEASE_MS,
  WAKE_LEASE_MARGIN_MS,
  WAKE_TRIES_MAX,
  type StepFacts,
  type WakeKind,
  type WakeMessage,
  type WakeTarget,
} from '../../../src/domain/wake.js';

const AT = '2026-11-29T04:00:00.000Z';
const kinds = (...k: WakeKind[]) => new Set<WakeKind>(k);

t.test('when a push is written for a device with targets of every kind, then wake, sms and voice fall due at their delays after it', async (t) => {
  t.same(ladderOf(AT, kinds('webpush', 'sms', 'voice'), DEFAULT_LADDER), [
    { step: 'wake', dueAt: '2026-11-29T04:00:05.000Z' },
    { step: 'sms', dueAt: '2026-11-29T04:01:00.000Z' },
    { step: 'voice', dueAt: '2026-11-29T04:02:00.000Z' },
  ]);
});

t.test('when a step is off (0) or the device has no target of its kinds, then it is not planned', async (t) => {
  t.same(ladderOf(AT, kinds('fcm', 'apns'), DEFAULT_LADDER).map((s) => s.step), ['wake'], 'fcm and apns are wake-ups');
  t.same(ladderOf(AT, kinds('webpush', 'sms'), { wake: 0, sms: 30, voice: 90 }).map((s) => s.step), ['sms'], 'wake off; no voice target');
  t.same(ladderOf(AT, kinds(), DEFAULT_LADDER), [], 'no targets: the socket alone');
  t.equal(stepOf('apns'), 'wake');
  t.equal(stepOf('sms'), 'sms');
  t.equal(stepOf('voice'), 'voice');
});

t.test('when a step falls due, then it stops at the ack, at an answer, when the assignment ended, and at the TTL, in that order', async (t) => {
  const due: StepFacts = { pushState: 'PENDING', answered: false, assigned: true, expiresAt: '2026-11-30T04:00:00.000Z', now: '2026-11-29T04:00:05.000Z' };
  t.equal(stepStops(due), null, 'unacknowledged, unanswered, assigned, alive: send');
  t.equal(stepStops({ ...due, pushState: 'DELIVERED', answered: true }), 'acknowledged');
  t.equal(stepStops({ ...due, answered: true, assigned: false }), 'answered');
  t.equal(stepStops({ ...due, assigned: false }), 'stood-down');
  t.equal(stepStops({ ...due, pushState: 'SUPERSEDED' }), 'stood-down', 'an assignment replaced before it was sent');
  t.equal(stepStops({ ...due, pushState: 'EXPIRED' }), 'expired');
  t.equal(stepStops({ ...due, now: due.expiresAt }), 'expired', 'at the TTL itself');
});

t.test('when a provider fails for now, then the step tries again after 1 s and 4 s, or after its Retry-After up to 30 s, and at most 3 times', async (t) => {
  t.equal(nextTryInMs(1), 1000);
  t.equal(nextTryInMs(2), 4000);
  t.equal(nextTryInMs(WAKE_TRIES_MAX), null, 'the third try was the last');
  t.equal(nextTryInMs(1, 2500), 2500, 'Retry-After honoured');
  t.equal(nextTryInMs(1, WAKE_RETRY_AFTER_MAX_MS + 1), null, 'a longer wait than the step allows ends its tries');
  // the lease: a try is made only if it and its wait end, with the margin, before the lease does
  t.equal(WAKE_LEASE_MS, 3 * 10_000 + 2 * 30_000 + WAKE_LEASE_MARGIN_MS, 'every try and wait a step may make, and the margin');
  t.equal(nextTryInMs(1, 30_000, 30_000 + 10_000 + WAKE_LEASE_MARGIN_MS), 30_000, 'exactly fits');
  t.equal(nextTryInMs(1, 30_000, 30_000 + 10_000 + WAKE_LEASE_MARGIN_MS - 1), null, 'a millisecond short: not tried, so never under way when another claim may take the step');
  t.equal(nextTryInMs(2, undefined, 4_000 + 10_000 + WAKE_LEASE_MARGIN_MS), 4_000);
});

t.test('when a target is registered, then its channel must be configured and its form right', async (t) => {
  const all = kinds('webpush', 'fcm', 'apns', 'sms', 'voice');
  t.same(checkWakeTarget({ kind: 'sms', phone: '+447700900123' }, kinds('voice'), false), { ok: false, code: 'channel-not-configured', kind: 'sms' });
  t.same(checkWakeTarget({ kind: 'sms', phone: '+447700900123' }, all, false), { ok: true, target: { kind: 'sms', phone: '+447700900123' } });
  for (const phone of ['447700900123', '+0447700900', '+1234567', '+1234567890123456', '+44 7700 900123']) {
    t.match(checkWakeTarget({ kind: 'voice', phone }, all, false), { ok: false, code: 'invalid', path: '/phone' }, `${phone} is not E.164`);
  }
  t.same(checkWakeTarget({ kind: 'fcm', token: 'dQw4w9WgXcQ:APA91bH-abc_def.ghi' }, all, false), { ok: true, target: { kind: 'fcm', token: 'dQw4w9WgXcQ:APA91bH-abc_def.ghi' } });
  t.match(checkWakeTarget({ kind: 'fcm', token: 'short' }, all, false), { ok: false, path: '/token' });
  const hex = 'AB'.repeat(32);
  t.same(checkWakeTarget({ kind: 'apns', token: hex, critical: true }, all, false), { ok: true, target: { kind: 'apns', token: hex.toLowerCase(), critical: true } });
  t.match(checkWakeTarget({ kind: 'apns', token: 'xyz'.repeat(30), critical: false }, all, false), { ok: false, path: '/token' });
});

t.test('when a Web Push subscription is registered, then its endpoint is https, carries no credentials, names no private address unless allowed, and its keys are base64url', async (t) => {
  const all = kinds('webpush');
  const sub = (endpoint: string, p256dh = 'BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM', auth = 'tBHItJI5svbpez7KI4CCXg') =>
    ({ kind: 'webpush' as const, subscription: { endpoint, keys: { p256dh, auth } } });
  t.match(checkWakeTarget(sub('https://push.example.net/send/abc'), all, false), { ok: true, target: { subscription: { endpoint: 'https://push.example.net/send/abc' } } });
  t.match(checkWakeTarget(sub('not a url'), all, false), { ok: false, path: '/subscription/endpoint', reason: 'is not an absolute URL' });
  t.match(checkWakeTarget(sub('http://push.example.net/x'), all, false), { ok: false, reason: 'must be an https URL' });
  t.match(checkWakeTarget(sub('https://u:p@push.example.net/x'), all, false), { ok: false, reason: 'must not carry credentials' });
  t.match(checkWakeTarget(sub('https://127.0.0.1:8443/x'), all, false), { ok: false, reason: 'names an address that is not public' });
  t.match(checkWakeTarget(sub('https://127.0.0.1:8443/x'), all, true), { ok: true }, 'WAKE_ALLOW_PRIVATE');
  t.match(checkWakeTarget(sub('https://push.example.net/x', 'not base64!'), all, false), { ok: false, path: '/subscription/keys' });
});

t.test('when a wake-up is worded, then the SMS names the incident and how to answer, and a reply of 1 or 2 is an answer', async (t) => {
  const m: WakeMessage = { incidentId: 7, originId: 'CAD-7', type: 'FIRE', priority: 1, pushId: 3, deviceId: 2, ttlSeconds: 60 };
  t.match(smsText(m), /FIRE CAD-7.*1 = responding, 2 = not available/);
  t.match(voiceText(m), /FIRE, incident CAD-7/);
  t.equal(smsReplyStatus(' 1 '), 'RESPONDING');
  t.equal(smsReplyStatus('2'), 'NOT_AVAILABLE');
  t.equal(smsReplyStatus('yes'), null);
});

t.test('when a step records its targets’ results, then the targets it names are those reached, not sent again after a takeover', async (t) => {
  const outcome = [targetResult('webpush', 11, 'accepted'), targetResult('fcm', 12, 'failed')].join(' ');
  t.equal(outcome, 'webpush#11:accepted fcm#12:failed');
  t.same([...reachedTargets(outcome)], [11, 12]);
  t.same([...reachedTargets(null)], []);
});

t.test('when a push is followed by a stand-down of its device from the incident, then its assignment no longer holds; one before it does not count', async (t) => {
  t.equal(stillAssigned(10, null), true, 'never stood down');
  t.equal(stillAssigned(10, 7), true, 'stood down before this push (then assigned again)');
  t.equal(stillAssigned(10, 12), false, 'stood down after it');
});

t.test('when an SMS reply comes, then it answers the newest SMS accepted for that number: its device and incident, not every device holding the number', async (t) => {
  const sms = (deviceId: number, incidentId: number, targetId: number, outcome: string | null) => ({ deviceId, incidentId, targetId, outcome });
  t.same(
    smsReplyTo([
      sms(5, 9, 50, 'sms#50:failed'), // the newest did not reach the phone
      sms(2, 8, 20, 'sms#21:accepted sms#20:accepted'),
      sms(1, 7, 10, 'sms#10:accepted'),
    ]),
    { deviceId: 2, incidentId: 8 },
  );
  t.equal(smsReplyTo([sms(1, 7, 10, 'sms#100:accepted'), sms(1, 7, 10, null)]), null, 'another target’s result, or none, is no SMS to this number');
  t.equal(smsReplyTo([]), null);
});

t.test('when a target is registered, then its address is where it is reached: the endpoint, the token, the phone', async (t) => {
  t.equal(targetAddress({ kind: 'webpush', subscription: { endpoint: 'https://push.example.net/s/1', keys: { p256dh: 'p', auth: 'a' } } }), 'https://push.example.net/s/1');
  t.equal(targetAddress({ kind: 'fcm', token: 'f'.repeat(30) }), 'f'.repeat(30));
  t.equal(targetAddress({ kind: 'apns', token: 'a'.repeat(64), critical: true }), 'a'.repeat(64));
  t.equal(targetAddress({ kind: 'sms', phone: '+41791234567' }), '+41791234567');
  t.equal(targetAddress({ kind: 'voice', phone: '+41791234567' }), '+41791234567');
});

t.test('when an endpoint is longer than WAKE_ADDRESS_MAX once normalised, then it is refused: the targets are unique by it', async (t) => {
  const all = new Set<WakeKind>(['webpush', 'fcm']);
  const sub = (endpoint: string): WakeTarget => ({ kind: 'webpush', subscription: { endpoint, keys: { p256dh: 'p', auth: 'a' } } });
  // 1 000 characters as sent, 9 000 once percent-encoded
  t.match(checkWakeTarget(sub(`https://push.example.net/${'推'.repeat(1000)}`), all, false), { ok: false, path: '/subscription/endpoint', reason: /longer than 2048/ });
  t.match(checkWakeTarget(sub(`https://push.example.net/${'a'.repeat(WAKE_ADDRESS_MAX - 25)}`), all, false), { ok: true }, 'exactly the most');
  t.match(checkWakeTarget({ kind: 'fcm', token: 'f'.repeat(2049) }, all, false), { ok: false, path: '/token' });
  t.match(checkWakeTarget(sub('https://push.example.net/s/1#again'), all, false), { ok: true, target: { subscription: { endpoint: 'https://push.example.net/s/1' } } }, 'a fragment, never sent, is dropped: the same target');
});

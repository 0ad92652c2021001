// The wake ladder end to end (DESIGN section 14, issue 39): the real app on a listening server,
// the real channel adapters, provider stubs over HTTPS (trusted through NODE_EXTRA_CA_CERTS, as
// production trusts a private CA: test/fixtures/wake/tls.ts). A device whose app is asleep (no
// socket) registers a Web Push subscription and an SMS number; an incident assigns it: the
// wake-up reaches the push service (decrypted there with the subscription's keys) no sooner than
// WAKE_AFTER_S after the push was written and within 2 s after, then the SMS after
// ESCALATE_SMS_AFTER_S; an answer stops the call; a device that acknowledges on its socket is
// never woken.
import t, { type Test } from 'tap';
import { buildWakeChannels } from '../../src/adapters/wake/channels.js';
import { generateVapidKeys } from '../../src/adapters/wake/webpush.js';
import { Secret, type WakeSettings } from '../../src/config-wake.js';
import { twilioSignature } from '../../src/services/sms-replies.js';
import { bearer, createDevice, createUser, basic, grant } from '../fixtures/app.js';
import { call } from '../fixtures/access.js';
import { capturedLog, connect, deviceToken, listen, until } from '../fixtures/sockets.js';
import { requireTrustedTestCert } from '../fixtures/wake/tls.js';
import { TwilioStub } from '../fixtures/wake/twilio-stub.js';
import { FcmStub } from '../fixtures/wake/fcm-stub.js';
import { ApnsStub } from '../fixtures/wake/apns-stub.js';
import { parseServiceAccount } from '../../src/adapters/wake/fcm.js';
import { WebPushStub } from '../fixtures/wake/webpush-stub.js';

requireTrustedTestCert();

const vapid = { ...generateVapidKeys(), subject: 'mailto:ops@example.test' };

async function world(t: Test, ladder: { wakeAfterS: number; escalateSmsAfterS: number; escalateVoiceAfterS: number }, logger?: ReturnType<typeof capturedLog>['logger']) {
  const push = await WebPushStub.start();
  const twilio = await TwilioStub.start();
  t.teardown(() => push.close());
  t.teardown(() => twilio.close());
  const built = buildWakeChannels({
    webpush: { vapid, allowPrivate: true },
    twilio: { accountSid: twilio.accountSid, authToken: twilio.authToken, from: twilio.from, apiBase: twilio.origin },
  });
  t.teardown(() => built.close());
  // the service's view of the settings: which kinds a target may have, and the Twilio account
  // (whose auth token also checks the SMS replies' signatures)
  const wake = {
    configured: built.configured,
    twilio: { accountSid: twilio.accountSid, authToken: new Secret(twilio.authToken), from: twilio.from, apiBase: twilio.origin },
  } as WakeSettings;
  const server = await listen(t, {}, { ...ladder, wake, wakeAllowPrivate: true, publicUrl: PUBLIC_URL }, { wakeChannels: built.channels, wakeSender: { pollMs: 100 }, ...(logger ? { logger } : {}) });
  const { app } = server;
  const cadId = await createUser(app, { name: 'CAD', email: 'cad@example.test', password: 'cad-password-1', createIncidents: true });
  const cad = basic('cad@example.test', 'cad-password-1');
  /** a device the CAD reaches, called `name`, with the targets its app registers with its own token */
  const device = async (name: string, targets: unknown[]) => {
    const id = await createDevice(app, { name, uniqueId: name.toLowerCase() });
    await grant(app, { userId: cadId, deviceId: id });
    const token = await deviceToken(app, id);
    for (const target of targets) {
      const res = await call(app, bearer(token), 'POST', `/api/devices/${id}/wake-targets`, target);
      t.equal(res.statusCode, 201, `${name} registers ${(target as { kind: string }).kind}`);
    }
    return { id, token };
  };
  return { push, twilio, server, app, cad, device };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const PUBLIC_URL = 'https://cad.example.test';

/** an incoming SMS as the provider posts it, signed with `authToken` (or not) */
function smsReply(app: Awaited<ReturnType<typeof world>>['app'], authToken: string, fields: Record<string, string>) {
  const payload = new URLSearchParams(fields).toString();
  return app.inject({
    method: 'POST',
    url: '/api/wake/sms-reply',
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': twilioSignature(authToken, `${PUBLIC_URL}/api/wake/sms-reply`, fields) },
    payload,
  });
}

t.test('when a sleeping device is assigned, then its subscription is woken after WAKE_AFTER_S, its phone gets an SMS after ESCALATE_SMS_AFTER_S, and its answer stops the call', async (t) => {
  const w = await world(t, { wakeAfterS: 1, escalateSmsAfterS: 2, escalateVoiceAfterS: 4 });
  const e1 = await w.device('E1', [
    { kind: 'webpush', subscription: w.push.subscribe(vapid.publicKey) },
    { kind: 'sms', phone: '+41791234567' },
    { kind: 'voice', phone: '+41791234567' },
  ]);
  const t0 = Date.now();
  const created = await call(w.app, w.cad, 'POST', '/api/incidents', { originId: 'W-1', type: 'FIRE', latitude: 46.9, longitude: 7.4, priority: 1, resources: ['E1'] });
  t.equal(created.statusCode, 202, 'stored; the device is offline');
  const incidentId = (created.json() as { incident: { id: number } }).incident.id;

  const wakeUp = await until('the wake-up', () => w.push.received[0], 6000);
  const wokenAfter = Date.now() - t0;
  t.ok(wokenAfter >= 1000 && wokenAfter <= 3000, `woken ${wokenAfter} ms after the write: not before WAKE_AFTER_S (1 s), within 2 s after it`);
  t.same(wakeUp.payload, { incidentId, originId: 'W-1', type: 'FIRE', priority: 1, pushId: 1 }, 'the payload, decrypted by the push service with the subscription’s keys, names the incident and the push');
  t.equal(wakeUp.headers.urgency, 'high', 'priority 1: urgent');
  t.equal(wakeUp.headers.topic, `incident-${incidentId}`);
  t.same(w.push.refused, [], 'the VAPID signature and the encryption were accepted');

  const sms = await until('the SMS', () => w.twilio.sent.find((x) => x.resource === 'Messages'), 6000);
  const smsAfter = Date.now() - t0;
  t.ok(smsAfter >= 2000 && smsAfter <= 4000, `SMS ${smsAfter} ms after the write`);
  t.match(sms.form, { To: '+41791234567', From: w.twilio.from });
  t.match(sms.form.Body, /FIRE W-1.*Reply 1 = responding, 2 = not available/);

  // the responder answers before the call is due: the ladder stops
  const answered = await call(w.app, bearer(e1.token), 'POST', `/api/incidents/${incidentId}/responses`, { responseId: '0f8e9a52-6a1c-4c3e-9b5e-2f7d1c0a4b11', status: 'RESPONDING' });
  t.equal(answered.statusCode, 200);
  await sleep(Math.max(0, t0 + 5500 - Date.now()));
  t.same(w.twilio.sent.filter((x) => x.resource === 'Calls'), [], 'no call after the answer');
  t.equal(w.push.received.length, 1, 'one wake-up, once');
  t.equal(w.twilio.sent.length, 1, 'one SMS, once');
  // the responders list shows each step: channel, time, outcome
  const listed = await call(w.app, w.cad, 'GET', `/api/incidents/${incidentId}/responders`);
  t.equal(listed.statusCode, 200);
  const [responder] = listed.json() as { deviceId: number; wake: { step: string; dueAt: string; state: string; outcome: string | null }[] }[];
  t.equal(responder!.deviceId, e1.id);
  t.match(
    responder!.wake,
    [
      { step: 'wake', state: 'DONE', outcome: /^webpush#\d+:accepted$/ },
      { step: 'sms', state: 'DONE', outcome: /^sms#\d+:accepted$/ },
      { step: 'voice', state: 'STOPPED', outcome: 'stopped:answered' },
    ],
    'the wake-up and the SMS accepted, the call stopped by the answer',
  );
  t.equal(responder!.wake.length, 3);
  const due = responder!.wake.map((s) => Date.parse(s.dueAt) - Date.parse(responder!.wake[0]!.dueAt));
  t.same(due, [0, 1000, 3000], 'due 1, 2 and 4 s after the push');
});

t.test('when a device acknowledges its push on the socket, then it is never woken; a stand-down before the wake-up stops it too', async (t) => {
  const w = await world(t, { wakeAfterS: 1, escalateSmsAfterS: 0, escalateVoiceAfterS: 0 });
  const awake = await w.device('A1', [{ kind: 'webpush', subscription: w.push.subscribe(vapid.publicKey) }]);
  await w.device('B1', [{ kind: 'webpush', subscription: w.push.subscribe(vapid.publicKey) }]);
  const socket = await connect(t, `${w.server.ws}/api/socket/device?token=${encodeURIComponent(awake.token)}`);
  const created = await call(w.app, w.cad, 'POST', '/api/incidents', { originId: 'W-2', type: 'RTC', latitude: 46.9, longitude: 7.4, priority: 2, resources: ['A1', 'B1'] });
  t.ok(created.statusCode === 200 || created.statusCode === 202);
  const frame = await until('the push on the socket', () => socket.frames[0], 3000);
  socket.ack(frame.pushId);
  // B1 is stood down before its wake-up is due
  const updated = await call(w.app, w.cad, 'PUT', '/api/incidents/update', { originId: 'W-2', type: 'RTC', latitude: 46.9, longitude: 7.4, priority: 2, resources: ['A1'] });
  t.ok(updated.statusCode === 200 || updated.statusCode === 202, 'B1 stood down');
  await sleep(2500);
  t.same(w.push.received, [], 'neither the device that acknowledged nor the one stood down is woken');
});

t.test('when a responder replies to the SMS, then a signed "1" is recorded as RESPONDING once however often the provider retries, and a forged reply is refused', async (t) => {
  const w = await world(t, { wakeAfterS: 0, escalateSmsAfterS: 1, escalateVoiceAfterS: 0 });
  const phone = '+41791234567';
  const e1 = await w.device('E1', [{ kind: 'sms', phone }]);
  const created = await call(w.app, w.cad, 'POST', '/api/incidents', { originId: 'W-3', type: 'FIRE', latitude: 46.9, longitude: 7.4, priority: 1, resources: ['E1'] });
  const incidentId = (created.json() as { incident: { id: number } }).incident.id;
  await until('the SMS', () => w.twilio.sent[0], 6000);
  const fields = { From: phone, To: w.twilio.from, Body: ' 1 ', MessageSid: 'SM0123456789abcdef0123456789abcdef', AccountSid: w.twilio.accountSid };

  const forged = await smsReply(w.app, 'not-the-auth-token', fields);
  t.equal(forged.statusCode, 403, 'a reply not signed with the auth token is refused');
  const tampered = await w.app.inject({
    method: 'POST',
    url: '/api/wake/sms-reply',
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': twilioSignature(w.twilio.authToken, `${PUBLIC_URL}/api/wake/sms-reply`, fields) },
    payload: new URLSearchParams({ ...fields, Body: '2' }).toString(),
  });
  t.equal(tampered.statusCode, 403, 'a body changed after signing is refused');
  const before = await call(w.app, w.cad, 'GET', `/api/incidents/${incidentId}/responders`);
  t.equal((before.json() as { response: { status: string } }[])[0]!.response.status, 'NONE', 'nothing recorded by the forged replies');

  const first = await smsReply(w.app, w.twilio.authToken, fields);
  t.equal(first.statusCode, 200);
  t.match(first.headers['content-type'], /^text\/xml/);
  t.match(first.body, /<Response><Message>Responding: recorded\.<\/Message><\/Response>/);
  const again = await smsReply(w.app, w.twilio.authToken, fields);
  t.equal(again.body, first.body, 'the provider’s retry is answered the same');
  const listed = (await call(w.app, w.cad, 'GET', `/api/incidents/${incidentId}/responders`)).json() as { deviceId: number; response: { status: string } }[];
  t.same(listed.map((r) => [r.deviceId, r.response.status]), [[e1.id, 'RESPONDING']]);
  const events = (await call(w.app, w.cad, 'GET', `/api/events?incidentId=${incidentId}&type=incidentResponse`)).json() as { attributes: { status: string } }[];
  t.same(events.map((e) => e.attributes.status), ['RESPONDING'], 'one incidentResponse event, whatever the retries');

  const other = await smsReply(w.app, w.twilio.authToken, { ...fields, Body: 'on my way', MessageSid: 'SM2' });
  t.match(other.body, /Reply 1 = responding, 2 = not available/);
  const stranger = await smsReply(w.app, w.twilio.authToken, { ...fields, From: '+15550000000', MessageSid: 'SM3' });
  t.match(stranger.body, /no alert was texted to this number/);
  // bounded before any signature is computed: a form of 32 KiB at most, 100 fields at most
  const flood = new URLSearchParams(Object.fromEntries(Array.from({ length: 8000 }, (_, i) => [`f${i}`, 'xx']))).toString();
  const big = await w.app.inject({ method: 'POST', url: '/api/wake/sms-reply', headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': 'x' }, payload: flood });
  t.equal(big.statusCode, 413, `a ${flood.length}-byte form is refused before it is parsed`);
  t.match(big.headers['content-type'], /problem\+json/);
  const many = Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`f${i}`, 'x']));
  const wide = await smsReply(w.app, w.twilio.authToken, many);
  t.equal(wide.statusCode, 400, '101 fields, even signed');
});

t.test('when one phone number is registered on devices of two users, each texted, then a reply answers only the newest SMS: its device and incident, not the other user’s', async (t) => {
  const w = await world(t, { wakeAfterS: 0, escalateSmsAfterS: 1, escalateVoiceAfterS: 0 });
  const phone = '+41791234568';
  const e2 = await w.device('E2', [{ kind: 'sms', phone }]);
  // another user, with a device of its own holding the same number
  const otherId = await createUser(w.app, { name: 'Other', email: 'other@example.test', password: 'other-password-1', createIncidents: true });
  const other = basic('other@example.test', 'other-password-1');
  const b2 = await createDevice(w.app, { name: 'B2', uniqueId: 'b2' });
  await grant(w.app, { userId: otherId, deviceId: b2 });
  t.equal((await call(w.app, other, 'POST', `/api/devices/${b2}/wake-targets`, { kind: 'sms', phone })).statusCode, 201);
  const create = async (auth: string, originId: string, callsign: string) =>
    ((await call(w.app, auth, 'POST', '/api/incidents', { originId, type: 'FIRE', latitude: 46.9, longitude: 7.4, priority: 2, resources: [callsign] })).json() as { incident: { id: number } }).incident.id;
  const mine = await create(w.cad, 'W-6', 'E2');
  await until('the first SMS', () => w.twilio.sent.length >= 1, 6000);
  const theirs = await create(other, 'X-1', 'B2');
  await until('the second SMS', () => w.twilio.sent.length >= 2, 6000);
  const status = async (auth: string, incidentId: number) =>
    ((await call(w.app, auth, 'GET', `/api/incidents/${incidentId}/responders`)).json() as { deviceId: number; response: { status: string } }[]).map((r) => [r.deviceId, r.response.status]);
  await until('both SMS steps settled', async () => {
    const settled = async (auth: string, id: number) => ((await call(w.app, auth, 'GET', `/api/incidents/${id}/responders`)).json() as { wake: { step: string; state: string }[] }[])[0]?.wake.some((x) => x.step === 'sms' && x.state === 'DONE');
    return (await settled(w.cad, mine)) && (await settled(other, theirs));
  }, 6000);

  const fields = { From: phone, To: w.twilio.from, Body: '1', MessageSid: 'SM-two-users-1', AccountSid: w.twilio.accountSid };
  const reply = await smsReply(w.app, w.twilio.authToken, fields);
  t.match(reply.body, /Responding: recorded/);
  t.same(await status(other, theirs), [[b2, 'RESPONDING']], 'the newest SMS, the other user’s incident, got the answer');
  t.same(await status(w.cad, mine), [[e2.id, 'NONE']], 'the first user’s incident did not: one reply answers one SMS');

  // the newest SMS's assignment stood down: nothing is recorded, and no older SMS takes the reply
  const standDown = await call(w.app, other, 'PUT', `/api/incidents/${theirs}`, { originId: 'X-1', type: 'FIRE', latitude: 46.9, longitude: 7.4, priority: 2, resources: [] });
  t.ok(standDown.statusCode === 200 || standDown.statusCode === 202, 'B2 stood down');
  const late = await smsReply(w.app, w.twilio.authToken, { ...fields, Body: '2', MessageSid: 'SM-two-users-2' });
  t.match(late.body, /stood down/);
  t.same(await status(w.cad, mine), [[e2.id, 'NONE']], 'still nothing on the first user’s incident');
});

t.test('when the push service fails, then the wake-up is tried again and goes once it recovers; a subscription it says is gone is removed; no secret reaches the log', async (t) => {
  const { logger, lines } = capturedLog('debug');
  const w = await world(t, { wakeAfterS: 1, escalateSmsAfterS: 0, escalateVoiceAfterS: 0 }, logger);
  const flaky = await w.device('F1', [{ kind: 'webpush', subscription: w.push.subscribe(vapid.publicKey) }]);
  w.push.answer = { status: 500 };
  const created = await call(w.app, w.cad, 'POST', '/api/incidents', { originId: 'W-4', type: 'FIRE', latitude: 46.9, longitude: 7.4, priority: 2, resources: ['F1'] });
  const incidentId = (created.json() as { incident: { id: number } }).incident.id;
  await until('the first try', () => w.push.received[0], 6000);
  w.push.answer = { status: 201 };
  await until('the retry', () => w.push.received[1], 6000);
  const steps = async () => ((await call(w.app, w.cad, 'GET', `/api/incidents/${incidentId}/responders`)).json() as { wake: { state: string; outcome: string | null }[] }[])[0]!.wake;
  const done = await until('the step settled', async () => ((await steps())[0]?.state === 'DONE' ? await steps() : false), 6000);
  t.match(done, [{ state: 'DONE', outcome: /^webpush#\d+:accepted$/ }], 'accepted on the second try (1 s of backoff)');
  t.equal(w.push.received.length, 2, 'one failed try, one accepted');

  // the push service says the subscription is gone: the target is removed
  w.push.answer = { status: 410 };
  const again = await call(w.app, w.cad, 'POST', '/api/incidents', { originId: 'W-5', type: 'FIRE', latitude: 46.9, longitude: 7.4, priority: 2, resources: ['F1'] });
  t.ok(again.statusCode === 200 || again.statusCode === 202);
  const targets = async () => (await call(w.app, bearer(flaky.token), 'GET', `/api/devices/${flaky.id}/wake-targets`)).json() as unknown[];
  await until('the gone subscription removed', async () => (await targets()).length === 0, 6000);
  t.same(await targets(), [], 'the target is gone');

  const log = lines.map((l) => JSON.stringify(l)).join('\n');
  for (const secret of [vapid.privateKey, w.twilio.authToken]) t.notOk(log.includes(secret), 'no provider secret in the log');
  t.ok(lines.some((l) => l.msg === 'a wake target is gone and was removed'), 'the removal is logged (ids and kind only)');
});

t.test('when a sleeping device holds FCM and APNs tokens, then its wake-up reaches both providers, each verified as the provider does, with a critical alert for priority 1', async (t) => {
  const fcm = await FcmStub.start();
  const apns = await ApnsStub.start();
  t.teardown(() => fcm.close());
  t.teardown(() => apns.close());
  const built = buildWakeChannels({
    fcm: { serviceAccount: parseServiceAccount(fcm.serviceAccountJson()), endpoint: fcm.origin },
    apns: { key: apns.keyPem, keyId: apns.keyId, teamId: apns.teamId, topic: apns.topic, endpoint: apns.origin },
  });
  t.teardown(() => built.close());
  const server = await listen(t, {}, { wakeAfterS: 1, escalateSmsAfterS: 0, escalateVoiceAfterS: 0, wake: { configured: built.configured } as WakeSettings }, { wakeChannels: built.channels, wakeSender: { pollMs: 100 } });
  const { app } = server;
  const cadId = await createUser(app, { name: 'CAD', email: 'cad@example.test', password: 'cad-password-1', createIncidents: true });
  const cad = basic('cad@example.test', 'cad-password-1');
  const id = await createDevice(app, { name: 'M1', uniqueId: 'm1' });
  await grant(app, { userId: cadId, deviceId: id });
  const token = await deviceToken(app, id);
  const apnsToken = 'ab'.repeat(32);
  for (const target of [{ kind: 'fcm', token: 'fcm-registration-token-0123456789' }, { kind: 'apns', token: apnsToken, critical: true }]) {
    t.equal((await call(app, bearer(token), 'POST', `/api/devices/${id}/wake-targets`, target)).statusCode, 201);
  }
  const t0 = Date.now();
  const created = await call(app, cad, 'POST', '/api/incidents', { originId: 'W-6', type: 'HAZMAT', latitude: 46.9, longitude: 7.4, priority: 1, resources: ['M1'] });
  const incidentId = (created.json() as { incident: { id: number } }).incident.id;
  const f = await until('the FCM message', () => fcm.sent[0], 6000);
  const a = await until('the APNs notification', () => apns.sent[0], 6000);
  t.ok(Date.now() - t0 >= 1000, 'not before WAKE_AFTER_S');
  t.match(f.message, { token: 'fcm-registration-token-0123456789', data: { incidentId: String(incidentId), originId: 'W-6', type: 'HAZMAT', priority: '1' }, android: { priority: 'HIGH' } });
  t.equal(a.token, apnsToken);
  t.match(a.body, { aps: { 'interruption-level': 'critical' }, incidentId, originId: 'W-6' });
  t.equal(a.headers['apns-collapse-id'], `incident-${incidentId}`);
  t.same([fcm.refused, apns.refused], [[], []], 'the service account’s assertion and the APNs token were accepted');
});

// What the provider stubs count as reached (test/fixtures/wake/answers.ts, issue 39), through the
// real channels: a message is delivered when the stub's accepting answer was written to a
// connection still open. With answers held, a sender that hangs up before the release (as a
// node killed mid-send does) finds its message cut, never delivered, while one still waiting
// gets its answer on release; over HTTP/1.1 (Twilio) and over an HTTP/2 stream (APNs).
import t from 'tap';
import type { WakeMessage } from '../../../src/ports/wake.js';
import { ApnsChannel } from '../../../src/adapters/wake/apns.js';
import { SmsChannel } from '../../../src/adapters/wake/twilio.js';
import { until } from '../../fixtures/sockets.js';
import { ApnsStub } from '../../fixtures/wake/apns-stub.js';
import { requireTrustedTestCert } from '../../fixtures/wake/tls.js';
import { TwilioStub } from '../../fixtures/wake/twilio-stub.js';

requireTrustedTestCert();

const message = (originId: string): WakeMessage => ({ incidentId: 42, originId, type: 'FIRE', priority: 1, pushId: 7, deviceId: 3, ttlSeconds: 3600 });

t.test('when the Twilio stub holds its answers and one sender hangs up, then only the message still waiting is delivered on release', async (t) => {
  const stub = await TwilioStub.start();
  t.teardown(() => stub.close());
  const sms = new SmsChannel({ accountSid: stub.accountSid, authToken: stub.authToken, from: stub.from, apiBase: stub.origin });
  t.same((await sms.send({ kind: 'sms', phone: '+4915123456789' }, message('O-0'))).outcome, 'accepted', 'answered at once while not holding');
  t.same(stub.answers.delivered.map((m) => m.form.Body?.includes('O-0')), [true]);

  stub.answers.hold();
  const gone = new AbortController();
  const cut = sms.send({ kind: 'sms', phone: '+4915123456789' }, message('O-1'), gone.signal);
  const waiting = sms.send({ kind: 'sms', phone: '+4915123456789' }, message('O-2'));
  await until('both received and held', () => stub.answers.held === 2, 5000);
  t.equal(stub.sent.length, 3, 'received and checked');
  gone.abort();
  t.equal((await cut).outcome, 'retry', 'the sender that hung up never learns of an acceptance');
  await until('its connection seen cut', () => stub.answers.heldCut() === 1, 5000);
  t.same(stub.answers.release(), { written: 1, cut: 1 });
  t.same(await waiting, { outcome: 'accepted', status: 201 }, 'the one still waiting gets its answer');
  t.same(stub.answers.delivered.map((m) => /O-\d/.exec(m.form.Body ?? '')?.[0]), ['O-0', 'O-2'], 'delivered: the messages whose answer reached their sender');
  t.same(stub.answers.cut.map((m) => /O-\d/.exec(m.form.Body ?? '')?.[0]), ['O-1'], 'cut: the one whose sender was gone');
  t.same(stub.refused, []);
});

t.test('when the APNs stub holds its answers and one stream is cancelled, then only the notification still waiting is delivered on release', async (t) => {
  const stub = await ApnsStub.start();
  const channel = new ApnsChannel({ key: stub.keyPem, keyId: stub.keyId, teamId: stub.teamId, topic: stub.topic, endpoint: stub.origin });
  t.teardown(async () => {
    await channel.close();
    await stub.close();
  });
  const target = { kind: 'apns' as const, token: 'ab'.repeat(32), critical: false };
  stub.answers.hold();
  const gone = new AbortController();
  const cut = channel.send(target, message('A-1'), gone.signal);
  const waiting = channel.send(target, message('A-2'));
  await until('both received and held', () => stub.answers.held === 2, 5000);
  gone.abort();
  t.equal((await cut).outcome, 'retry');
  await until('its stream seen closed', () => stub.answers.heldCut() === 1, 5000);
  t.same(stub.answers.release(), { written: 1, cut: 1 });
  t.same(await waiting, { outcome: 'accepted', status: 200 });
  t.same(stub.answers.delivered.map((m) => m.body.originId), ['A-2']);
  t.same(stub.answers.cut.map((m) => m.body.originId), ['A-1']);
  t.equal(stub.sent.length, 2, 'both were received and checked');
  t.same(stub.refused, []);
});

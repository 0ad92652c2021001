// The SMS and voice wake channels (src/adapters/wake/twilio.ts, issue 39) against an HTTPS stub
// of a Twilio-compatible REST API that checks Basic auth, the form fields and the TwiML
// (test/fixtures/wake/twilio-stub.ts): what the text and the call say, each outcome (a 404 is
// rejected, not gone), the deadline, and no auth token in any detail.
import t, { type Test } from 'tap';
import type { WakeMessage, WakeOutcome } from '../../../src/ports/wake.js';
import { SmsChannel, VoiceChannel } from '../../../src/adapters/wake/twilio.js';
import { requireTrustedTestCert } from '../../fixtures/wake/tls.js';
import { TwilioStub } from '../../fixtures/wake/twilio-stub.js';

requireTrustedTestCert();

const message: WakeMessage = { incidentId: 42, originId: 'CAD-2026-0042', type: 'FIRE', priority: 1, pushId: 7, deviceId: 3, ttlSeconds: 3600 };
const outcomes: WakeOutcome[] = [];
const PHONE = '+4915123456789';

async function setup(t: Test, options: { timeoutMs?: number; authToken?: string } = {}) {
  const stub = await TwilioStub.start();
  t.teardown(() => stub.close());
  const settings = { accountSid: stub.accountSid, authToken: options.authToken ?? stub.authToken, from: stub.from, apiBase: stub.origin, ...(options.timeoutMs ? { timeoutMs: options.timeoutMs } : {}) };
  const sms = new SmsChannel(settings);
  const voice = new VoiceChannel(settings);
  const text = async (m: WakeMessage = message, phone = PHONE, signal?: AbortSignal) => {
    const o = await sms.send({ kind: 'sms', phone }, m, signal);
    outcomes.push(o);
    return o;
  };
  const call = async (m: WakeMessage = message, phone = PHONE) => {
    const o = await voice.send({ kind: 'voice', phone }, m);
    outcomes.push(o);
    return o;
  };
  return { stub, text, call };
}

t.test('when an SMS is sent, then it goes to the number from the configured sender, naming the type and originId and how to reply', async (t) => {
  const { stub, text } = await setup(t);
  t.same(await text(), { outcome: 'accepted', status: 201 });
  t.same(stub.refused, []);
  const { resource, form } = stub.sent[0]!;
  t.equal(resource, 'Messages');
  t.equal(form.To, PHONE);
  t.equal(form.From, stub.from);
  t.match(form.Body, /FIRE/);
  t.match(form.Body, /CAD-2026-0042/);
  t.match(form.Body, /Reply 1 = responding, 2 = not available/);
});

t.test('when a call is made, then its TwiML says the alert, XML-escaped', async (t) => {
  const { stub, call } = await setup(t);
  t.same(await call({ ...message, type: 'HAZMAT <&> "spill"', originId: "O'Hare-1" }), { outcome: 'accepted', status: 201 });
  t.same(stub.refused, []);
  const { resource, form } = stub.sent[0]!;
  t.equal(resource, 'Calls');
  t.equal(form.To, PHONE);
  t.equal(form.From, stub.from);
  t.match(form.Twiml, /^<Response><Say>[^<>]*HAZMAT &lt;&amp;&gt; &quot;spill&quot;[^<>]*O&apos;Hare-1[^<>]*<\/Say><\/Response>$/);
});

t.test('when the auth token is wrong, then the API refuses it: rejected', async (t) => {
  const { stub, text } = await setup(t, { authToken: 'not-the-token' });
  t.match(await text(), { outcome: 'rejected', status: 401 });
  t.same(stub.refused, ['Authenticate']);
  t.equal(stub.sent.length, 0);
});

t.test('when the API answers 404, 429, 500, or refuses the number, then rejected (not gone), retry (Retry-After), retry, rejected', async (t) => {
  const { stub, text, call } = await setup(t);
  stub.answer = 404;
  const o = await text();
  t.match(o, { outcome: 'rejected', status: 404 });
  stub.answer = 429;
  t.match(await call(), { outcome: 'retry', status: 429, retryAfterMs: 3000 });
  stub.answer = 500;
  t.match(await text(), { outcome: 'retry', status: 500, detail: '500 20500 Internal Server Error' });
  stub.answer = 201;
  t.match(await text(message, '0151 2345'), { outcome: 'rejected', status: 400, detail: /21211/ });
});

t.test('when the API does not answer within the deadline, or the caller aborts, then retry', async (t) => {
  const { stub, text } = await setup(t, { timeoutMs: 300 });
  stub.answer = 'hang';
  t.same(await text(), { outcome: 'retry', status: null, detail: 'no answer within 300 ms' });
  const caller = new AbortController();
  setTimeout(() => caller.abort(), 50);
  t.same(await text(message, PHONE, caller.signal), { outcome: 'retry', status: null, detail: 'aborted' });
});

t.test('then no outcome detail holds the auth token or the Authorization header, and each is at most 200 characters', async (t) => {
  const stub = await TwilioStub.start();
  await stub.close();
  const basic = Buffer.from(`${stub.accountSid}:${stub.authToken}`).toString('base64');
  t.equal(outcomes.length, 9, "every outcome above");
  t.ok(outcomes.some((o) => 'detail' in o && o.detail.includes('[redacted]')), 'the echoed credentials were there to redact');
  for (const o of outcomes) {
    const detail = 'detail' in o ? o.detail : '';
    t.notOk(detail.includes(stub.authToken), 'no auth token');
    t.notOk(detail.includes(basic), 'no Basic credentials');
    t.ok(detail.length <= 200);
  }
});

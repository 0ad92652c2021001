// The Web Push wake channel (src/adapters/wake/webpush.ts, issue 39) against a push service stub
// over HTTPS that checks the VAPID signature and decrypts the payload with the subscription's
// own keys (test/fixtures/wake/webpush-stub.ts): the payload and headers, each outcome, the
// deadline, the connect-time guard, and no secret in any detail.
import t, { type Test } from 'tap';
import type { WakeMessage, WakeOutcome } from '../../../src/ports/wake.js';
import { generateVapidKeys, WebPushChannel } from '../../../src/adapters/wake/webpush.js';
import { requireTrustedTestCert } from '../../fixtures/wake/tls.js';
import { WebPushStub } from '../../fixtures/wake/webpush-stub.js';

requireTrustedTestCert();

const vapid = { ...generateVapidKeys(), subject: 'mailto:ops@example.org' };
const message: WakeMessage = { incidentId: 42, originId: 'CAD-2026-0042', type: 'FIRE', priority: 1, pushId: 7, deviceId: 3, ttlSeconds: 3600 };
const outcomes: WakeOutcome[] = [];

async function setup(t: Test, settings: Partial<ConstructorParameters<typeof WebPushChannel>[0]> = {}) {
  const stub = await WebPushStub.start();
  const channel = new WebPushChannel({ vapid, allowPrivate: true, ...settings });
  t.teardown(async () => {
    channel.close();
    await stub.close();
  });
  const send = async (sub = stub.subscribe(vapid.publicKey), m: WakeMessage = message, signal?: AbortSignal) => {
    const o = await channel.send({ kind: 'webpush', subscription: sub }, m, signal);
    outcomes.push(o);
    return o;
  };
  return { stub, channel, send };
}

t.test('when a wake-up is sent, then the push service gets a VAPID-signed, encrypted payload naming the incident, with TTL, Urgency and Topic', async (t) => {
  const { stub, send } = await setup(t);
  t.same(await send(), { outcome: 'accepted', status: 201 });
  t.same(stub.refused, []);
  const got = stub.received[0]!;
  t.same(got.payload, { incidentId: 42, originId: 'CAD-2026-0042', type: 'FIRE', priority: 1, pushId: 7 }, 'decrypted with the subscription keys');
  t.equal(got.headers.ttl, '3600');
  t.equal(got.headers.urgency, 'high', 'priority 1');
  t.equal(got.headers.topic, 'incident-42');
  t.equal(got.claims.sub, 'mailto:ops@example.org');
  t.equal(got.claims.aud, `https://127.0.0.1:${stub.port}`);
  await send(undefined, { ...message, priority: 2, ttlSeconds: 59.7 });
  t.equal(stub.received[1]!.headers.urgency, 'normal', 'priority 2');
  t.equal(stub.received[1]!.headers.ttl, '59', 'whole seconds');
});

t.test('when the VAPID key or the subscription keys are wrong, then the stub refuses and the attempt is rejected', async (t) => {
  const { stub, send } = await setup(t);
  const other = generateVapidKeys();
  // the JWT signed with another private key than the public key it names
  const mixed = new WebPushChannel({ vapid: { ...vapid, privateKey: other.privateKey }, allowPrivate: true });
  t.teardown(() => mixed.close());
  const o = await mixed.send({ kind: 'webpush', subscription: stub.subscribe(vapid.publicKey) }, message);
  outcomes.push(o);
  t.match(o, { outcome: 'rejected', status: 401 });
  t.match(stub.refused, [/signature does not verify/]);
  // a subscription made for another application server's key
  t.match(await send(stub.subscribe(other.publicKey)), { outcome: 'rejected', status: 403 });
  // keys that are not the subscription's: the body does not decrypt
  const sub = stub.subscribe(vapid.publicKey);
  const foreign = stub.subscribe(vapid.publicKey);
  t.match(await send({ ...sub, keys: foreign.keys }), { outcome: 'rejected', status: 400 });
  t.match(stub.refused[2], /does not decrypt/);
  t.equal(stub.received.length, 0);
});

t.test('when the push service answers 404, 410, 429, 500, then gone, gone, retry (Retry-After honoured), retry', async (t) => {
  const { stub, send } = await setup(t);
  stub.answer = { status: 404 };
  t.match(await send(), { outcome: 'gone', status: 404 });
  stub.answer = { status: 410 };
  t.match(await send(), { outcome: 'gone', status: 410, detail: /^410 / });
  stub.answer = { status: 429, retryAfter: '17' };
  t.match(await send(), { outcome: 'retry', status: 429, retryAfterMs: 17_000 });
  stub.answer = { status: 500 };
  const o = await send();
  t.match(o, { outcome: 'retry', status: 500 });
  t.notOk('retryAfterMs' in o, 'no Retry-After, none said');
});

t.test('when the push service does not answer within the deadline, or the caller aborts, then retry', async (t) => {
  const { stub, send } = await setup(t, { timeoutMs: 300 });
  stub.answer = { hang: true };
  const started = Date.now();
  t.same(await send(), { outcome: 'retry', status: null, detail: 'no answer within 300 ms' });
  t.ok(Date.now() - started < 2000);
  const caller = new AbortController();
  const pending = send(undefined, message, caller.signal);
  setTimeout(() => caller.abort(), 50);
  t.same(await pending, { outcome: 'retry', status: null, detail: 'aborted' });
});

t.test('when the endpoint is on a private address and allowPrivate is off, then nothing connects, whether it is spelled as a name or an IP literal', async (t) => {
  const { stub, channel } = await setup(t, { allowPrivate: false });
  const byName = await channel.send({ kind: 'webpush', subscription: stub.subscribe(vapid.publicKey, 'localhost') }, message);
  t.match(byName, { outcome: 'retry', status: null, detail: 'the host name did not resolve to public addresses only' });
  t.notMatch(byName.outcome === 'retry' ? byName.detail : '', /127\.0\.0\.1/, 'the address is not told');
  const literal = await channel.send({ kind: 'webpush', subscription: stub.subscribe(vapid.publicKey, '127.0.0.1') }, message);
  t.same(literal, { outcome: 'rejected', status: null, detail: 'the endpoint is not a public address' });
  const v6 = await channel.send({ kind: 'webpush', subscription: stub.subscribe(vapid.publicKey, '[::1]') }, message);
  t.match(v6, { outcome: 'rejected', status: null });
  t.equal(stub.received.length + stub.refused.length, 0, 'the stub was never called');
  outcomes.push(byName, literal, v6);
  // the same endpoint by name, allowed
  const allowed = new WebPushChannel({ vapid, allowPrivate: true });
  t.teardown(() => allowed.close());
  t.same(await allowed.send({ kind: 'webpush', subscription: stub.subscribe(vapid.publicKey, 'localhost') }, message), { outcome: 'accepted', status: 201 });
});

t.test('when the subscription is not usable, then rejected without a request', async (t) => {
  const { stub, send } = await setup(t);
  const sub = stub.subscribe(vapid.publicKey);
  t.match(await send({ ...sub, endpoint: sub.endpoint.replace('https:', 'http:') }), { outcome: 'rejected', detail: 'the endpoint is not https' });
  t.match(await send({ ...sub, keys: { p256dh: 'short', auth: sub.keys.auth } }), { outcome: 'rejected', status: null, detail: /not usable/ });
  t.equal(stub.received.length + stub.refused.length, 0);
});

t.test('when a push service echoes the Authorization header, then the detail keeps no credential', async (t) => {
  const { stub, send } = await setup(t);
  stub.answer = { status: 400, echoAuthorization: true };
  const o = await send();
  t.match(o, { outcome: 'rejected', status: 400, detail: /vapid \[redacted\]/ });
});

t.test('then no outcome detail holds the VAPID private key or a JWT, and each is at most 200 characters', async (t) => {
  t.ok(outcomes.length >= 15);
  for (const o of outcomes) {
    const detail = 'detail' in o ? o.detail : '';
    t.notOk(detail.includes(vapid.privateKey), 'no private key');
    t.notMatch(detail, /eyJ[\w-]+\.[\w-]+\./, 'no JWT');
    t.ok(detail.length <= 200);
  }
});

t.test('when the VAPID keys are malformed, then the channel refuses to start', async (t) => {
  t.throws(() => new WebPushChannel({ vapid: { ...vapid, privateKey: 'short' } }));
  t.throws(() => new WebPushChannel({ vapid: { ...vapid, subject: 'ops@example.org' } }));
  const keys = generateVapidKeys();
  t.equal(Buffer.from(keys.publicKey, 'base64url').length, 65, 'the public key is an uncompressed P-256 point');
  t.equal(Buffer.from(keys.privateKey, 'base64url').length, 32);
});

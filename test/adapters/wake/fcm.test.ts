// The FCM HTTP v1 wake channel (src/adapters/wake/fcm.ts, issue 39) against an HTTPS stub of the
// API and its token endpoint (test/fixtures/wake/fcm-stub.ts), which verifies the service
// account's RS256 assertion and the bearer token it issued: the message, each outcome, one token
// request for many sends and a new one after a 401, and no secret in any detail.
import t, { type Test } from 'tap';
import { generateKeyPairSync } from 'node:crypto';
import type { WakeMessage, WakeOutcome } from '../../../src/ports/wake.js';
import { FcmChannel, parseServiceAccount } from '../../../src/adapters/wake/fcm.js';
import { FcmStub } from '../../fixtures/wake/fcm-stub.js';
import { requireTrustedTestCert } from '../../fixtures/wake/tls.js';

requireTrustedTestCert();

const message: WakeMessage = { incidentId: 42, originId: 'CAD-2026-0042', type: 'FIRE', priority: 1, pushId: 7, deviceId: 3, ttlSeconds: 3600 };
const outcomes: WakeOutcome[] = [];
const secrets: string[] = [];

async function setup(t: Test, options: { timeoutMs?: number; privateKeyPem?: string } = {}) {
  const stub = await FcmStub.start();
  t.teardown(() => stub.close());
  const account = parseServiceAccount(stub.serviceAccountJson(options.privateKeyPem));
  secrets.push(account.private_key);
  const channel = new FcmChannel({ serviceAccount: account, endpoint: stub.origin, ...(options.timeoutMs ? { timeoutMs: options.timeoutMs } : {}) });
  const send = async (m: WakeMessage = message, token = 'device-token-1', signal?: AbortSignal) => {
    const o = await channel.send({ kind: 'fcm', token }, m, signal);
    outcomes.push(o);
    return o;
  };
  return { stub, channel, send };
}

t.test('when a wake-up is sent, then FCM gets the token, string data naming the incident and the Android priority and TTL', async (t) => {
  const { stub, send } = await setup(t);
  t.same(await send(), { outcome: 'accepted', status: 200 });
  t.same(stub.refused, []);
  const m = stub.sent[0]!.message;
  t.equal(m.token, 'device-token-1');
  t.same(m.data, { incidentId: '42', originId: 'CAD-2026-0042', type: 'FIRE', priority: '1', pushId: '7' });
  t.same(m.android, { priority: 'HIGH', ttl: '3600s' });
  await send({ ...message, priority: 3, ttlSeconds: 12.9 });
  t.same(stub.sent[1]!.message.android, { priority: 'NORMAL', ttl: '12s' });
  secrets.push(stub.sent[0]!.bearer);
});

t.test('when many sends start together, then one token request serves them all, and the token is kept for later sends', async (t) => {
  const { stub, channel, send } = await setup(t);
  stub.tokenDelayMs = 100;
  const all = await Promise.all(Array.from({ length: 20 }, (_, i) => send(message, `device-${i}`)));
  t.ok(all.every((o) => o.outcome === 'accepted'));
  t.equal(stub.tokenRequests, 1, 'one token request');
  await send();
  t.equal(stub.tokenRequests, 1, 'kept');
  t.equal(channel.tokensRequested, 1);
  t.equal(new Set(stub.sent.map((s) => s.bearer)).size, 1);
  secrets.push(stub.sent[0]!.bearer);
});

t.test('when FCM answers 401 for an expired token, then retry, and the next send fetches a new token', async (t) => {
  const { stub, send } = await setup(t);
  await send();
  stub.answer = 'expired-token';
  const o = await send();
  t.match(o, { outcome: 'retry', status: 401 });
  const first = stub.sent[0]!.bearer;
  secrets.push(first);
  t.notOk(JSON.stringify(o).includes(first), 'the echoed token is not in the detail');
  stub.answer = 'ok';
  t.same(await send(), { outcome: 'accepted', status: 200 });
  t.equal(stub.tokenRequests, 2, 'a second token');
  t.not(stub.sent[2]!.bearer, first);
  secrets.push(stub.sent[2]!.bearer);
  // a token the stub stopped accepting without saying so at issue: the same path
  stub.expireTokens();
  t.match(await send(), { outcome: 'retry', status: 401 });
  t.same(await send(), { outcome: 'accepted', status: 200 });
  t.equal(stub.tokenRequests, 3);
});

t.test('when FCM answers UNREGISTERED, 404, 503, 429, 400, then gone, gone, retry, retry (Retry-After), rejected', async (t) => {
  const { stub, send } = await setup(t);
  stub.answer = 'unregistered';
  t.match(await send(), { outcome: 'gone', status: 404, detail: /UNREGISTERED/ });
  stub.answer = 'not-found';
  t.match(await send(), { outcome: 'gone', status: 404 });
  stub.answer = 'unavailable';
  t.match(await send(), { outcome: 'retry', status: 503 });
  stub.answer = 'quota';
  t.match(await send(), { outcome: 'retry', status: 429, retryAfterMs: 30_000 });
  stub.answer = 'invalid';
  t.match(await send(), { outcome: 'rejected', status: 400, detail: /INVALID_ARGUMENT/ });
  t.equal(stub.tokenRequests, 1);
});

t.test('when the assertion is signed with a key that is not the service account\'s, then the token endpoint refuses it and the send is rejected without reaching FCM', async (t) => {
  const wrong = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const { stub, send } = await setup(t, { privateKeyPem: wrong });
  const o = await send();
  t.match(o, { outcome: 'rejected', status: 400, detail: /access token request was answered 400/ });
  t.same(stub.refused, ['Invalid JWT Signature.']);
  t.equal(stub.sent.length, 0);
});

t.test('when the token endpoint fails for now, then retry, and a later send asks again', async (t) => {
  const { stub, send } = await setup(t);
  stub.tokenFailure = 503;
  t.match(await send(), { outcome: 'retry', status: 503, detail: /access token/ });
  stub.tokenFailure = null;
  t.same(await send(), { outcome: 'accepted', status: 200 });
  t.equal(stub.tokenRequests, 2);
});

t.test('when FCM or the token endpoint does not answer within the deadline, or the caller aborts, then retry', async (t) => {
  const { stub, send } = await setup(t, { timeoutMs: 300 });
  stub.answer = 'hang';
  t.same(await send(), { outcome: 'retry', status: null, detail: 'no answer within 300 ms' });
  const caller = new AbortController();
  setTimeout(() => caller.abort(), 50);
  t.same(await send(message, 'device-token-1', caller.signal), { outcome: 'retry', status: null, detail: 'aborted' });
  // a slow token endpoint: the send gives up at its deadline, the token still arrives for the next
  const slow = await setup(t, { timeoutMs: 2000 });
  slow.stub.tokenDelayMs = 200;
  const aborting = new AbortController();
  setTimeout(() => aborting.abort(), 50);
  t.same(await slow.send(message, 'device-token-1', aborting.signal), { outcome: 'retry', status: null, detail: 'aborted' });
  t.same(await slow.send(), { outcome: 'accepted', status: 200 });
  t.equal(slow.stub.tokenRequests, 1, 'the aborted send did not cancel the shared token request');
});

t.test('when the service account file lacks a field, then it is refused naming the field, not a value', async (t) => {
  t.throws(() => parseServiceAccount('{'), /not JSON/);
  t.throws(() => parseServiceAccount(JSON.stringify({ project_id: 'p', client_email: 'e', token_uri: 'https://x' })), /no private_key/);
});

t.test('then no outcome detail holds the service account key or an access token, and each is at most 200 characters', async (t) => {
  t.ok(outcomes.length >= 20);
  t.ok(secrets.length >= 5);
  for (const o of outcomes) {
    const detail = 'detail' in o ? o.detail : '';
    for (const s of secrets) t.notOk(detail.includes(s), 'no secret');
    t.notMatch(detail, /PRIVATE KEY|ya29\./);
    t.ok(detail.length <= 200);
  }
});

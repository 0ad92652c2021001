// The APNs wake channel (src/adapters/wake/apns.ts, issue 39) against an HTTP/2 TLS stub that
// verifies the ES256 provider token with the team's key (test/fixtures/wake/apns-stub.ts): the
// headers and the alert, critical alerts, each outcome, one provider token reused for 50 minutes,
// one session reused and reopened when it closes, and no secret in any detail.
import t, { type Test } from 'tap';
import { generateKeyPairSync } from 'node:crypto';
import { connect as tcpConnect, createServer as createTcpServer, type Socket } from 'node:net';
import type { WakeMessage, WakeOutcome } from '../../../src/ports/wake.js';
import { ApnsChannel } from '../../../src/adapters/wake/apns.js';
import { ApnsStub } from '../../fixtures/wake/apns-stub.js';
import { requireTrustedTestCert } from '../../fixtures/wake/tls.js';

requireTrustedTestCert();

const message: WakeMessage = { incidentId: 42, originId: 'CAD-2026-0042', type: 'FIRE', priority: 1, pushId: 7, deviceId: 3, ttlSeconds: 3600 };
const outcomes: WakeOutcome[] = [];
const secrets: string[] = [];
const TOKEN = 'a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90';

async function setup(t: Test, options: { timeoutMs?: number; key?: string; now?: () => number } = {}) {
  const stub = await ApnsStub.start();
  const key = options.key ?? stub.keyPem;
  secrets.push(key);
  const channel = new ApnsChannel({ key, keyId: stub.keyId, teamId: stub.teamId, topic: stub.topic, endpoint: stub.origin, ...(options.timeoutMs ? { timeoutMs: options.timeoutMs } : {}), ...(options.now ? { now: options.now } : {}) });
  t.teardown(async () => {
    await channel.close();
    await stub.close();
  });
  const send = async (m: WakeMessage = message, critical = false, signal?: AbortSignal) => {
    const o = await channel.send({ kind: 'apns', token: TOKEN, critical }, m, signal);
    outcomes.push(o);
    return o;
  };
  return { stub, channel, send };
}

t.test('when a wake-up is sent, then APNs gets the provider token, the alert headers and an alert naming the incident with its fields', async (t) => {
  const { stub, send } = await setup(t);
  const before = Math.floor(Date.now() / 1000);
  t.same(await send({ ...message, priority: 2 }), { outcome: 'accepted', status: 200 });
  t.same(stub.refused, []);
  const s = stub.sent[0]!;
  secrets.push(s.jwt);
  t.equal(s.token, TOKEN);
  t.equal(s.headers['apns-push-type'], 'alert');
  t.equal(s.headers['apns-priority'], '10');
  t.equal(s.headers['apns-collapse-id'], 'incident-42');
  t.equal(s.headers['apns-topic'], stub.topic);
  const expiration = Number(s.headers['apns-expiration']);
  t.ok(expiration >= before + 3600 && expiration <= before + 3602, 'expires with the push');
  t.match(s.body, { incidentId: 42, originId: 'CAD-2026-0042', type: 'FIRE', priority: 2, pushId: 7 });
  t.match(s.body.aps.alert, { title: /FIRE/, body: /CAD-2026-0042/ });
  t.equal(s.body.aps['interruption-level'], undefined, 'not critical: priority 2');
  t.equal(s.body.aps.sound, 'default');
});

t.test('when priority 1 goes to a critical target, then a critical alert; to another target, or priority 2, an ordinary one', async (t) => {
  const { stub, send } = await setup(t);
  await send(message, true);
  t.equal(stub.sent[0]!.body.aps['interruption-level'], 'critical');
  t.same(stub.sent[0]!.body.aps.sound, { critical: 1, name: 'default', volume: 1 });
  await send(message, false);
  t.equal(stub.sent[1]!.body.aps['interruption-level'], undefined);
  await send({ ...message, priority: 2 }, true);
  t.equal(stub.sent[2]!.body.aps['interruption-level'], undefined);
  t.equal(stub.sent[2]!.body.aps.sound, 'default');
});

t.test('when APNs answers 410, 400 BadDeviceToken, 429, 500, then gone, gone, retry (Retry-After), retry', async (t) => {
  const { stub, send } = await setup(t);
  stub.answer = 410;
  t.same(await send(), { outcome: 'gone', status: 410, detail: '410 Unregistered' });
  stub.answer = 'BadDeviceToken';
  t.same(await send(), { outcome: 'gone', status: 400, detail: '400 BadDeviceToken' });
  stub.answer = 429;
  t.match(await send(), { outcome: 'retry', status: 429, retryAfterMs: 5000 });
  stub.answer = 500;
  t.match(await send(), { outcome: 'retry', status: 500, detail: '500 InternalServerError' });
});

t.test('when the provider token is signed with another key, then APNs refuses it: rejected', async (t) => {
  const other = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const { stub, send } = await setup(t, { key: other });
  t.same(await send(), { outcome: 'rejected', status: 403, detail: '403 InvalidProviderToken' });
  t.same(stub.refused, ['InvalidProviderToken']);
  t.equal(stub.sent.length, 0);
});

t.test('when many sends go out over 50 minutes, then one provider token and one session serve them; after 50 minutes a new token', async (t) => {
  let now = Date.now();
  const { stub, channel, send } = await setup(t, { now: () => now });
  const all = await Promise.all(Array.from({ length: 20 }, () => send()));
  t.ok(all.every((o) => o.outcome === 'accepted'));
  now += 49 * 60_000;
  await send();
  t.equal(new Set(stub.sent.map((s) => s.jwt)).size, 1, 'one JWT');
  t.equal(channel.tokensSigned, 1);
  t.equal(stub.connections, 1, 'one HTTP/2 connection');
  t.equal(channel.sessionsStarted, 1);
  now += 2 * 60_000;
  await send();
  t.equal(channel.tokensSigned, 2, 'renewed after 50 minutes');
  t.not(stub.sent.at(-1)!.jwt, stub.sent[0]!.jwt);
  for (const s of stub.sent) secrets.push(s.jwt);
});

t.test('when APNs says the token expired, then retry, and the next send signs a new one', async (t) => {
  const { stub, channel, send } = await setup(t);
  stub.answer = 'ExpiredProviderToken';
  t.match(await send(), { outcome: 'retry', status: 403 });
  stub.answer = 200;
  t.same(await send(), { outcome: 'accepted', status: 200 });
  t.equal(channel.tokensSigned, 2);
});

t.test('when the connection closes, then the next send opens a new session', async (t) => {
  const { stub, channel, send } = await setup(t);
  t.same(await send(), { outcome: 'accepted', status: 200 });
  stub.dropConnections();
  await new Promise((r) => setTimeout(r, 50));
  t.same(await send(), { outcome: 'accepted', status: 200 });
  t.equal(channel.sessionsStarted, 2);
  t.equal(stub.connections, 2);
});

t.test('when APNs does not answer within the deadline, or the caller aborts, then retry; the session still serves the next send', async (t) => {
  const { stub, channel, send } = await setup(t, { timeoutMs: 1000 });
  stub.answer = 'hang';
  t.same(await send(), { outcome: 'retry', status: null, detail: 'no answer within 1000 ms' });
  const caller = new AbortController();
  setTimeout(() => caller.abort(), 50);
  t.same(await send(message, false, caller.signal), { outcome: 'retry', status: null, detail: 'aborted' });
  stub.answer = 200;
  t.same(await send(), { outcome: 'accepted', status: 200 });
  t.equal(channel.sessionsStarted, 1);
});

/** a TCP relay to `port` that can go silent (as a connection a NAT dropped): new connections relay again */
async function relay(t: Test, port: number) {
  const pairs: Socket[][] = [];
  const server = createTcpServer((inbound) => {
    const outbound = tcpConnect(port, '127.0.0.1');
    inbound.pipe(outbound).pipe(inbound);
    inbound.on('error', () => outbound.destroy());
    outbound.on('error', () => inbound.destroy());
    pairs.push([inbound, outbound]);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => {
    for (const p of pairs) for (const s of p) s.destroy();
    server.close();
  });
  return {
    origin: `https://127.0.0.1:${(server.address() as { port: number }).port}`,
    silence: () => {
      for (const [inbound, outbound] of pairs) {
        inbound!.unpipe();
        outbound!.unpipe();
      }
    },
  };
}

t.test('when the connection goes silent, then the send times out, the session fails its PING and the next send opens a new one', async (t) => {
  const stub = await ApnsStub.start();
  t.teardown(() => stub.close());
  const r = await relay(t, Number(new URL(stub.origin).port));
  const channel = new ApnsChannel({ key: stub.keyPem, keyId: stub.keyId, teamId: stub.teamId, topic: stub.topic, endpoint: r.origin, timeoutMs: 1000 });
  t.teardown(() => channel.close());
  const target = { kind: 'apns' as const, token: TOKEN, critical: false };
  t.same(await channel.send(target, message), { outcome: 'accepted', status: 200 });
  r.silence();
  t.same(await channel.send(target, message), { outcome: 'retry', status: null, detail: 'no answer within 1000 ms' });
  await new Promise((res) => setTimeout(res, 3300));
  t.same(await channel.send(target, message), { outcome: 'accepted', status: 200 });
  t.equal(channel.sessionsStarted, 2, 'a new session');
});

t.test('when nothing listens at the endpoint, then retry with the error code only', async (t) => {
  const stub = await ApnsStub.start();
  const endpoint = stub.origin;
  await stub.close();
  const channel = new ApnsChannel({ key: stub.keyPem, keyId: stub.keyId, teamId: stub.teamId, topic: stub.topic, endpoint });
  t.teardown(() => channel.close());
  const o = await channel.send({ kind: 'apns', token: TOKEN, critical: false }, message);
  t.same(o, { outcome: 'retry', status: null, detail: 'no HTTP answer (ECONNREFUSED)' });
});

t.test('then no outcome detail holds the APNs key or a provider token, and each is at most 200 characters', async (t) => {
  t.ok(outcomes.length >= 30);
  for (const o of outcomes) {
    const detail = 'detail' in o ? o.detail : '';
    for (const s of secrets) t.notOk(detail.includes(s), 'no secret');
    t.ok(detail.length <= 200);
  }
});

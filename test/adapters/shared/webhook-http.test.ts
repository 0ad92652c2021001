// The webhook transport over http/https (src/adapters/shared/webhook-http.ts) against a local
// HTTP server: the public-address rule checked on the address connected to (a name resolving to
// loopback is refused before any connection), redirects not followed, the timeout, Retry-After,
// and what a failed attempt says: never the address a name resolved to, nor whether the port
// refused or stayed silent (issue 36).
import t, { type Test } from 'tap';
import { createServer, type Server } from 'node:http';
import { createServer as createTcpServer } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { HOST_REFUSED, httpWebhookTransport, noAnswer } from '../../../src/adapters/shared/webhook-http.js';
import { dnsStub } from '../../fixtures/dns-stub.js';

async function server(t: Test, handle: Parameters<typeof createServer>[1]): Promise<{ port: number; hits: () => number }> {
  let hits = 0;
  const s: Server = createServer((req, res) => {
    hits++;
    handle!(req, res);
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => new Promise<void>((r) => { s.closeAllConnections(); s.close(() => r()); }));
  return { port: (s.address() as { port: number }).port, hits: () => hits };
}

const transport = httpWebhookTransport();
const request = (url: string, allowPrivate: boolean, timeoutMs = 5000) => transport.post({ url, headers: { 'webhook-id': 'msg_1' }, body: '{"type":"x"}', timeoutMs, allowPrivate });

t.test('when a name resolves to a loopback address and private addresses are not allowed, then nothing connects and the attempt says why', async (t) => {
  const s = await server(t, (_req, res) => res.writeHead(204).end());
  const byName = await request(`http://localhost:${s.port}/hook`, false);
  t.same(byName, { status: null, error: HOST_REFUSED }, 'the address it resolved to is not told');
  const literal = await request(`http://127.0.0.1:${s.port}/hook`, false);
  t.match(literal, { status: null, error: /not a public address/ });
  t.equal(s.hits(), 0, 'the receiver was never called');
  t.same(await request(`http://localhost:${s.port}/hook`, true), { status: 204, retryAfter: null }, 'allowed with WEBHOOK_ALLOW_PRIVATE');
  t.equal(s.hits(), 1);
});

t.test('when the receiver redirects, then the redirect is an answer, not followed; Retry-After is passed on', async (t) => {
  const target = await server(t, (_req, res) => res.writeHead(204).end());
  const s = await server(t, (req, res) => {
    if (req.url === '/busy') return res.writeHead(503, { 'retry-after': '120' }).end();
    res.writeHead(302, { location: `http://127.0.0.1:${target.port}/` }).end();
  });
  t.same(await request(`http://127.0.0.1:${s.port}/hook`, true), { status: 302, retryAfter: null });
  t.equal(target.hits(), 0, 'the redirect target was not called');
  t.same(await request(`http://127.0.0.1:${s.port}/busy`, true), { status: 503, retryAfter: '120' });
});

t.test('when the receiver does not answer within the timeout, then the attempt ends with an error', async (t) => {
  const s = await server(t, () => {});
  const answer = await request(`http://127.0.0.1:${s.port}/hook`, true, 200);
  t.same(answer, { status: null, error: noAnswer(200) });
  t.equal(s.hits(), 1);
});

t.test('when a port refuses, resets or stays silent, then the attempts say the same; a name with a private address reads as one with none', async (t) => {
  // a port nothing listens on: taken, then let go
  const closed = await new Promise<number>((resolve) => {
    const probe = createTcpServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
  const silent = await server(t, () => {});
  const reset = await server(t, (req) => req.socket.destroy());
  const refused = await request(`http://127.0.0.1:${closed}/hook`, true, 300);
  const timedOut = await request(`http://127.0.0.1:${silent.port}/hook`, true, 300);
  const dropped = await request(`http://127.0.0.1:${reset.port}/hook`, true, 300);
  t.same(refused, { status: null, error: noAnswer(300) }, 'refused');
  t.same(timedOut, refused, 'silent: the same words');
  t.same(dropped, refused, 'reset: the same words');
  t.notMatch(JSON.stringify([refused, timedOut, dropped]), /ECONN|refused|127\.0\.0\.1/);

  const dns = await dnsStub(t, { 'inside.example.test': { a: ['10.20.30.40'] }, 'slow.example.test': 'silent' });
  const named = httpWebhookTransport({ lookup: { servers: [dns.server], timeoutMs: 300 } });
  const post = (url: string) => named.post({ url, headers: {}, body: '{}', timeoutMs: 2000, allowPrivate: false });
  const inside = await post('https://inside.example.test/hook');
  t.same(inside, { status: null, error: HOST_REFUSED }, 'a private address');
  t.same(await post('https://nowhere.example.test/hook'), inside, 'no address: the same words');
  t.same(await post('https://slow.example.test/hook'), inside, 'no answer from its DNS: the same words');
  t.notMatch(inside.status === null ? inside.error : '', /10\.20/);
});

t.test('when a body is signed with two secrets, then the header carries two v1 signatures, each verifying with its secret', async (t) => {
  const a = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
  const b = 'whsec_bmV3LXNlY3JldC1uZXctc2VjcmV0LW5ldy1zZWNyZXQ=';
  const at = new Date();
  const header = transport.sign([a, b], 'msg_2', at, '{"x":1}');
  const parts = header.split(' ');
  t.equal(parts.length, 2);
  t.ok(parts.every((p) => p.startsWith('v1,')));
  const headers = (sig: string) => ({ 'webhook-id': 'msg_2', 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': sig });
  t.ok(new Webhook(a).verify('{"x":1}', headers(parts[0]!)));
  t.ok(new Webhook(b).verify('{"x":1}', headers(parts[1]!)));
  t.throws(() => new Webhook(a).verify('{"x":2}', headers(header)), 'a tampered body');
  t.same(await transport.resolve('127.0.0.1'), ['127.0.0.1']);
});

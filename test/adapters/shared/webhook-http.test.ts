// The webhook transport over http/https (src/adapters/shared/webhook-http.ts) against a local
// HTTP server: the public-address rule checked on the address connected to (a name resolving to
// loopback is refused before any connection), redirects not followed, the timeout, Retry-After.
import t, { type Test } from 'tap';
import { createServer, type Server } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { httpWebhookTransport } from '../../../src/adapters/shared/webhook-http.js';

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
  t.match(byName, { status: null, error: /not a public address/ });
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
  t.match(answer, { status: null, error: /no answer within 200 ms/ });
  t.equal(s.hits(), 1);
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

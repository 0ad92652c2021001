// /api/webhooks (DESIGN section 11) through app.inject, on the adapter TEST_ADAPTER names: the
// CRUD owned by the caller, the URL and address rules, the secret shown once, rotation, the
// per-user limit, and isolation: a webhook never carries an incident its owner cannot see. The
// sender runs against a transport that records what it would POST (the real receiver is the
// e2e test's), signing with the real one (the standardwebhooks package).
import t, { type Test } from 'tap';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { Webhook } from 'standardwebhooks';
import { httpWebhookTransport } from '../../src/adapters/shared/webhook-http.js';
import type { WebhookAnswer, WebhookRequest, WebhookTransport } from '../../src/ports/webhooks.js';
import { adminAuth, basic, bearer, createUser, grant, json, makeApp } from '../fixtures/app.js';
import { incidentBody, send, world } from '../fixtures/incidents.js';
import { connect, until } from '../fixtures/sockets.js';
import { checkedWebhook, SPEC_WEBHOOK_TYPES } from '../fixtures/webhook-payloads.js';

/** names as a resolver would answer them */
const DNS: Record<string, string[]> = {
  'cad.example.org': ['93.184.216.34'],
  'other.example.org': ['93.184.216.35'],
  'internal.example.org': ['93.184.216.36', '10.0.0.5'],
};

class RecordingTransport implements WebhookTransport {
  readonly posts: WebhookRequest[] = [];
  answer: WebhookAnswer = { status: 204, retryAfter: null };
  private readonly real = httpWebhookTransport();
  async resolve(host: string): Promise<string[]> {
    const found = DNS[host];
    if (!found) throw new Error(`ENOTFOUND ${host}`);
    return found;
  }
  async post(req: WebhookRequest): Promise<WebhookAnswer> {
    this.posts.push(req);
    return this.answer;
  }
  sign(secrets: readonly string[], msgId: string, at: Date, body: string): string {
    return this.real.sign(secrets, msgId, at, body);
  }
}

async function build(t: Test, config: Record<string, unknown> = {}) {
  const transport = new RecordingTransport();
  const { app } = await makeApp(t, { webhookTransport: transport, webhookSender: { pollMs: 20 }, config });
  return { app, transport };
}

function hook(app: FastifyInstance, auth: string, body: Record<string, unknown>) {
  return send(app, auth, 'POST', '/api/webhooks', { url: 'https://cad.example.org/hooks', events: ['incident.closed'], ...body });
}

/** waits (bounded) until `n` posts were made: a failure names what arrived */
async function posts(t: Test, transport: RecordingTransport, n: number): Promise<WebhookRequest[]> {
  for (let i = 0; i < 500 && transport.posts.length < n; i++) await new Promise((r) => setTimeout(r, 20));
  t.equal(transport.posts.length, n, `${n} POSTs made`);
  return transport.posts;
}

t.test('when a user creates, reads, lists, updates and deletes its webhook, then the secret is shown only at creation', async (t) => {
  const { app } = await build(t);
  const w = await world(app);
  const created = await hook(app, w.cad, { events: ['incident.closed', 'incident.delivery'] });
  t.equal(created.status, 200);
  t.match(created.body, { id: Number, userId: w.cadId, url: 'https://cad.example.org/hooks', events: ['incident.closed', 'incident.delivery'], enabled: true, disabledReason: null });
  t.match(created.body.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
  const id = created.body.id as number;
  const got = await send(app, w.cad, 'GET', `/api/webhooks/${id}`);
  t.equal(got.status, 200);
  t.notOk('secret' in got.body, 'no secret when read');
  t.notOk(JSON.stringify(got.body).includes(created.body.secret), 'nor anywhere in it');
  const listed = await send(app, w.cad, 'GET', '/api/webhooks');
  t.same(listed.body.map((x: { id: number }) => x.id), [id]);
  t.notOk(JSON.stringify(listed.body).includes('whsec_'));
  const put = await send(app, w.cad, 'PUT', `/api/webhooks/${id}`, { url: 'https://other.example.org/x', events: ['incident.response'], enabled: false });
  t.match(put, { status: 200, body: { url: 'https://other.example.org/x', events: ['incident.response'], enabled: false } });
  t.equal((await send(app, w.cad, 'DELETE', `/api/webhooks/${id}`)).status, 204);
  t.equal((await send(app, w.cad, 'GET', `/api/webhooks/${id}`)).status, 404);
  t.equal((await send(app, w.cad, 'POST', '/api/webhooks', { url: 'https://cad.example.org/', events: [], enabled: true })).status, 400, 'at least one event');
  t.equal((await send(app, w.cad, 'POST', '/api/webhooks', { url: 'https://cad.example.org/', events: ['incident.opened'] })).status, 400, 'a known event');
  t.equal((await send(app, w.cad, 'POST', '/api/webhooks', { url: 'https://cad.example.org/', events: ['incident.closed'], secret: 'whsec_mine' })).status, 400, 'no client secret');
});

t.test('when a URL is not https or does not resolve only to public addresses, then 400; with WEBHOOK_ALLOW_PRIVATE, http to 127.0.0.1 is taken', async (t) => {
  const { app } = await build(t);
  const w = await world(app);
  for (const url of ['http://cad.example.org/hooks', 'https://127.0.0.1/hooks', 'https://[::1]/x', 'https://169.254.169.254/latest', 'https://internal.example.org/x', 'https://nowhere.example.org/x', 'https://u:p@cad.example.org/']) {
    const res = await hook(app, w.cad, { url });
    t.equal(res.status, 400, url);
    t.equal(res.body.errors?.[0]?.path, '/body/url', url);
  }
  const { app: open } = await makeApp(t, { webhookTransport: new RecordingTransport(), webhookSender: false, config: { webhookAllowPrivate: true } });
  const ow = await world(open);
  t.equal((await hook(open, ow.cad, { url: 'http://127.0.0.1:9999/hooks' })).status, 200);
});

t.test('when another user names a webhook, then 403; an administrator sees every webhook with all=true; a readonly user creates none', async (t) => {
  const { app } = await build(t);
  const w = await world(app);
  const mine = (await hook(app, w.cad, {})).body.id as number;
  const theirs = (await hook(app, w.other, {})).body.id as number;
  t.equal((await send(app, w.other, 'GET', `/api/webhooks/${mine}`)).status, 403);
  t.equal((await send(app, w.other, 'PUT', `/api/webhooks/${mine}`, { url: 'https://other.example.org/', events: ['incident.closed'] })).status, 403);
  t.equal((await send(app, w.other, 'DELETE', `/api/webhooks/${mine}`)).status, 403);
  t.equal((await send(app, w.other, 'POST', `/api/webhooks/${mine}/secret`)).status, 403);
  t.equal((await send(app, w.other, 'GET', `/api/webhooks/${mine}/deliveries`)).status, 403);
  t.same((await send(app, w.other, 'GET', '/api/webhooks?all=true')).body.map((x: { id: number }) => x.id), [theirs], 'all=true is ignored for a user');
  t.same((await send(app, adminAuth(), 'GET', '/api/webhooks?all=true')).body.map((x: { id: number }) => x.id), [mine, theirs]);
  t.same((await send(app, adminAuth(), 'GET', '/api/webhooks')).body, [], 'without all=true, the administrator’s own');
  t.equal((await send(app, adminAuth(), 'GET', `/api/webhooks/${mine}`)).status, 200);
  t.equal((await send(app, w.cad, 'GET', '/api/webhooks/999999')).status, 404);
  await createUser(app, { name: 'RO', email: 'ro@example.test', password: 'ro-password-1', readonly: true });
  const ro = basic('ro@example.test', 'ro-password-1');
  t.equal((await hook(app, ro, {})).status, 403);
  t.equal((await send(app, 'Basic bm8tb25lOm5vdGhpbmc=', 'GET', '/api/webhooks')).status, 401);
});

t.test('when a user holds 20 webhooks, then the next is refused, also when asked for at once', async (t) => {
  const { app } = await build(t);
  const w = await world(app);
  const answers = await Promise.all(Array.from({ length: 25 }, () => hook(app, w.cad, {})));
  t.equal(answers.filter((a) => a.status === 200).length, 20);
  t.equal(answers.filter((a) => a.status === 403).length, 5);
});

t.test('when the secret is rotated, then the new one is shown once and deliveries carry two signatures, one per secret', async (t) => {
  const { app, transport } = await build(t);
  const w = await world(app);
  const created = await hook(app, w.cad, {});
  const rotated = await send(app, w.cad, 'POST', `/api/webhooks/${created.body.id}/secret`);
  t.equal(rotated.status, 200);
  t.match(rotated.body, { secret: /^whsec_/, previousSecretExpiresAt: String });
  t.not(rotated.body.secret, created.body.secret);
  t.ok(Date.parse(rotated.body.previousSecretExpiresAt) - Date.now() > 23.9 * 3600_000, 'the previous one signs for 24 h');
  const inc = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: [] }));
  await send(app, w.cad, 'PUT', `/api/incidents/${inc.body.id}`, incidentBody({ status: 'CLOSED' }));
  const [post] = await posts(t, transport, 1);
  const sigs = post!.headers['webhook-signature']!.split(' ');
  t.equal(sigs.length, 2);
  t.ok(new Webhook(created.body.secret).verify(post!.body, post!.headers), 'the old secret verifies');
  t.ok(new Webhook(rotated.body.secret).verify(post!.body, post!.headers), 'the new secret verifies');
  t.notOk(JSON.stringify((await send(app, w.cad, 'GET', `/api/webhooks/${created.body.id}`)).body).includes('whsec_'));
});

t.test('when an incident is closed, then only webhooks whose owner sees it carry it: never another user’s', async (t) => {
  const { app, transport } = await build(t);
  const w = await world(app);
  const mine = await hook(app, w.cad, { url: 'https://cad.example.org/hooks' });
  const theirs = await hook(app, w.other, { url: 'https://other.example.org/hooks' });
  const inc = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'ISO-1', resources: [] }));
  const closed = await send(app, w.cad, 'PUT', `/api/incidents/${inc.body.id}`, incidentBody({ originId: 'ISO-1', status: 'CLOSED' }));
  t.equal(closed.status, 200);
  const [post] = await posts(t, transport, 1);
  t.equal(post!.url, 'https://cad.example.org/hooks');
  const verified = new Webhook(mine.body.secret).verify(post!.body, post!.headers) as { type: string; data: Record<string, unknown> };
  t.match(verified, { type: 'incident.closed', timestamp: String, data: { incidentId: inc.body.id, originId: 'ISO-1', deleted: false } });
  t.throws(() => new Webhook(theirs.body.secret).verify(post!.body, post!.headers), 'another secret does not verify it');
  // the POST was made; its outcome is written just after it answered: wait for that, bounded
  let deliveries = await send(app, w.cad, 'GET', `/api/webhooks/${mine.body.id}/deliveries`);
  for (let i = 0; i < 250 && deliveries.body[0]?.state === 'PENDING'; i++) {
    await new Promise((r) => setTimeout(r, 20));
    deliveries = await send(app, w.cad, 'GET', `/api/webhooks/${mine.body.id}/deliveries`);
  }
  t.match(deliveries.body, [{ type: 'incident.closed', incidentId: inc.body.id, state: 'DELIVERED', nextAttemptAt: null, webhookMessageId: post!.headers['webhook-id'], attempts: [{ status: 204, error: null }] }]);
  t.same((await send(app, w.other, 'GET', `/api/webhooks/${theirs.body.id}/deliveries`)).body, [], 'nothing for a user who cannot see the incident');
  // once given permission on the incident, the other user's webhook carries its next closing
  await grant(app, { userId: w.otherId, incidentId: inc.body.id });
  await send(app, w.cad, 'PUT', `/api/incidents/${inc.body.id}`, incidentBody({ originId: 'ISO-1', status: 'OPEN' }));
  await send(app, w.cad, 'PUT', `/api/incidents/${inc.body.id}`, incidentBody({ originId: 'ISO-1', status: 'CLOSED' }));
  const after = await posts(t, transport, 3);
  t.same(after.slice(1).map((p) => p.url).sort(), ['https://cad.example.org/hooks', 'https://other.example.org/hooks']);
  // redelivery: a new delivery, the same webhook-id
  const first = deliveries.body[0];
  const again = await send(app, w.cad, 'POST', `/api/webhooks/${mine.body.id}/deliveries/${first.id}/redeliver`);
  t.equal(again.status, 202);
  t.match(again.body, { state: 'PENDING', webhookMessageId: first.webhookMessageId });
  const all = await posts(t, transport, 4);
  t.equal(all[3]!.headers['webhook-id'], first.webhookMessageId);
  t.equal((await send(app, w.other, 'POST', `/api/webhooks/${mine.body.id}/deliveries/${first.id}/redeliver`)).status, 403);
  t.equal((await send(app, w.cad, 'POST', `/api/webhooks/${mine.body.id}/deliveries/999999/redeliver`)).status, 404);
  t.equal(json(await app.inject({ method: 'GET', url: `/api/webhooks/${mine.body.id}/deliveries?limit=1`, headers: { authorization: w.cad } })).length, 1);
});

t.test('when a push is acknowledged, its responder answers and the incident closes, then every event type of openapi.yaml’s webhooks is sent, each as its entry declares', async (t) => {
  const { app, transport } = await build(t);
  const w = await world(app);
  await hook(app, w.cad, { events: [...SPEC_WEBHOOK_TYPES] });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const token = (await app.inject({ method: 'POST', url: `/api/devices/${w.a7}/token`, headers: { authorization: adminAuth() } })).body;
  const device = await connect(t, `ws://127.0.0.1:${(app.server.address() as AddressInfo).port}/api/socket/device?token=${token}`);
  const created = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'ALL-1', resources: ['A7'] }));
  const id = (created.body.incident ?? created.body).id as number;
  const push = await until('the push', () => device.frames.find((f) => f.type === 'push'));
  device.ack(push.pushId);
  const responseId = randomUUID();
  const answered = await app.inject({ method: 'POST', url: `/api/incidents/${id}/responses`, headers: { authorization: bearer(token) }, payload: { responseId, status: 'RESPONDING' } });
  t.equal(answered.statusCode, 200);
  await send(app, w.cad, 'PUT', `/api/incidents/${id}`, incidentBody({ originId: 'ALL-1', status: 'CLOSED' }));
  // makeApp's transport refused (failing this test) any POST its webhooks entry does not declare
  const sent = await until('one of each event type', () => {
    const bodies = transport.posts.map((p) => checkedWebhook(p.body, p.headers));
    return new Set(bodies.map((b) => b.type)).size >= SPEC_WEBHOOK_TYPES.length && bodies;
  }, 10_000);
  t.same([...new Set(sent.map((b) => b.type))].sort(), [...SPEC_WEBHOOK_TYPES].sort(), 'each event type of the spec, none other');
  const of = (type: string) => sent.find((b) => b.type === type);
  t.match(of('incident.delivery'), { data: { incidentId: id, originId: 'ALL-1', deviceId: w.a7, callsign: 'A7', eventId: push.event.id, eventType: 'incidentAssigned', state: 'DELIVERED' } });
  t.match(of('incident.response'), { data: { incidentId: id, originId: 'ALL-1', deviceId: w.a7, callsign: 'A7', status: 'RESPONDING', responseId } });
  t.match(of('incident.closed'), { data: { incidentId: id, originId: 'ALL-1', timeClosed: String, deleted: false } });
});

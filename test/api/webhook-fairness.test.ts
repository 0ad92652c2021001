// The webhook sender shares its room by owner (issue 36; domain/webhook-share.ts), through the
// real app (app.inject) and its real sender, on the adapter TEST_ADAPTER names. The transport is a
// stand-in: POSTs to stuck.example.org never answer (until the test ends), as a receiver that
// hangs; the others are answered 204 at once. Every wait is bounded and generous; nothing here
// times the sender.
import t, { type Test } from 'tap';
import { httpWebhookTransport } from '../../src/adapters/shared/webhook-http.js';
import type { WebhookAnswer, WebhookRequest, WebhookTransport } from '../../src/ports/webhooks.js';
import { makeApp } from '../fixtures/app.js';
import { incidentBody, send, world } from '../fixtures/incidents.js';

const STUCK = 'https://stuck.example.org/hook';
const GOOD = 'https://cad.example.org/hooks';

class HangingTransport implements WebhookTransport {
  /** POSTs to the stuck receiver, still waiting for an answer */
  readonly hanging: (() => void)[] = [];
  readonly answered: WebhookRequest[] = [];
  private readonly real = httpWebhookTransport();
  async resolve(host: string): Promise<string[]> {
    return host === 'stuck.example.org' ? ['93.184.216.40'] : ['93.184.216.34'];
  }
  post(req: WebhookRequest): Promise<WebhookAnswer> {
    if (req.url !== STUCK) {
      this.answered.push(req);
      return Promise.resolve({ status: 204, retryAfter: null });
    }
    // once released (the test's end), a POST the sender still makes before it stops answers at
    // once: one left hanging would hold the sender's stop, and the app's teardown, for ever
    if (this.released) return Promise.resolve({ status: null, error: 'timed out' });
    return new Promise((resolve) => this.hanging.push(() => resolve({ status: null, error: 'timed out' })));
  }
  private released = false;
  sign(secrets: readonly string[], msgId: string, at: Date, body: string): string {
    return this.real.sign(secrets, msgId, at, body);
  }
  release(): void {
    this.released = true;
    for (const r of this.hanging.splice(0)) r();
  }
}

async function until(t: Test, what: string, probe: () => boolean, ms = 20_000, read: () => Promise<void> = async () => {}): Promise<void> {
  const end = Date.now() + ms;
  while ((await read(), !probe())) {
    if (Date.now() > end) {
      t.fail(`${what}: not within ${ms} ms`);
      return;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

t.test('when one owner’s 20 webhooks hang, then another owner’s webhook still gets its 15 deliveries attempted, and the hanging owner holds at most half the node’s slots', async (t) => {
  const transport = new HangingTransport();
  const { app } = await makeApp(t, { webhookTransport: transport, webhookSender: { pollMs: 20 }, config: { webhookAllowPrivate: false } });
  // runs before the app closes (teardowns run last registered first): the sender's stop waits for its attempts
  t.teardown(() => transport.release());
  const w = await world(app);
  for (let i = 0; i < 20; i++) t.equal((await send(app, w.cad, 'POST', '/api/webhooks', { url: STUCK, events: ['incident.closed'] })).status, 200);
  // two incidents of the stuck owner closed: 40 deliveries, far more than the node's 32 slots
  for (let i = 0; i < 2; i++) {
    const created = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: `STUCK-${i}` }));
    await send(app, w.cad, 'PUT', `/api/incidents/${created.body.id}`, incidentBody({ originId: `STUCK-${i}`, status: 'CLOSED' }));
  }
  await until(t, 'the stuck owner’s attempts under way', () => transport.hanging.length >= 16);
  const hook = await send(app, w.other, 'POST', '/api/webhooks', { url: GOOD, events: ['incident.closed'] });
  t.equal(hook.status, 200);
  for (let i = 0; i < 15; i++) {
    const created = await send(app, w.other, 'POST', '/api/incidents', incidentBody({ originId: `LATE-${i}` }));
    await send(app, w.other, 'PUT', `/api/incidents/${created.body.id}`, incidentBody({ originId: `LATE-${i}`, status: 'CLOSED' }));
  }
  await until(t, 'the other owner’s 15 deliveries attempted', () => transport.answered.length >= 15);
  t.equal(transport.answered.length, 15, 'each of the other owner’s deliveries attempted, once');
  t.ok(transport.hanging.length <= 16, `the stuck owner holds at most 16 of the node’s 32 slots (${transport.hanging.length})`);
  let listed: { state: string; attempts: unknown[] }[] = [];
  await until(t, 'the 15 recorded DELIVERED', () => listed.length === 15 && listed.every((d) => d.state === 'DELIVERED'), 20_000, async () => {
    listed = (await send(app, w.other, 'GET', `/api/webhooks/${hook.body.id}/deliveries`)).body;
  });
  t.ok(listed.every((d) => d.attempts.length === 1), 'one attempt each');
});

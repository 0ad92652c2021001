// The host-name lookups of POST/PUT /api/webhooks (issue 36), through app.inject on the real
// transport (adapters/shared/webhook-http.ts), its resolver pointed at a DNS stub on 127.0.0.1:
// one user's creates waiting on a domain that never answers hold up no one else (another user's
// create, an incident create), and are bounded per user (503 busy, Retry-After); users holding
// every lookup of the node make room for another user (its create takes the place of the largest
// holder's newest lookup, answered 503 busy) rather than refusing it; a user at the
// webhook limit makes no lookup at all; a refused URL does not tell what an internal name resolves
// to; a URL is stored at most 2 048 characters long, written out.
import t, { type Test } from 'tap';
import { httpWebhookTransport } from '../../src/adapters/shared/webhook-http.js';
import { WEBHOOK_LOOKUPS_MAX, WEBHOOK_LOOKUPS_PER_USER_MAX, WEBHOOKS_PER_USER_MAX } from '../../src/domain/webhook.js';
import { basic, bearer, createUser, makeApp, mintToken } from '../fixtures/app.js';
import { dnsStub } from '../fixtures/dns-stub.js';
import { incidentBody, send, world } from '../fixtures/incidents.js';

const ZONE = {
  'cad.example.test': { a: ['93.184.216.34'] },
  'hang.attacker.test': 'silent',
  'inside.example.test': { a: ['10.20.30.40'] },
} as const;

/** the app, its users by token (a Basic credential would queue on password checks), the stub */
async function build(t: Test, lookupTimeoutMs: number) {
  const dns = await dnsStub(t, { ...ZONE });
  const transport = httpWebhookTransport({ lookup: { servers: [dns.server], timeoutMs: lookupTimeoutMs } });
  const { app } = await makeApp(t, { webhookTransport: transport, webhookSender: false });
  const w = await world(app);
  return { app, dns, w, cad: bearer(await mintToken(app, w.cad)), attacker: bearer(await mintToken(app, w.other)) };
}

const hook = (url: string) => ({ url, events: ['incident.closed'] });

t.test('when one user’s webhook creates wait on a domain that never answers, then another user’s webhook create and an incident create are answered meanwhile, and the user’s extra creates are refused at once', async (t) => {
  const { app, dns, cad, attacker } = await build(t, 6000);
  let waitingEnded = 0;
  const attack = Array.from({ length: 30 }, () =>
    send(app, attacker, 'POST', '/api/webhooks', hook('https://hang.attacker.test/x')).then((r) => {
      waitingEnded++;
      return r;
    }),
  );
  // the refusals come back at once; the creates under way wait on the silent domain
  for (let i = 0; i < 500 && waitingEnded < 30 - WEBHOOK_LOOKUPS_PER_USER_MAX; i++) await new Promise((r) => setTimeout(r, 10));
  t.equal(waitingEnded, 30 - WEBHOOK_LOOKUPS_PER_USER_MAX, `all but ${WEBHOOK_LOOKUPS_PER_USER_MAX} answered while those wait`);

  const other = await send(app, cad, 'POST', '/api/webhooks', hook('https://cad.example.test/hooks'));
  t.equal(other.status, 200, 'another user’s create');
  const incident = await send(app, cad, 'POST', '/api/incidents', incidentBody({ originId: 'CAD-DNS-1', resources: ['E1'] }));
  t.ok(incident.status === 200 || incident.status === 202, 'an incident create');
  t.equal(waitingEnded, 30 - WEBHOOK_LOOKUPS_PER_USER_MAX, 'both answered while the attacker’s lookups were still under way');

  t.ok(dns.asked.includes('hang.attacker.test'), 'the attacker’s domain was asked');
  const answers = await Promise.all(attack);
  const busy = answers.filter((a) => a.status === 503);
  t.equal(busy.length, 30 - WEBHOOK_LOOKUPS_PER_USER_MAX, 'over the per-user bound: 503');
  t.match(busy[0], { headers: { 'retry-after': /^[1-9]\d*$/, 'content-type': /^application\/problem\+json/ }, body: { type: /busy$/, status: 503 } });
  const waited = answers.filter((a) => a.status !== 503);
  t.same(waited.map((a) => a.status), Array(WEBHOOK_LOOKUPS_PER_USER_MAX).fill(400), 'the ones that waited: refused by the lookup’s deadline');
  t.match(waited[0]?.body, { errors: [{ path: '/body/url' }] });

  // the places are free again
  const again = await send(app, attacker, 'POST', '/api/webhooks', hook('https://cad.example.test/mine'));
  t.equal(again.status, 200);
});

t.test('when 8 users hold every lookup of the node on a domain that never answers, then another user’s webhook create gets a lookup and is created; the largest holder’s newest lookup gives way', async (t) => {
  const { app, cad, dns } = await build(t, 8000);
  const holders = WEBHOOK_LOOKUPS_MAX / WEBHOOK_LOOKUPS_PER_USER_MAX;
  t.ok(holders >= 8);
  const tokens: string[] = [];
  for (let i = 0; i < holders; i++) {
    const email = `holder${i}@example.test`;
    await createUser(app, { name: `Holder ${i}`, email, password: 'holder-password' });
    tokens.push(bearer(await mintToken(app, basic(email, 'holder-password'))));
  }
  const ended: { holder: number; n: number; status: number }[] = [];
  const held = tokens.flatMap((auth, holder) =>
    Array.from({ length: WEBHOOK_LOOKUPS_PER_USER_MAX }, (_, n) =>
      send(app, auth, 'POST', '/api/webhooks', hook(`https://hang.attacker.test/${holder}/${n}`)).then((r) => {
        ended.push({ holder, n, status: r.status });
        return r;
      }),
    ),
  );
  // every lookup under way: each asks A and AAAA once before its first retry (a third of the deadline)
  const asked = () => dns.asked.filter((n) => n === 'hang.attacker.test').length;
  for (let i = 0; i < 200 && asked() < 2 * WEBHOOK_LOOKUPS_MAX; i++) await new Promise((r) => setTimeout(r, 10));
  t.ok(asked() >= 2 * WEBHOOK_LOOKUPS_MAX, 'all the node’s lookups are under way');
  t.same(ended, [], 'and held');

  const other = await send(app, cad, 'POST', '/api/webhooks', hook('https://cad.example.test/hooks'));
  t.equal(other.status, 200, 'another user’s create is not refused busy');
  t.equal(other.body.url, 'https://cad.example.test/hooks');
  for (let i = 0; i < 200 && ended.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
  // which of holder 0's creates reached its lookup last depends on the store's timing (PostgreSQL's pool)
  t.match(ended, [{ holder: 0, status: 503 }], 'one of the largest holder’s (ties: the lowest id) lookups was cancelled, answered 503 busy');
  t.equal(ended.length, 1);

  // a holder holding as many as anyone gets no other's place: refused as before
  const more = await send(app, tokens[1]!, 'POST', '/api/webhooks', hook('https://cad.example.test/more'));
  t.equal(more.status, 503, 'a holder at its own bound is refused');
  await new Promise((r) => setTimeout(r, 100));
  t.equal(ended.length, 1, 'and cancelled no one');

  const answers = await Promise.all(held);
  t.equal(answers.filter((a) => a.status === 503).length, 1);
  t.equal(answers.filter((a) => a.status === 400).length, WEBHOOK_LOOKUPS_MAX - 1, 'the rest ended by the lookup’s deadline');
});

t.test('when a user holds the most webhooks it may, then its next create is refused without a lookup', async (t) => {
  const { app, dns, cad } = await build(t, 4000);
  for (let i = 0; i < WEBHOOKS_PER_USER_MAX; i++) {
    t.equal((await send(app, cad, 'POST', '/api/webhooks', hook(`https://93.184.216.34/h${i}`))).status, 200);
  }
  t.same(dns.asked, [], 'IP literals need no lookup');
  const over = await send(app, cad, 'POST', '/api/webhooks', hook('https://cad.example.test/one-more'));
  t.equal(over.status, 403);
  t.match(over.body, { detail: /at most 20 webhooks/ });
  t.same(dns.asked, [], 'no lookup was made');
});

t.test('when a URL’s host is private, has no address or does not answer, then the 400 says the same each time and never the address', async (t) => {
  const { app, cad } = await build(t, 500);
  const details: string[] = [];
  for (const host of ['localhost', 'inside.example.test', 'nowhere.example.test', 'hang.attacker.test']) {
    const res = await send(app, cad, 'POST', '/api/webhooks', hook(`https://${host}/hooks`));
    t.equal(res.status, 400, host);
    t.notMatch(JSON.stringify(res.body), /127\.0\.0\.1|::1|10\.20\.30\.40/, `${host}: no address in the answer`);
    details.push(String(res.body.detail).replace(host, 'HOST'));
  }
  t.equal(new Set(details).size, 1, `one text for all: ${details[0]}`);
  const put = await send(app, cad, 'POST', '/api/webhooks', hook('https://cad.example.test/hooks'));
  const changed = await send(app, cad, 'PUT', `/api/webhooks/${put.body.id}`, hook('https://inside.example.test/hooks'));
  t.equal(changed.status, 400, 'an update likewise');
  t.equal(String(changed.body.detail).replace('inside.example.test', 'HOST'), details[0]);
});

t.test('when a URL written out in ASCII is longer than 2 048 characters, then 400 and nothing is stored; one of 2 048 is stored as sent', async (t) => {
  const { app, cad, dns } = await build(t, 4000);
  // 1 000 characters sent, each written out as 12 (%F0%9D%84%9E)
  const long = await send(app, cad, 'POST', '/api/webhooks', hook(`https://cad.example.test/${'𝄞'.repeat(1000)}`));
  t.equal(long.status, 400);
  t.match(long.body, { errors: [{ path: '/body/url', message: /longer than 2048 characters/ }] });
  t.same(dns.asked, [], 'refused before any lookup');
  const base = 'https://cad.example.test/';
  const exact = `${base}${'a'.repeat(2048 - base.length)}`;
  const ok = await send(app, cad, 'POST', '/api/webhooks', hook(exact));
  t.equal(ok.status, 200);
  t.equal(ok.body.url, exact);
  t.same((await send(app, cad, 'GET', '/api/webhooks')).body.map((w: { url: string }) => w.url.length), [2048]);
});

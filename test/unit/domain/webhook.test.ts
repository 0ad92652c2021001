import t from 'tap';
import {
  afterAttempt,
  checkWebhookUrl,
  DEFAULT_RETRY_SCHEDULE_MS,
  hostAddress,
  isPublicAddress,
  ownerWorks,
  receives,
  retryAfterMs,
  signingSecrets,
  WEBHOOK_URL_MAX,
  type DeliveryCandidate,
} from '../../../src/domain/webhook.js';

t.test('when an address is private, loopback, link-local or reserved, then it is not public', async (t) => {
  for (const ip of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '224.0.0.1', '255.255.255.255',
    '::1', '::', 'fe80::1', 'fc00::1', 'fd12:3456::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1', '::ffff:7f00:1', '64:ff9b::a00:1', '2001:db8::1', 'ff02::1', '2002:a00:1::1', 'fe80::1%eth0']) {
    t.equal(isPublicAddress(ip), false, ip);
  }
});

t.test('when an address is global unicast, then it is public', async (t) => {
  for (const ip of ['8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8', '2a00:1450:4001:82b::200e']) {
    t.equal(isPublicAddress(ip), true, ip);
  }
});

t.test('when the text is no address, then it is not public', async (t) => {
  for (const ip of ['', 'localhost', '1.2.3', '1.2.3.256', '1:2:3:4:5:6:7:8:9', '::g', '1::2::3']) t.equal(isPublicAddress(ip), false, ip);
});

t.test('when a URL is checked, then https with a name passes, and http, credentials, fragments and private literals are refused', async (t) => {
  t.ok(checkWebhookUrl('https://cad.example.org/hooks?x=1', false).ok);
  t.notOk(checkWebhookUrl('http://cad.example.org/hooks', false).ok);
  t.ok(checkWebhookUrl('http://127.0.0.1:9000/hooks', true).ok, 'http and private with WEBHOOK_ALLOW_PRIVATE');
  t.notOk(checkWebhookUrl('https://127.0.0.1/hooks', false).ok);
  t.notOk(checkWebhookUrl('https://[::1]/hooks', false).ok);
  t.notOk(checkWebhookUrl('https://user:pw@cad.example.org/', false).ok);
  t.notOk(checkWebhookUrl('https://cad.example.org/#x', false).ok);
  t.notOk(checkWebhookUrl('ftp://cad.example.org/', true).ok);
  t.notOk(checkWebhookUrl('not a url', true).ok);
  t.equal(hostAddress('[::1]'), '::1');
  t.equal(hostAddress('cad.example.org'), null);
});

t.test('when Retry-After is seconds or an HTTP date, then it is read as a delay; else null', async (t) => {
  const now = Date.parse('2026-11-26T10:00:00Z');
  t.equal(retryAfterMs('120', now), 120_000);
  t.equal(retryAfterMs('Thu, 26 Nov 2026 10:01:00 GMT', now), 60_000);
  t.equal(retryAfterMs('soon', now), null);
  t.equal(retryAfterMs(null, now), null);
});

const base = { retryAfter: null, createdAt: '2026-11-26T10:00:00.000Z', now: Date.parse('2026-11-26T10:00:00.000Z'), random: 0.5 };

t.test('when the receiver answers 2xx, then the delivery is done; 410, then it fails and disables the webhook', async (t) => {
  t.same(afterAttempt({ ...base, status: 204, attempts: 1 }), { state: 'DELIVERED' });
  t.match(afterAttempt({ ...base, status: 410, attempts: 1 }), { state: 'FAILED', disableWebhook: true });
});

t.test('when an attempt fails, then the next follows the schedule with at most 20 % jitter', async (t) => {
  const at = (random: number, attempts: number) => {
    const o = afterAttempt({ ...base, status: 500, attempts, random });
    if (o.state !== 'PENDING') throw new Error('not pending');
    return Date.parse(o.nextAttemptAt) - base.now;
  };
  t.equal(at(0.5, 1), DEFAULT_RETRY_SCHEDULE_MS[0]);
  t.equal(at(0, 1), 4000);
  t.equal(at(0.999999, 1), 6000);
  t.equal(at(0.5, 2), 300_000);
  t.equal(at(0.5, 3), 1_800_000);
  t.equal(at(0.5, 1) < 10_000, true, 'the first retry within 10 s');
  t.equal(afterAttempt({ ...base, status: null, attempts: 1 }).state, 'PENDING', 'no answer is retried');
  t.equal(afterAttempt({ ...base, status: 302, attempts: 1 }).state, 'PENDING', 'a redirect is not followed, and retried');
});

t.test('when Retry-After asks for longer, then it is honoured up to 6 h; shorter does not hasten the schedule', async (t) => {
  const o = afterAttempt({ ...base, status: 503, retryAfter: '600', attempts: 1 });
  t.same(o, { state: 'PENDING', nextAttemptAt: '2026-11-26T10:10:00.000Z' });
  const short = afterAttempt({ ...base, status: 503, retryAfter: '1', attempts: 2 });
  t.same(short, { state: 'PENDING', nextAttemptAt: '2026-11-26T10:05:00.000Z' });
  const huge = afterAttempt({ ...base, status: 429, retryAfter: '999999', attempts: 1 });
  t.same(huge, { state: 'PENDING', nextAttemptAt: '2026-11-26T16:00:00.000Z' });
});

t.test('when the next attempt would fall past 24 h from the delivery written, then it is FAILED', async (t) => {
  const late = { ...base, now: Date.parse('2026-11-27T05:00:00.000Z') };
  t.match(afterAttempt({ ...late, status: 500, attempts: 6 }), { state: 'FAILED', disableWebhook: false });
  t.equal(afterAttempt({ ...late, status: 500, attempts: 1 }).state, 'PENDING');
});

t.test('when an address is in a reserved IPv4 block or an IPv6 block that carries or hides another, then it is not public; its neighbours are', async (t) => {
  for (const ip of ['192.0.0.1', '192.0.2.1', '198.18.0.1', '198.19.1.1', '198.51.100.1', '203.0.113.1', 'fec0::1', '2001:0::1', '::ffff:1.2.3.999']) t.equal(isPublicAddress(ip), false, ip);
  for (const ip of ['192.0.3.1', '192.1.0.1', '198.20.0.1', '198.51.101.1', '203.0.114.1', '203.1.113.1', '2001:470::1', '2001:4860:0:0:0:0:0:8888']) t.equal(isPublicAddress(ip), true, ip);
});

t.test('when a schedule or an age limit is given, then it is used; an empty schedule is the default one; Retry-After on a 4xx other than 429 is ignored', async (t) => {
  const next = (o: ReturnType<typeof afterAttempt>) => (o.state === 'PENDING' ? Date.parse(o.nextAttemptAt) - base.now : -1);
  t.equal(next(afterAttempt({ ...base, status: 500, attempts: 1, schedule: [1000, 2000] })), 1000);
  t.equal(next(afterAttempt({ ...base, status: 500, attempts: 9, schedule: [1000, 2000] })), 2000, 'the last delay repeats');
  t.equal(next(afterAttempt({ ...base, status: 500, attempts: 1, schedule: [] })), DEFAULT_RETRY_SCHEDULE_MS[0]);
  t.equal(next(afterAttempt({ ...base, status: 400, retryAfter: '600', attempts: 1 })), 5000);
  t.match(afterAttempt({ ...base, status: 500, attempts: 1, maxAgeMs: 1000 }), { state: 'FAILED' });
  t.equal(retryAfterMs('2026-11-26', Date.parse('2026-11-25T00:00:00Z')), null, 'a date without a day name or month is not an HTTP date');
  t.equal(retryAfterMs('Thu, 26 Nov 2026 09:00:00 GMT', Date.parse('2026-11-26T10:00:00Z')), 0, 'a date past is now');
});

t.test('when a URL is longer than WEBHOOK_URL_MAX once written out in ASCII, then it is refused; at the bound it passes (issue 36)', async (t) => {
  const base = 'https://cad.example.org/';
  t.ok(checkWebhookUrl(base + 'a'.repeat(WEBHOOK_URL_MAX - base.length), false).ok, 'exactly the bound');
  t.notOk(checkWebhookUrl(base + 'a'.repeat(WEBHOOK_URL_MAX - base.length + 1), false).ok, 'one over');
  const escaped = checkWebhookUrl(base + '\u{1D11E}'.repeat(200), false);
  t.notOk(escaped.ok, '200 characters that take 12 each when written out');
  t.match(escaped.ok ? '' : escaped.reason, /longer than 2048 characters once written out/);
});

// who receives an event (issue 38, 2026-11-29: decided here, no longer in each adapter's SQL)
const AT = '2026-11-29T12:00:00.000Z';
const hook: DeliveryCandidate = {
  webhookId: 7,
  enabled: true,
  events: ['incident.closed', 'incident.response'],
  owner: { disabled: false, expirationTime: null, administrator: false },
  ownerLinked: true,
};

t.test('when an enabled webhook of a working owner linked to the incident subscribes to the type, then it receives the event', async (t) => {
  t.equal(receives(hook, 'incident.closed', AT), true);
  t.equal(receives(hook, 'incident.response', AT), true);
});

t.test('when the webhook is disabled or does not subscribe to the type, then it receives nothing', async (t) => {
  t.equal(receives({ ...hook, enabled: false }, 'incident.closed', AT), false, 'disabled');
  t.equal(receives(hook, 'incident.delivery', AT), false, 'another type');
  t.equal(receives({ ...hook, events: [] }, 'incident.closed', AT), false, 'no type');
});

t.test('when the owner is disabled or past its expirationTime at the event, then its webhook receives nothing; expiring later, it does', async (t) => {
  t.equal(receives({ ...hook, owner: { ...hook.owner, disabled: true } }, 'incident.closed', AT), false, 'disabled');
  t.equal(receives({ ...hook, owner: { ...hook.owner, expirationTime: '2026-11-29T11:59:59.999Z' } }, 'incident.closed', AT), false, 'expired before');
  t.equal(receives({ ...hook, owner: { ...hook.owner, expirationTime: AT } }, 'incident.closed', AT), false, 'expiring at the very instant');
  t.equal(receives({ ...hook, owner: { ...hook.owner, expirationTime: '2026-11-29T12:00:00.001Z' } }, 'incident.closed', AT), true, 'expiring after');
  t.equal(receives({ ...hook, owner: { ...hook.owner, expirationTime: '2026-11-29T13:00:00+01:00' } }, 'incident.closed', AT), false, 'an offset is read as the instant it names');
  t.equal(receives({ ...hook, owner: { ...hook.owner, administrator: true, disabled: true } }, 'incident.closed', AT), false, 'a disabled administrator');
});

t.test('when the owner is not linked to the incident, then only an administrator’s webhook receives it', async (t) => {
  t.equal(receives({ ...hook, ownerLinked: false }, 'incident.closed', AT), false, 'a stranger');
  t.equal(receives({ ...hook, ownerLinked: false, owner: { ...hook.owner, administrator: true } }, 'incident.closed', AT), true, 'an administrator');
});

t.test('when an owner works is asked alone (the sender’s claim), then disabled and expired owners do not, others do', async (t) => {
  t.equal(ownerWorks({ disabled: false, expirationTime: null }, AT), true);
  t.equal(ownerWorks({ disabled: true, expirationTime: null }, AT), false);
  t.equal(ownerWorks({ disabled: false, expirationTime: '2026-11-29T11:00:00.000Z' }, AT), false);
  t.equal(ownerWorks({ disabled: false, expirationTime: '2026-12-01T00:00:00.000Z' }, AT), true);
});

t.test('when a secret was rotated, then the previous one signs too until its time is up, and not from then on', async (t) => {
  const w = { secret: 'whsec_new', previousSecret: 'whsec_old', previousSecretUntil: '2026-11-30T12:00:00.000Z' };
  t.same(signingSecrets(w, AT), ['whsec_new', 'whsec_old'], 'before');
  t.same(signingSecrets(w, '2026-11-30T12:00:00.000Z'), ['whsec_new'], 'at the very instant');
  t.same(signingSecrets(w, '2026-11-30T12:00:00.001Z'), ['whsec_new'], 'after');
  t.same(signingSecrets({ secret: 'whsec_new', previousSecret: null, previousSecretUntil: null }, AT), ['whsec_new'], 'never rotated');
  t.same(signingSecrets({ ...w, previousSecretUntil: null }, AT), ['whsec_new'], 'a previous secret with no time left');
  t.same(signingSecrets({ ...w, previousSecret: null }, AT), ['whsec_new'], 'a time with no previous secret');
});

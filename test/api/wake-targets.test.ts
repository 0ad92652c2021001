// /api/devices/{id}/wake-targets and /api/wake/vapid-public-key (DESIGN section 14) through
// app.inject, on the adapter TEST_ADAPTER names (every answer is checked against openapi.yaml by
// makeApp): each kind registered and listed as stored; each refusal; the device's own token and
// another device's; readonly users; the limit of 10 under 20 registrations at once; deleting;
// a deleted device's targets gone with it; no target's token or phone in the log.
import t, { type Test } from 'tap';
import pg from 'pg';
import type { FastifyInstance } from 'fastify';
import type { WakeKind } from '../../src/domain/wake.js';
import type { WakeSettings } from '../../src/config-wake.js';
import { adminAuth, basic, bearer, createDevice, createUser, grant, json, makeApp, mintToken } from '../fixtures/app.js';
import { call, isProblem } from '../fixtures/access.js';
import type { Db } from '../../src/adapters/sqlite/db.js';

const ALL: WakeKind[] = ['webpush', 'fcm', 'apns', 'sms', 'voice'];
const VAPID_PUBLIC = 'BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM';

function channels(kinds: readonly WakeKind[]): WakeSettings {
  return { configured: new Set(kinds), ...(kinds.includes('webpush') ? { webpush: { publicKey: VAPID_PUBLIC, privateKey: null as never, subject: 'mailto:ops@example.test' } } : {}) };
}

const TARGETS = {
  webpush: { kind: 'webpush', subscription: { endpoint: 'https://fcm.googleapis.com/fcm/send/abc:def', expirationTime: null, keys: { p256dh: 'BEl62iUYgUivxIkv69yViEuiBIa-Ib9-SkvMeAtA3LFgDzkrxZJjSgSnfckjBJuBkr3qBUYIHBQFLXYp5Nksh8U', auth: 'tBHItJI5svbpez7KI4CCXg' } } },
  fcm: { kind: 'fcm', token: 'dXJ1c2VyLXRva2VuOkFQQTkxYkhfZGVtb190b2tlbl8xMjM0NTY3ODkw' },
  apns: { kind: 'apns', token: 'A'.repeat(64) },
  sms: { kind: 'sms', phone: '+41791234567' },
  voice: { kind: 'voice', phone: '+14155550100' },
} as const;

interface World {
  app: FastifyInstance;
  lines: string[];
  pgUrl: string | undefined;
  db: Db;
  /** a user linked to D1; its manager; a readonly user linked to D1; a stranger */
  owner: string;
  manager: string;
  ro: string;
  stranger: string;
  d1: number;
  d2: number;
  d1Token: string;
  d2Token: string;
}

async function build(t: Test, kinds: readonly WakeKind[] = ALL, config: Record<string, unknown> = {}): Promise<World> {
  const lines: string[] = [];
  const { app, pgUrl, db } = await makeApp(t, { config: { wake: channels(kinds), ...config }, logger: { level: 'info', stream: { write: (line: string) => void lines.push(line) } } });
  await createUser(app, { name: 'M', email: 'm@example.test', password: 'm-password-1', userLimit: 5 });
  const manager = basic('m@example.test', 'm-password-1');
  const ownerId = await createUser(app, { name: 'O', email: 'o@example.test', password: 'o-password-1' }, manager);
  const roId = await createUser(app, { name: 'R', email: 'r@example.test', password: 'r-password-1', readonly: true });
  await createUser(app, { name: 'S', email: 's@example.test', password: 's-password-1' });
  const d1 = await createDevice(app, { name: 'D1', uniqueId: 'd1' });
  const d2 = await createDevice(app, { name: 'D2', uniqueId: 'd2' });
  await grant(app, { userId: ownerId, deviceId: d1 });
  await grant(app, { userId: roId, deviceId: d1 });
  const token = async (id: number) => {
    const res = await call(app, adminAuth(), 'POST', `/api/devices/${id}/token`);
    t.equal(res.statusCode, 200);
    return bearer(res.body);
  };
  return {
    app,
    lines,
    pgUrl,
    db,
    owner: basic('o@example.test', 'o-password-1'),
    manager,
    ro: basic('r@example.test', 'r-password-1'),
    stranger: basic('s@example.test', 's-password-1'),
    d1,
    d2,
    d1Token: await token(d1),
    d2Token: await token(d2),
  };
}

const url = (id: number, target?: number) => `/api/devices/${id}/wake-targets${target === undefined ? '' : `/${target}`}`;

t.test('when each kind is registered, then it is answered 201 as stored and listed in id order', async (t) => {
  const w = await build(t);
  const ids: number[] = [];
  for (const kind of ALL) {
    const res = await call(w.app, w.owner, 'POST', url(w.d1), TARGETS[kind]);
    t.equal(res.statusCode, 201, kind);
    const body = json(res);
    t.match(body, { id: Number, deviceId: w.d1, kind, createdAt: String }, kind);
    ids.push(body.id);
  }
  const listed = json(await call(w.app, w.owner, 'GET', url(w.d1)));
  t.same(listed.map((x: { id: number }) => x.id), ids, 'in id order');
  const byKind = Object.fromEntries(listed.map((x: { kind: string }) => [x.kind, x]));
  t.same(byKind.webpush.subscription, { endpoint: TARGETS.webpush.subscription.endpoint, keys: TARGETS.webpush.subscription.keys }, 'the subscription as registered, expirationTime dropped');
  t.same(byKind.apns, { id: ids[2], deviceId: w.d1, kind: 'apns', token: 'a'.repeat(64), critical: false, createdAt: byKind.apns.createdAt }, 'an APNs token in lower case, critical false when omitted');
  t.equal(byKind.fcm.token, TARGETS.fcm.token);
  t.equal(byKind.sms.phone, '+41791234567');
  t.equal(byKind.voice.phone, '+14155550100');
  const critical = json(await call(w.app, w.manager, 'POST', url(w.d1), { kind: 'apns', token: 'b'.repeat(64), critical: true }));
  t.equal(critical.critical, true, 'critical as asked; the owner’s manager may register');
  t.equal(json(await call(w.app, adminAuth(), 'GET', url(w.d1))).length, 6, 'an administrator lists them');
  const log = w.lines.join('');
  t.match(log, /wake target registered/);
  for (const secret of [TARGETS.fcm.token, 'a'.repeat(64), '+41791234567', '+14155550100', TARGETS.webpush.subscription.keys.auth, 'fcm/send/abc']) {
    t.notOk(log.includes(secret), `the log does not carry ${secret.slice(0, 12)}…`);
  }
});

t.test('when a target breaks its kind’s rules, then 400 names the field; a kind whose channel is not configured is 422', async (t) => {
  const w = await build(t, ['webpush', 'sms']);
  const bad = async (body: unknown, path: string, what: string) => {
    const res = await call(w.app, w.owner, 'POST', url(w.d1), body);
    isProblem(t, res, 400, 'invalid-request', what);
    t.ok(json(res).errors?.some((e: { path: string }) => e.path.startsWith(path)), `${what}: ${path} named (${JSON.stringify(json(res).errors)})`);
  };
  await bad({ kind: 'sms', phone: '0791234567' }, '/body/phone', 'a phone not E.164');
  await bad({ kind: 'sms', phone: '+41 79 123 45 67' }, '/body/phone', 'a phone with spaces');
  await bad({ kind: 'webpush', subscription: { ...TARGETS.webpush.subscription, endpoint: 'http://push.example.org/x' } }, '/body/subscription/endpoint', 'an http endpoint');
  await bad({ kind: 'webpush', subscription: { ...TARGETS.webpush.subscription, endpoint: 'https://10.0.0.5/x' } }, '/body/subscription/endpoint', 'a private address');
  await bad({ kind: 'webpush', subscription: { ...TARGETS.webpush.subscription, endpoint: 'https://[::1]/x' } }, '/body/subscription/endpoint', 'a loopback address');
  await bad({ kind: 'webpush', subscription: { endpoint: 'https://push.example.org/x', keys: { p256dh: 'not base64!', auth: 'x' } } }, '/body/subscription/keys', 'keys not base64url');
  await bad({ kind: 'webpush', subscription: { ...TARGETS.webpush.subscription, endpoint: `https://push.example.org/${'推'.repeat(1000)}` } }, '/body/subscription/endpoint', 'an endpoint of 9 000 characters once percent-encoded (500 on PostgreSQL before 2026-11-29)');
  await bad({ kind: 'pager', number: '1' }, '/body', 'an unknown kind (the schema)');
  await bad({ kind: 'sms', phone: '+41791234567', extra: 1 }, '/body', 'an unknown field');
  await bad({ kind: 'sms' }, '/body', 'no phone');
  for (const kind of ['fcm', 'apns', 'voice'] as const) {
    const res = await call(w.app, w.owner, 'POST', url(w.d1), TARGETS[kind]);
    isProblem(t, res, 422, 'channel-not-configured', kind);
    t.match(json(res).detail, new RegExp(`${kind} channel is not configured`));
  }
  t.same(json(await call(w.app, w.owner, 'GET', url(w.d1))), [], 'nothing was stored');
});

t.test('when WAKE_ALLOW_PRIVATE is set, then an endpoint on a private address is taken', async (t) => {
  const w = await build(t, ALL, { wakeAllowPrivate: true });
  const res = await call(w.app, w.owner, 'POST', url(w.d1), { kind: 'webpush', subscription: { ...TARGETS.webpush.subscription, endpoint: 'https://127.0.0.1:8443/push/1' } });
  t.equal(res.statusCode, 201);
});

t.test('when the device or the target does not exist, or the caller has no credentials, then 404 or 401', async (t) => {
  const w = await build(t);
  isProblem(t, await call(w.app, adminAuth(), 'GET', url(999_999)), 404, 'not-found', 'list of no device');
  isProblem(t, await call(w.app, adminAuth(), 'POST', url(999_999), TARGETS.sms), 404, 'not-found', 'register on no device');
  isProblem(t, await call(w.app, adminAuth(), 'DELETE', url(w.d1, 999_999)), 404, 'not-found', 'no target');
  const res = await w.app.inject({ method: 'POST', url: url(w.d1), payload: TARGETS.sms });
  isProblem(t, res, 401, 'unauthorized', 'no credentials');
  isProblem(t, await call(w.app, bearer('x'.repeat(43)), 'GET', url(w.d1)), 401, 'unauthorized', 'a token of nobody');
});

t.test('when a device uses its own token, then it manages its targets; another device’s token is 404, as a user who does not reach it', async (t) => {
  const w = await build(t);
  const mine = await call(w.app, w.d1Token, 'POST', url(w.d1), TARGETS.fcm);
  t.equal(mine.statusCode, 201, 'its own token registers');
  const id = json(mine).id as number;
  t.same(json(await call(w.app, w.d1Token, 'GET', url(w.d1))).map((x: { id: number }) => x.id), [id], 'and lists');
  for (const [auth, who] of [[w.d2Token, 'another device'], [w.stranger, 'a user who does not reach it']] as const) {
    isProblem(t, await call(w.app, auth, 'GET', url(w.d1)), 404, 'not-found', `${who}: list`);
    isProblem(t, await call(w.app, auth, 'POST', url(w.d1), TARGETS.sms), 404, 'not-found', `${who}: register`);
    isProblem(t, await call(w.app, auth, 'DELETE', url(w.d1, id)), 404, 'not-found', `${who}: delete`);
  }
  isProblem(t, await call(w.app, w.d2Token, 'DELETE', url(w.d2, id)), 404, 'not-found', 'a target of another device named under its own');
  t.equal((await call(w.app, w.d1Token, 'DELETE', url(w.d1, id))).statusCode, 204, 'its own token deletes');
  t.match(w.lines.join(''), new RegExp(`"byDevice":${w.d1}`), 'the log says which device asked');
  // a device token is no user credential elsewhere
  isProblem(t, await call(w.app, w.d1Token, 'GET', '/api/devices'), 401, 'unauthorized', 'a device token on a user operation');
});

t.test('when a readonly user reaches the device, then it may list its targets, not change them', async (t) => {
  const w = await build(t);
  const created = json(await call(w.app, w.owner, 'POST', url(w.d1), TARGETS.sms));
  t.equal((await call(w.app, w.ro, 'GET', url(w.d1))).statusCode, 200, 'lists');
  isProblem(t, await call(w.app, w.ro, 'POST', url(w.d1), TARGETS.voice), 403, 'readonly-user', 'registers nothing');
  isProblem(t, await call(w.app, w.ro, 'DELETE', url(w.d1, created.id)), 403, 'readonly-user', 'deletes nothing');
  t.equal(json(await call(w.app, w.owner, 'GET', url(w.d1))).length, 1);
});

t.test('when 20 registrations for one device run at once, then exactly 10 are stored and the others are 403', async (t) => {
  const w = await build(t);
  // Bearer tokens, not Basic: no password check queues the requests one behind the other
  const ownerToken = bearer(await mintToken(w.app, w.owner));
  const results = await Promise.all(Array.from({ length: 20 }, (_, i) => call(w.app, i % 2 ? w.d1Token : ownerToken, 'POST', url(w.d1), { kind: 'sms', phone: `+4179123${String(4000 + i)}` })));
  const statuses = results.map((r) => r.statusCode);
  t.equal(statuses.filter((s) => s === 201).length, 10, `10 stored (${statuses.join(',')})`);
  for (const r of results.filter((x) => x.statusCode !== 201)) isProblem(t, r, 403, 'forbidden', 'over the limit');
  t.match(json(results.find((r) => r.statusCode === 403)!).detail, /at most 10 wake targets/);
  t.equal(json(await call(w.app, w.owner, 'GET', url(w.d1))).length, 10, '10 listed');
  t.equal((await call(w.app, w.owner, 'POST', url(w.d1), TARGETS.voice)).statusCode, 403, 'one more is refused');
  const first = json(await call(w.app, w.owner, 'GET', url(w.d1)))[0].id as number;
  t.equal((await call(w.app, w.owner, 'DELETE', url(w.d1, first))).statusCode, 204);
  t.equal((await call(w.app, w.owner, 'POST', url(w.d1), TARGETS.voice)).statusCode, 201, 'after a delete, one more is taken');
  t.equal((await call(w.app, adminAuth(), 'POST', url(w.d2), TARGETS.voice)).statusCode, 201, 'another device counts its own');
});

t.test('when an app registers its target again (at each start, or several at once), then it is answered 200 with the one stored, updated, never a second', async (t) => {
  const w = await build(t);
  const token = { kind: 'apns', token: 'c'.repeat(64) };
  const results = await Promise.all(Array.from({ length: 8 }, () => call(w.app, w.d1Token, 'POST', url(w.d1), token)));
  t.same(results.map((r) => r.statusCode).sort(), [200, 200, 200, 200, 200, 200, 200, 201], 'one stored, seven found it there');
  t.equal(new Set(results.map((r) => json(r).id)).size, 1, 'each answer names the same target');
  const critical = await call(w.app, w.d1Token, 'POST', url(w.d1), { ...token, critical: true });
  t.equal(critical.statusCode, 200);
  t.match(json(critical), { id: json(results[0]!).id, critical: true }, 'updated to what was sent, its id kept');
  t.same(json(await call(w.app, w.owner, 'GET', url(w.d1))).map((x: { critical: boolean }) => x.critical), [true], 'listed once');
  // a full device still takes a target it holds again
  for (let i = 0; i < 9; i++) t.equal((await call(w.app, w.owner, 'POST', url(w.d1), { kind: 'sms', phone: `+4179123${4000 + i}` })).statusCode, 201);
  t.equal((await call(w.app, w.owner, 'POST', url(w.d1), { kind: 'sms', phone: '+41791235000' })).statusCode, 403, 'full');
  t.equal((await call(w.app, w.d1Token, 'POST', url(w.d1), token)).statusCode, 200, 'the held one again: 200, not 403');
  t.equal((await call(w.app, w.owner, 'POST', url(w.d1), { kind: 'voice', phone: '+41791234000' })).statusCode, 403, 'the same phone as another kind is another target');
});

t.test('when a target is deleted, then it is gone; when its device is deleted, then its targets go with it', async (t) => {
  const w = await build(t);
  const a = json(await call(w.app, w.owner, 'POST', url(w.d1), TARGETS.sms)).id as number;
  const b = json(await call(w.app, w.owner, 'POST', url(w.d1), TARGETS.voice)).id as number;
  t.equal((await call(w.app, w.owner, 'DELETE', url(w.d1, a))).statusCode, 204);
  t.same(json(await call(w.app, w.owner, 'GET', url(w.d1))).map((x: { id: number }) => x.id), [b]);
  isProblem(t, await call(w.app, w.owner, 'DELETE', url(w.d1, a)), 404, 'not-found', 'deleted twice');
  await call(w.app, adminAuth(), 'POST', url(w.d2), TARGETS.fcm);
  t.equal((await call(w.app, adminAuth(), 'DELETE', `/api/devices/${w.d1}`)).statusCode, 204);
  isProblem(t, await call(w.app, adminAuth(), 'GET', url(w.d1)), 404, 'not-found', 'the device is gone');
  const rows = await storedTargets(t, w);
  t.same(rows, [{ device_id: w.d2, kind: 'fcm' }], 'only the other device’s target is left in the table');
});

/** wake_targets as stored, on either adapter */
async function storedTargets(t: Test, w: World): Promise<{ device_id: number; kind: string }[]> {
  if (w.pgUrl) {
    const client = new pg.Client({ connectionString: w.pgUrl });
    await client.connect();
    t.teardown(() => client.end());
    const { rows } = await client.query<{ device_id: string; kind: string }>('SELECT device_id, kind FROM wake_targets ORDER BY id');
    return rows.map((r) => ({ device_id: Number(r.device_id), kind: r.kind }));
  }
  return w.db.$client.prepare('SELECT device_id, kind FROM wake_targets ORDER BY id').all() as { device_id: number; kind: string }[];
}

t.test('when the VAPID public key is asked, then it is served without credentials; 404 when Web Push is not configured', async (t) => {
  const on = await build(t);
  const res = await on.app.inject({ method: 'GET', url: '/api/wake/vapid-public-key' });
  t.equal(res.statusCode, 200);
  t.same(json(res), { publicKey: VAPID_PUBLIC });
  const off = await build(t, ['sms', 'voice']);
  isProblem(t, await off.app.inject({ method: 'GET', url: '/api/wake/vapid-public-key' }), 404, 'not-found', 'not configured');
});
